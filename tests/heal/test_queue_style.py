"""Issue 42: `refresh --write` (and rebase, bump: one writer, pinset/heal/style.py) writes a series back in the
queue's own style. Queues exported by real `git format-patch` on a real repository, refreshed after upstream moved
one hunk: only the file whose diff must change changes, in the queue's own format."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from pinset.cli import main
from pinset.heal import style
from tests.testing import write_pins

COUNT = 36
LINES = "".join(f"line {i}\n" for i in range(1, 31))
MOVED, BELOW = 5, 10     # the patch whose hunk upstream moves; the one whose file upstream changes far below it


def _queue(make_repo, tmp_path, *export_args: str, count: int = COUNT):
    """Upstream b1: files f00..f(count-1); a queue of `count` commits, commit k changing line 15 of fk, exported
    by `git format-patch export_args`; b2: three lines added at the top of f05 (its hunk moves) and one at the end
    of f10 (its hunk does not: only the blob id of its `index` line would change)."""
    up = make_repo("upstream")
    files = {f"src/f{k:02d}.c": LINES for k in range(count)}
    b1 = up.commit("base", files)
    up.tag("b1")
    up.git("checkout", "-q", "-b", "queue", b1)
    for k in range(count):
        up.commit(f"ollama: change {k} of the vendored tree\n\nWhy change {k} is carried.",
                  {f"src/f{k:02d}.c": LINES.replace("line 15\n", f"line 15 patched {k}\n")})
    folder = tmp_path / "patches" / "q"
    up.git("format-patch", "-q", *export_args, "-o", str(folder), f"{b1}..queue")
    up.git("checkout", "-q", "master")
    up.commit("upstream moves one hunk", {f"src/f{MOVED:02d}.c": "top 1\ntop 2\ntop 3\n" + LINES,
                                          f"src/f{BELOW:02d}.c": LINES + "line 31\n"})
    up.tag("b2")
    pins = write_pins(tmp_path / "pins.yaml", f"""
        upstream: {up.path}
        builds: [b1, b2]
        pins:
          - id: q
            patches: patches/q
        """)
    return up, pins, folder


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _refresh(pins: Path, capsys, onto: str = "b2") -> str:
    assert main(["refresh", "-c", str(pins), "--onto", onto, "--write"]) == 0, capsys.readouterr()
    out = capsys.readouterr().out
    assert "offset -> exact" in out and "wrote" in out, out   # a refresh happened: never a test of nothing
    return out


def _changed(before: dict[str, bytes], after: dict[str, bytes]) -> list[str]:
    assert sorted(before) == sorted(after)
    return [name for name in before if before[name] != after[name]]


def test_an_ollama_queue_refreshed_after_one_moved_hunk_changes_one_file(make_repo, tmp_path, capsys):
    """Ollama's `make format-patches`: --zero-commit --no-signature --no-numbered. 36 patches, one hunk moved
    upstream: the other 35 files stay byte for byte (f10's too, though the blob its index line names is no longer
    b2's), the one is written in the queue's style: zeros, no signature, `[PATCH]`, no base-commit."""
    up, pins, folder = _queue(make_repo, tmp_path, "--zero-commit", "--no-signature", "--no-numbered")
    before = _files(folder)
    _refresh(pins, capsys)
    after = _files(folder)
    changed = _changed(before, after)
    assert changed == [f"{MOVED + 1:04d}-ollama-change-{MOVED}-of-the-vendored-tree.patch"], changed
    text = after[changed[0]].decode()
    old = before[changed[0]].decode()
    assert text.startswith(f"From {'0' * 40} Mon Sep 17 00:00:00 2001\n")
    assert "Subject: [PATCH] ollama: change 5 of the vendored tree\n" in text
    assert "\n-- \n" not in text and "base-commit:" not in text
    assert "@@ -12,7 +12,7 @@" in old and "@@ -15,7 +15,7 @@" in text    # the hunk, three lines lower
    # only the diff part moved: the mail's header and message are the old text, and so is the index width
    assert text.split("\n---\n")[0] == old.split("\n---\n")[0]
    assert re.search(r"^index [0-9a-f]{7}\.\.[0-9a-f]{7} 100644$", text, re.M), text
    # plain `git am -3` applies the written series on b2 (README: git am -3 parity), to the pinned tree
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(up.path), str(clone)], check=True)
    subprocess.run(["git", "-C", str(clone), "checkout", "-q", "b2"], check=True)
    am = subprocess.run(["git", "-C", str(clone), "-c", "user.name=t", "-c", "user.email=t@t", "am", "-3", "-q",
                         *[str(p) for p in sorted(folder.glob("*.patch"))]], capture_output=True, text=True)
    assert am.returncode == 0, am.stderr
    assert (clone / "src/f05.c").read_text() == "top 1\ntop 2\ntop 3\n" + LINES.replace("line 15\n", "line 15 patched 5\n")
    assert (clone / "src/f10.c").read_text() == LINES.replace("line 15\n", "line 15 patched 10\n") + "line 31\n"
    # the refreshed set is exact on b2 now
    assert main(["refresh", "-c", str(pins), "--onto", "b2"]) == 0
    assert "nothing to refresh on b2" in capsys.readouterr().out


def test_a_numbered_queue_with_another_machines_signature_keeps_both(make_repo, tmp_path, capsys):
    """A queue of numbered patches signed by the exporter's git (2.30.1 here, not this machine's): the moved
    patch keeps `[PATCH 06/12]`, its signature text and a real From line (the commit as exported now); the
    others stay as they are."""
    up, pins, folder = _queue(make_repo, tmp_path, "--numbered", "--signature=2.30.1", count=12)
    before = _files(folder)
    _refresh(pins, capsys)
    after = _files(folder)
    changed = _changed(before, after)
    assert changed == [f"{MOVED + 1:04d}-ollama-change-{MOVED}-of-the-vendored-tree.patch"], changed
    text, old = after[changed[0]].decode(), before[changed[0]].decode()
    assert "Subject: [PATCH 06/12] ollama: change 5 of the vendored tree\n" in text
    assert text.endswith("\n-- \n2.30.1\n\n"), text[-60:]
    local = subprocess.run(["git", "--version"], capture_output=True, text=True).stdout.split()[-1]
    assert local != "2.30.1" and local not in text.split("\n-- \n")[-1]
    sha = re.match(r"From ([0-9a-f]{40}) ", text)[1]
    assert sha != "0" * 40 and sha != re.match(r"From ([0-9a-f]{40}) ", old)[1]


def test_a_base_commit_queue_names_the_new_build_and_only_where_it_was(make_repo, tmp_path, capsys):
    """`--base=b1`: git writes the block in the first patch; refreshed onto b2 it names b2 (an upstream commit)
    there, so that file changes too, and the moved one; nothing else."""
    up, pins, folder = _queue(make_repo, tmp_path, "--base=b1", count=8)
    before = _files(folder)
    _refresh(pins, capsys)
    after = _files(folder)
    first, moved = sorted(after)[0], sorted(after)[MOVED]
    assert _changed(before, after) == [first, moved]
    b2 = up.git("rev-parse", "b2").strip()
    assert f"\nbase-commit: {b2}\n" in after[first].decode()
    # the rest of it as it was but the From line (a real commit id: the commit as exported now)
    b1 = up.git("rev-parse", "b1").strip()
    assert after[first].decode().replace(b2, "X").split("\n", 1)[1] == before[first].decode().replace(b1, "X").split("\n", 1)[1]
    assert "base-commit:" not in after[moved].decode()


def test_a_queue_without_base_commit_never_gets_one(make_repo, tmp_path, capsys):
    """The default export (numbered, signed) of a queue without `--base`: no base-commit appears anywhere."""
    _, pins, folder = _queue(make_repo, tmp_path, count=8)
    _refresh(pins, capsys)
    assert not any(b"base-commit:" in data for data in _files(folder).values())


def _sdist(cache: Path, version: str, upstream_commit: str, files: dict[str, str]) -> str:
    from tests.sim.test_sim_determinism import fake_sdist
    return fake_sdist(cache, version, upstream_commit, files)


@pytest.mark.parametrize("known", [True, False], ids=["changelog-commit-in-upstream", "changelog-commit-unknown"])
def test_an_sdist_build_never_gets_the_mirror_commit_as_base(make_repo, tmp_path, capsys, monkeypatch, known):
    """An sdist build's tree is pinset's mirror commit, which no one else can resolve: the base-commit names its
    CHANGELOG's commit in full where the upstream history the cache holds has it, else none (a note says why)."""
    up, pins, folder = _queue(make_repo, tmp_path, "--base=b1", count=8)
    b2 = up.git("rev-parse", "b2").strip()
    cache = tmp_path / "cache"
    monkeypatch.setenv("PINSET_CACHE", str(cache))
    files = {p: up.git("show", f"b2:{p}") + "" for p in up.git("ls-tree", "-r", "--name-only", "b2").split()}
    build = _sdist(cache, "0.0.2", b2 if known else "abcdef1234", files)
    pins.write_text(pins.read_text().replace("builds: [b1, b2]", f"builds: [b1, b2, '{build}']"))
    main(["sim", "-c", str(pins)])   # the cache fetches b1 and b2 (upstream history holding b2)
    capsys.readouterr()
    out = _refresh(pins, capsys, onto=build)
    first = sorted(folder.iterdir())[0].read_text()
    mirror_commit = subprocess.run(["git", "-C", str(cache / "mirror.git"), "rev-parse",
                                    "refs/pinset/pypi/llama-cpp-python/0.0.2"], capture_output=True, text=True).stdout.strip()
    assert mirror_commit and mirror_commit not in first
    if known:
        assert f"\nbase-commit: {b2}\n" in first, out
    else:
        assert "base-commit:" not in first
        assert "base-commit: left out of the written series" in out and "abcdef123 " in out


def test_mails_are_cut_where_git_am_cuts_them():
    """A removed line reading `-- ` is a line of the file, not the signature; the tail is what follows the hunks."""
    text = ("From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\nFrom: a <a@b>\n"
            "Subject: [PATCH] x\n\n---\n a | 2 +-\n 1 file changed, 1 insertion(+), 1 deletion(-)\n\ndiff --git a/a b/a\nindex 1234567..89abcde 100644\n--- a/a\n"
            "+++ b/a\n@@ -1,2 +1,2 @@\n-- \n+x\n keep\n\nbase-commit: " + "1" * 40 + "\n-- \n2.1.0\n\n")
    mail = style.parse_mail(text)
    assert mail.diff.endswith("-- \n+x\n keep\n") and mail.tail == "\nbase-commit: " + "1" * 40 + "\n-- \n2.1.0\n\n"
    assert mail.signature == "-- \n2.1.0\n\n" and mail.base_lines == ["base-commit: " + "1" * 40]
    assert mail.head + mail.between + mail.diff + mail.tail == text
    assert style.with_base(mail.tail, []) == "-- \n2.1.0\n\n"
    assert style.detect([mail]).format_args() == ["--no-signature", "--subject-prefix=PATCH", "--abbrev=7", "-U1"]


def test_rebase_continue_writes_the_resolved_series_in_the_queues_style(make_repo, tmp_path, capsys):
    """The same writer at `rebase --continue`: after a real conflict in patch 6 of an Ollama queue, only that file
    changes (and the ledger is added), zeros and no signature kept."""
    up, pins, folder = _queue(make_repo, tmp_path, "--zero-commit", "--no-signature", "--no-numbered", count=8)
    up.commit("clash", {f"src/f{MOVED:02d}.c": "top 1\ntop 2\ntop 3\n" + LINES.replace("line 15\n", "line 15 upstream\n")})
    up.tag("b3")
    before = _files(folder)
    wt = tmp_path / "wt"
    assert main(["rebase", "q", "-c", str(pins), "--onto", "b3", "--worktree", str(wt)]) == 1
    capsys.readouterr()
    text = (wt / "src/f05.c").read_text()
    start, end = text.index("<<<<<<<"), text.index("\n", text.index(">>>>>>>")) + 1
    (wt / "src/f05.c").write_text(text[:start] + "line 15 upstream patched 5\n" + text[end:])
    subprocess.run(["git", "add", "src/f05.c"], cwd=wt, check=True)
    assert main(["rebase", "q", "-c", str(pins), "--continue", "--worktree", str(wt)]) == 0, capsys.readouterr()
    capsys.readouterr()
    after = {p.name: p.read_bytes() for p in sorted(folder.glob("*.patch"))}
    changed = _changed(before, after)
    assert changed == [f"{MOVED + 1:04d}-ollama-change-{MOVED}-of-the-vendored-tree.patch"], changed
    written = after[changed[0]].decode()
    assert written.startswith(f"From {'0' * 40} ") and "\n-- \n" not in written and "base-commit:" not in written
    assert "+line 15 upstream patched 5" in written and "Subject: [PATCH] ollama: change 5" in written
    assert (folder / "resolutions").is_dir()


@pytest.mark.parametrize("export", [
    ("--zero-commit", "--no-signature", "--no-numbered"),
    ("--numbered", "--signature=2.30.1"),
    ("-k", "--no-signature"),
    ("--subject-prefix=PATCH llama", "--full-index", "-U5", "--no-stat", "--zero-commit"),
], ids=["ollama", "numbered-signed", "keep-subject", "prefix-full-index-U5-no-stat"])
def test_the_written_file_is_what_the_users_own_export_writes_on_the_new_build(make_repo, tmp_path, capsys, export):
    """The one changed file is byte for byte what the user's own `git format-patch EXPORT` writes for that commit
    rebased onto b2 (`git am -3` of the old series in a clone, then the export again), but for a real From line's
    commit id (another committer made it); every other file is the old one."""
    up, pins, folder = _queue(make_repo, tmp_path, *export, count=12)
    before = _files(folder)
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(up.path), str(clone)], check=True)
    subprocess.run(["git", "-C", str(clone), "checkout", "-q", "b2"], check=True)
    am = subprocess.run(["git", "-C", str(clone), "-c", "user.name=c", "-c", "user.email=c@c", "am", "-3", "-q",
                         *(["-k"] if "-k" in export else []), *[str(folder / n) for n in sorted(before)]],
                        capture_output=True, text=True)
    assert am.returncode == 0, am.stderr
    theirs = tmp_path / "theirs"
    subprocess.run(["git", "-C", str(clone), "format-patch", "-q", *export, "-o", str(theirs), "b2..HEAD"], check=True)
    _refresh(pins, capsys)
    after = _files(folder)
    changed = _changed(before, after)
    assert changed == [sorted(before)[MOVED]], changed

    def masked(data: bytes) -> str:
        return re.sub(r"^From [0-9a-f]{40} ", "From X ", data.decode(), count=1)
    assert masked(after[changed[0]]) == masked((theirs / changed[0]).read_bytes())
