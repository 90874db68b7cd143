"""The pin set agrees with plain `git am -3`, line endings and bytes included: a differential test on real
repositories (CRLF files, patches saved with CRLF line ends, non-UTF-8 lines)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from pinset.cli import main
from pinset.sim.changes import line_counts, patch_text
from tests.testing import GIT_ENV, GitRepo, one_pin_yaml, write_pins

LF = b"".join(b"line %d\n" % i for i in range(1, 21))
CRLF = LF.replace(b"\n", b"\r\n")
LATIN1 = b"".join(b"ligne %d caf\xe9\n" % i for i in range(1, 21))


def _commit(repo: GitRepo, message: str, files: dict[str, bytes]) -> str:
    for rel, data in files.items():
        (repo.path / rel).write_bytes(data)
        repo.git("add", rel)
    repo.git("commit", "-q", "-m", message)
    return repo.head()


def _patch(repo: GitRepo, base: str, message: str, files: dict[str, bytes], out: Path) -> Path:
    repo.git("checkout", "-q", "-b", "tmp", base)
    _commit(repo, message, files)
    name = repo.git("format-patch", "-o", str(out), f"--base={base}", f"{base}..tmp").split()[0]
    repo.git("checkout", "-q", "master")
    repo.git("branch", "-q", "-D", "tmp")
    return Path(name)


@pytest.fixture
def upstream(make_repo):
    """b1: lf.txt (LF), crlf.txt (CRLF) and latin1.txt (ISO-8859-1); b2: two lines added on top of each
    (every pin's context moves)."""
    up = make_repo("upstream")
    b1 = _commit(up, "base", {"lf.txt": LF, "crlf.txt": CRLF, "latin1.txt": LATIN1})
    up.tag("b1")
    _commit(up, "moved", {"lf.txt": b"top\ntop 2\n" + LF, "crlf.txt": b"top\r\ntop 2\r\n" + CRLF,
                          "latin1.txt": b"haut\nhaut 2\n" + LATIN1})
    up.tag("b2")
    return up, b1


def _pins(tmp_path: Path, up: GitRepo, patch: Path) -> Path:
    folder = tmp_path / "project" / "p"
    folder.mkdir(parents=True)
    (folder / patch.name).write_bytes(patch.read_bytes())
    return write_pins(tmp_path / "project" / "pins.yaml", f"""
        upstream: {up.path}
        builds: [b1, b2]
        pins:
          - id: p
            patches: p
            unchecked: test
        """)


def _plain_git_am(up: GitRepo, build: str, patch: Path, where: Path, *extra: str) -> dict[str, bytes] | None:
    """What `git am -3` of the patch on `build` gives (a clone's files), None when it fails."""
    env = {**os.environ, **GIT_ENV}
    subprocess.run(["git", "clone", "-q", "--no-checkout", str(up.path), str(where)], check=True, env=env)
    subprocess.run(["git", "checkout", "-q", "--detach", build], cwd=where, check=True, env=env)
    done = subprocess.run(["git", "am", "-3", "-q", *extra, str(patch)], cwd=where, env=env, capture_output=True)
    if done.returncode != 0:
        return None
    return {p.name: p.read_bytes() for p in where.iterdir() if p.is_file()}


CASES = {
    # a patch saved with CRLF line ends (a Windows editor, a mail client): am strips them (mailsplit)
    "lf-file-crlf-patch": ("lf.txt", LF.replace(b"line 10\n", b"line 10 pinned\n"), True),
    # format-patch of a CRLF file: its diff lines end in CRLF, the file's own; plain `git am -3` strips them and
    # fails, pinset keeps them (an earlier promise: a CRLF file's patch applies), as `git am -3 --keep-cr` does
    "crlf-file": ("crlf.txt", CRLF.replace(b"line 10\r\n", b"line 10 pinned\r\n"), False),
    # that patch saved with CRLF line ends too: am takes one CR off each line, the file's stay
    "crlf-file-crlf-patch": ("crlf.txt", CRLF.replace(b"line 10\r\n", b"line 10 pinned\r\n"), True),
    # an ISO-8859-1 line added: bytes, never decoded text
    "latin1-added-line": ("latin1.txt", LATIN1.replace(b"ligne 10 caf\xe9\n", b"ligne 10 caf\xe9 cr\xe8me\n"), False),
    # Windows-1252 "Â" is valid UTF-8 for U+0085 (a line break to str.splitlines), a form feed in C
    "cp1252-next-line": ("latin1.txt", LATIN1.replace(b"ligne 10 caf\xe9\n", b"ligne 10 \xc2\x85 fin\x0c suite\n"),
                         False),
    "lf-control": ("lf.txt", LF.replace(b"line 10\n", b"line 10 pinned\n"), False),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_sim_and_apply_agree_with_git_am(upstream, tmp_path, case, capsys):
    up, b1 = upstream
    path, new, crlf_patch = CASES[case]
    patch = _patch(up, b1, f"change {path}", {path: new}, tmp_path / "made")
    if crlf_patch:
        patch.write_bytes(patch.read_bytes().replace(b"\n", b"\r\n"))
    pins_yaml = _pins(tmp_path, up, patch)
    main(["sim", "-c", str(pins_yaml), "--json", str(tmp_path / "sim.json")])
    sim = {b["build"]: b["pins"][0] for b in json.loads((tmp_path / "sim.json").read_text())["builds"]}
    for build in ("b1", "b2"):
        plain = _plain_git_am(up, build, patch, tmp_path / f"am-{build}", *(["--keep-cr"] if case == "crlf-file" else []))
        pin = sim[build]
        if plain is None:
            assert pin["status"] == "conflict", (build, pin)
            continue
        assert pin["status"] == "applied" and pin["contract"] == {"ok": True, "problems": []}, (build, pin)
        out = tmp_path / f"apply-{build}"
        assert main(["apply", "-c", str(pins_yaml), "--build", build, "--out", str(out)]) == 0
        assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == plain, build


def test_lines_compare_as_bytes():
    """Two ISO-8859-1 lines that differ are two lines, not one U+FFFD line; only a newline ends a line."""
    assert line_counts(patch_text(b"caf\xe9\ncaf\xe8\n")) == {patch_text(b"caf\xe9"): 1, patch_text(b"caf\xe8"): 1}
    assert line_counts(patch_text(b"a \xc2\x85 b\x0c c\r\n")) == {"a \x85 b\x0c c": 1}


def test_a_pr_pins_non_utf8_lines_reach_the_tree_as_bytes(upstream, tmp_path, capsys):
    """A PR pin's diff is kept as git wrote it: its ISO-8859-1 line is in the applied tree byte for byte."""
    up, b1 = upstream
    up.git("checkout", "-q", "-b", "pr", b1)
    changed = LATIN1.replace(b"ligne 10 caf\xe9\n", b"ligne 10 caf\xe9 cr\xe8me\n")
    pr_head = _commit(up, "pr", {"latin1.txt": changed})
    up.git("update-ref", "refs/pull/9/head", pr_head)
    up.git("checkout", "-q", "master")
    pins_yaml = one_pin_yaml(tmp_path / "pins.yaml", up.path, "pr9", pr="https://github.com/ggml-org/llama.cpp/pull/9",
                             commit=pr_head, unchecked="test")
    assert main(["apply", "-c", str(pins_yaml), "--build", "b1", "--out", str(tmp_path / "tree")]) == 0
    assert (tmp_path / "tree" / "latin1.txt").read_bytes() == changed
