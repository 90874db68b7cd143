"""pygit2 in-process apply vs one `git apply --cached` process vs a memo hit, the many-pin queue on 0.3.36.

Usage: python benchmarks/pygit2_apply.py WORK PYGIT2_DIR  (WORK: sim_speed.py --work folder after --case many;
PYGIT2_DIR: a `pip install --target` folder with pygit2: it is not a dependency of pinset)
"""
import sys, time, subprocess, os, glob
WORK = sys.argv[1]
sys.path.insert(0, sys.argv[2]); sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent.parent))
import pygit2
from pinset.sim import memo
repo = pygit2.Repository(WORK + "/cache/mirror.git")
tree = repo.revparse_single("db68f88f0f4a96b7d73019ab8df110984e41ce62").peel(pygit2.Tree)
patches = sorted(glob.glob(WORK + "/many/patches/*.patch"))
texts = [open(p, "rb").read() for p in patches]
t = time.perf_counter(); applied = 0
repo.index.read_tree(tree)
for text in texts:
    diff = pygit2.Diff.parse_diff(text[text.index(b"diff --git"):].split(b"\n-- \n")[0] + b"\n")
    applied += repo.applies(diff, location=pygit2.enums.ApplyLocation.INDEX, raise_error=False)
pg = time.perf_counter() - t
env = dict(os.environ, GIT_INDEX_FILE=WORK + "/pg-index")
subprocess.run(["git", "--git-dir", WORK + "/cache/mirror.git", "read-tree", "db68f88f0f4a96b7d73019ab8df110984e41ce62"], env=env, check=True)
base = open(WORK + "/pg-index", "rb").read()
t = time.perf_counter(); gok = 0
for p in patches:
    open(WORK + "/pg-index", "wb").write(base)
    gok += subprocess.run(["git", "--git-dir", WORK + "/cache/mirror.git", "apply", "--cached", p], env=env, capture_output=True).returncode == 0
g = time.perf_counter() - t
m = memo.ApplyMemo(None)
t = time.perf_counter()
for text in texts:
    k = memo.apply_key([text], True, [("x", 0o100644, "0"*40)], [], "git")
    m.get(k)
mm = time.perf_counter() - t
print(f"pygit2 {pygit2.__version__} / libgit2 {pygit2.LIBGIT2_VERSION}, 36 one-patch pins on 0.3.36 (whole-tree index):")
print(f"  pygit2 parse_diff + applies(INDEX) (in process): {pg*1000:.0f} ms, {applied} apply (no 3-way)")
print(f"  git apply --cached, one process each:           {g*1000:.0f} ms, {gok} apply")
print(f"  memo key + lookup (in the run):                 {mm*1000:.1f} ms")
