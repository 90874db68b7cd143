"""A private bare git repository in the cache that holds every upstream build and pin.

All git work (fetches, imports, in-memory applies on temporary index files) happens here, so the
user's own checkouts are never touched. Blobs are content-addressed, so a tree imported from an sdist
shares its objects with the same files fetched from GitHub. What a `git apply --3way` may read is
not the whole mirror but a private object directory (see object_dir and the sim engine), so a
verdict does not depend on what earlier runs happened to fetch.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

import git

from pinset import runner
from pinset.errors import UpstreamError

# Fixed identity and dates make imported commits reproducible: same tree -> same commit id.
_IDENTITY = {
    "GIT_AUTHOR_NAME": "pinset", "GIT_AUTHOR_EMAIL": "pinset@localhost",
    "GIT_COMMITTER_NAME": "pinset", "GIT_COMMITTER_EMAIL": "pinset@localhost",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2000-01-01T00:00:00Z",
}


class Mirror:
    def __init__(self, path: Path):
        self.path = Path(path)
        if not (self.path / "HEAD").exists():
            self.path.mkdir(parents=True, exist_ok=True)
            git.Repo.init(self.path, bare=True)
        self.repo = git.Repo(self.path)
        self._tmp = Path(tempfile.mkdtemp(prefix="pinset-idx-"))
        self._index_seq = 0

    # --- plumbing -------------------------------------------------------------------------
    def git(self, *args: str, index: Path | None = None, input: str | None = None,
            timeout: float = 600, env: dict | None = None, work_tree: Path | None = None) -> runner.Completed:
        """git on the mirror; `index` is a temporary index file, `work_tree` a folder to read or write."""
        full_env = dict(env or {})
        if index is not None:
            full_env["GIT_INDEX_FILE"] = str(index)
        prefix = ["git", "--git-dir", str(self.path)]
        if work_tree is not None:
            prefix += ["--work-tree", str(work_tree)]
        return runner.run([*prefix, *args], env=full_env or None, input=input, timeout=timeout,
                          cwd=work_tree)

    def git_ok(self, *args: str, **kw) -> str:
        result = self.git(*args, **kw)
        if not result.ok:
            raise UpstreamError(f"git {' '.join(args[:3])}: {result.tail(3) or result.describe()}")
        return result.stdout

    def temp_path(self, name: str) -> Path:
        """A path in the mirror's temporary folder (index files), removed by close()."""
        return self._tmp / name

    def new_index(self, tree: str) -> Path:
        """A temporary index file loaded with `tree` (for in-memory applies)."""
        self._index_seq += 1
        index = self.temp_path(f"index-{self._index_seq}")
        self.git_ok("read-tree", tree, index=index)
        return index

    def write_tree(self, index: Path) -> str:
        return self.git_ok("write-tree", index=index).strip()

    def has_commit(self, rev: str) -> bool:
        return self.git("cat-file", "-e", f"{rev}^{{commit}}").ok

    def rev_parse(self, rev: str) -> str | None:
        result = self.git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
        return result.stdout.strip() if result.ok else None

    def tree_of(self, commit: str) -> str:
        return self.git_ok("rev-parse", f"{commit}^{{tree}}").strip()

    def read_blob(self, tree: str, path: str) -> str | None:
        """Text of `path` in `tree`, or None when absent (uses git's persistent cat-file)."""
        try:
            _, kind, _, data = self.repo.git.get_object_data(f"{tree}:{path}")
        except (ValueError, git.GitCommandError):
            return None
        if kind != b"blob":
            return None
        return data.decode("utf-8", errors="replace")

    # --- fetching -------------------------------------------------------------------------
    def fetch(self, url: str, refspecs: list[str], timeout: float = 900) -> runner.Completed:
        return self.git("fetch", "--no-tags", "--quiet", url, *refspecs, timeout=timeout,
                        env={"GIT_TERMINAL_PROMPT": "0"})

    # --- imports --------------------------------------------------------------------------
    def import_directory(self, directory: Path, ref: str, message: str) -> str:
        """Commit the files of `directory` as a root commit at `ref`; return the commit id."""
        index = self.temp_path("import-index")
        if index.exists():
            index.unlink()
        add = self.git("add", "-A", "-f", ".", index=index, work_tree=directory, timeout=900)
        if not add.ok:
            raise UpstreamError(f"importing {directory}: {add.tail(3)}")
        tree = self.write_tree(index)
        commit = self.git_ok("commit-tree", tree, "-m", message, env=_IDENTITY).strip()
        self.git_ok("update-ref", ref, commit)
        return commit

    def commit_message(self, commit: str) -> str:
        return self.git_ok("log", "-1", "--format=%B", commit)

    def materialize(self, tree: str, dest: Path) -> None:
        """Write the files of `tree` into the (new or empty) folder `dest`."""
        dest.mkdir(parents=True, exist_ok=True)
        index = self.new_index(tree)
        checkout = self.git("checkout-index", "-a", "-f", index=index, work_tree=dest.resolve(), timeout=900)
        if not checkout.ok:
            raise UpstreamError(f"writing tree {tree[:12]} to {dest}: {checkout.tail(2)}")

    # --- private object directories -------------------------------------------------------
    def object_dir(self, name: str, blobs: Iterable[str] = ()) -> Path:
        """A new object directory in the temporary folder holding exactly `blobs` (packed from the
        mirror) and no alternates: git pointed at it sees nothing else of the mirror."""
        path = self.temp_path(name)
        path.mkdir()
        oids = sorted(set(blobs))
        if oids:
            (path / "pack").mkdir()
            self.git_ok("pack-objects", "-q", "--window=0", str(path / "pack" / "pack"), input="\n".join(oids) + "\n")
        return path

    @staticmethod
    def objects_env(write: Path, read: Iterable[Path] = ()) -> dict[str, str]:
        """Environment for a git that writes objects to `write` and reads only `write` and `read`."""
        return {"GIT_OBJECT_DIRECTORY": str(write),
                "GIT_ALTERNATE_OBJECT_DIRECTORIES": os.pathsep.join(str(p) for p in read)}

    def adopt_objects(self, oids: Iterable[str], sources: Iterable[Path]) -> None:
        """Copy into the mirror those of `oids` it lacks, from the object directories `sources`."""
        wanted = sorted(set(oids))
        if not wanted:
            return
        check = self.git_ok("cat-file", "--batch-check", input="\n".join(wanted) + "\n")
        missing = [line.split()[0] for line in check.splitlines() if line.endswith(" missing")]
        if missing:
            self.git_ok("pack-objects", "-q", "--window=0", str(self.path / "objects" / "pack" / "pack"),
                        input="\n".join(missing) + "\n",
                        env={"GIT_ALTERNATE_OBJECT_DIRECTORIES": os.pathsep.join(str(p) for p in sources)})

    def close(self) -> None:
        import shutil

        self.repo.close()
        shutil.rmtree(self._tmp, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
