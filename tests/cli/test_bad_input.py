"""Bad input of every kind: one line naming the file (and line and key), exit 2, nothing changed.

Each class is tested through the CLI (`main`), with the exact first line, because the user sees that line
and nothing else. Unreadable files are made real: running as root passes every permission check, so the
tests drop the effective uid for the call instead (see `unprivileged`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import stat
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings, strategies as st

from pinset import cli
from pinset.cli import main
from pinset.commands.paths import _path_or_stdout as path_or_stdout
from pinset.config.schema import load_pinset
from pinset.errors import PinsetError
from tests.testing import A_TXT_PATCH, child_env, write_pins

SHA = "44eb88e9aba218b24c0f374f2ec1c4d7d7920877"
PATCH = A_TXT_PATCH.replace("--- a/a.txt", "index 7898192..6178079 100644\n--- a/a.txt")   # as git writes it
PINS = "upstream: https://github.com/ggml-org/llama.cpp\nbuilds: [b1]\npins:\n  - id: a\n    patches: patches/s\n"


@pytest.fixture
def project(tmp_path):
    """A pins.yaml with one valid patch series; tests break one thing in it."""
    (tmp_path / "patches" / "s").mkdir(parents=True)
    (tmp_path / "patches" / "s" / "0001-change.patch").write_text(PATCH)
    write_pins(tmp_path / "pins.yaml", PINS)
    return tmp_path


def snapshot(root: Path) -> dict:
    """Every path under root with its type, size and mtime: to prove that nothing changed (pinset's own
    cache folder aside: opening it may create it empty)."""
    out = {}
    for path in sorted(root.rglob("*")):
        if path.relative_to(root).parts[0] == "cache":
            assert path == root / "cache", f"{path}: written in the cache"
            continue
        st_ = path.lstat()
        out[str(path.relative_to(root))] = (stat.S_IFMT(st_.st_mode), st_.st_size, st_.st_mtime_ns)
    return out


def bad(capsys, argv: list[str], root: Path | None = None) -> str:
    """Run pinset; assert exit 2, exactly one line on stderr, nothing on stdout, nothing changed under root."""
    before = snapshot(root) if root else None
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse
        code = exc.code
    out, err = capsys.readouterr()
    assert code == 2, err
    assert len(err.splitlines()) == 1, err
    assert "Traceback" not in err and not out.strip()
    if root:
        assert snapshot(root) == before
    return err.rstrip("\n")


@contextlib.contextmanager
def unprivileged():
    """Real permission checks for the duration: as root, run with the effective uid of `nobody`."""
    if os.geteuid() != 0:
        yield
        return
    import encodings.utf_8_sig  # noqa: F401  (the standard library under /root is out of reach then)
    os.setegid(65534)
    os.seteuid(65534)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)


@pytest.fixture
def shared_dir():
    """A folder `nobody` can reach (pytest's tmp_path lives under a root-only folder)."""
    path = Path(tempfile.mkdtemp(prefix="pinset-bad-input-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


# --- the pin set file itself --------------------------------------------------------------------

def test_latin1_pins_yaml(project, capsys):
    cfg = project / "pins.yaml"
    cfg.write_bytes((PINS + "description: café\n").encode("latin-1"))
    assert bad(capsys, ["sim", "-c", str(cfg)], project) == (
        f"pinset sim: error: {cfg}:6: not UTF-8: byte 0xe9 in column 17 (Latin-1 or another encoding?); "
        "save the file as UTF-8")


@pytest.mark.parametrize("codec, name", [("utf-16", "UTF-16"), ("utf-16-be", "UTF-16"), ("utf-32", "UTF-32")])
def test_utf16_and_utf32_pins_yaml(project, capsys, codec, name):
    cfg = project / "pins.yaml"
    data = PINS.encode(codec)
    if codec == "utf-16-be":
        data = b"\xfe\xff" + data
    cfg.write_bytes(data)
    assert bad(capsys, ["sim", "-c", str(cfg)], project) == (
        f"pinset sim: error: {cfg}: encoded as {name} (it starts with a {name} byte-order mark); "
        "pinset reads UTF-8: convert it, e.g. with iconv -t UTF-8")


def test_utf16_without_bom_and_binary_files(project, capsys):
    cfg = project / "pins.yaml"
    cfg.write_bytes(PINS.encode("utf-16-le"))
    assert bad(capsys, ["sim", "-c", str(cfg)], project) == (
        f"pinset sim: error: {cfg}:1: contains NUL bytes: not UTF-8 text (UTF-16 without a byte-order mark, "
        "or a binary file?)")
    cfg.write_bytes(b"builds: [b1]\n\x07\n")
    assert bad(capsys, ["sim", "-c", str(cfg)], project) == (
        f"pinset sim: error: {cfg}:2: not valid YAML: unacceptable character #x0007: special characters are "
        "not allowed")


def test_utf8_with_bom_is_read(project):
    cfg = project / "pins.yaml"
    cfg.write_bytes(b"\xef\xbb\xbf" + (PINS + "description: café\n").encode())
    assert load_pinset(cfg).description == "café"


def test_config_that_is_not_a_readable_file(project, capsys):
    folder = project / "patches"
    assert bad(capsys, ["sim", "-c", str(folder)], project) == \
        f"pinset sim: error: {folder}: is a folder, not a pin set file"
    missing = project / "none.yaml"
    assert bad(capsys, ["sim", "-c", str(missing)], project) == f"pinset sim: error: {missing}: no such file"
    broken = project / "broken.yaml"
    broken.symlink_to(project / "gone.yaml")
    assert bad(capsys, ["sim", "-c", str(broken)], project) == \
        f"pinset sim: error: {broken}: broken symbolic link (to {project / 'gone.yaml'})"
    under_file = project / "pins.yaml" / "pins.yaml"
    assert bad(capsys, ["verify", "-c", str(under_file)], project) == \
        f"pinset verify: error: {under_file}: no such file (a part of the path is not a folder)"


def test_config_fifo_does_not_block(project, capsys):
    fifo = project / "pins.fifo"
    os.mkfifo(fifo)
    started = time.monotonic()
    assert bad(capsys, ["sim", "-c", str(fifo)], project) == (
        f"pinset sim: error: {fifo}: not a regular file (a FIFO, socket or device), not a pin set file")
    assert time.monotonic() - started < 5


def test_unreadable_config(shared_dir, capsys):
    cfg = write_pins(shared_dir / "pins.yaml", PINS)
    cfg.chmod(0)
    main(["sim", "-c", str(shared_dir / "none.yaml")])  # import everything while we may
    capsys.readouterr()
    with unprivileged():
        line = bad(capsys, ["sim", "-c", str(cfg)], shared_dir)
    assert line == f"pinset sim: error: {cfg}: cannot read: permission denied"


def test_absurd_nesting_is_refused_quickly(project, capsys):
    cfg = project / "pins.yaml"
    for text, line in (("[" * 10_000 + "]" * 10_000, 1),
                       ("a:\n" + "".join(" " * i + "b:\n" for i in range(1, 200)), 32)):
        cfg.write_text(text)
        started = time.monotonic()
        assert bad(capsys, ["sim", "-c", str(cfg)], project) == \
            f"pinset sim: error: {cfg}:{line}: nested more than 32 levels deep (a pin set needs at most 8)"
        assert time.monotonic() - started < 5


def test_alias_bomb_and_recursive_alias(project, capsys):
    cfg = project / "pins.yaml"
    lol = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 9) + "]\n" for i in range(9))
    cfg.write_text(lol)
    started = time.monotonic()
    assert bad(capsys, ["sim", "-c", str(cfg)], project) == \
        f"pinset sim: error: {cfg}:6: more than 100000 values once aliases (*name) are expanded"
    assert time.monotonic() - started < 5
    cfg.write_text("builds: &a [b1, *a]\n")
    assert bad(capsys, ["sim", "-c", str(cfg)], project) == \
        f"pinset sim: error: {cfg}:1: an alias (*name) refers to a node that contains it"


def test_aliases_that_expand_modestly_are_fine(project):
    cfg = write_pins(project / "pins.yaml", """
        upstream: https://github.com/ggml-org/llama.cpp
        builds: [b1]
        pins:
          - id: a
            patches: patches/s
            checks: &checks [{ctest: {name: test-chat}}]
          - id: b
            patches: patches/s
            checks: *checks
        """)
    assert [len(p.checks) for p in load_pinset(cfg).pins] == [1, 1]


@pytest.mark.parametrize("value, shown", [(".nan", "'.nan'"), (".inf", "'.inf'"), ("-5", "'-5'"), ("0", "'0'")])
def test_check_timeout_must_be_finite_and_positive(project, capsys, value, shown):
    cfg = write_pins(project / "pins.yaml", PINS + f"    checks:\n      - command: {{argv: [x], expect: y, timeout: {value}}}\n")
    assert bad(capsys, ["sim", "-c", str(cfg)], project) == (
        f"pinset sim: error: {cfg}:7: pins[0].checks[0].command.timeout: must be a finite number of seconds > 0, "
        f"got {shown}")


@pytest.mark.parametrize("value", ["1e9", "1000001", "0x7fffffff"])
def test_check_timeout_beyond_what_a_wait_can_take(project, capsys, value):
    cfg = write_pins(project / "pins.yaml", PINS + f"    checks:\n      - command: {{argv: [x], expect: y, timeout: {value}}}\n")
    assert bad(capsys, ["sim", "-c", str(cfg)], project) == (
        f"pinset sim: error: {cfg}:7: pins[0].checks[0].command.timeout: must be at most 1000000 seconds (11 days), "
        f"got {value!r}")


def test_empty_checks_list_is_not_a_pin_without_checks(project, capsys):
    cfg = write_pins(project / "pins.yaml", PINS + "    checks: []\n")
    assert bad(capsys, ["sim", "-c", str(cfg)], project) == (
        f"pinset sim: error: {cfg}:6: pins[0].checks: empty list (list the feature checks, or give `unchecked: why`)")


def test_scalars_with_explicit_tags(project, capsys):
    cfg = write_pins(project / "pins.yaml", PINS + "    required: !!bool maybe\n")
    assert bad(capsys, ["sim", "-c", str(cfg)], project) == \
        f"pinset sim: error: {cfg}:6: pins[0].required: must be true or false, got 'maybe'"
    cfg = write_pins(project / "pins.yaml",
                     PINS + "    checks:\n      - command: {argv: [x], expect: y, timeout: !!int abc}\n")
    assert bad(capsys, ["sim", "-c", str(cfg)], project) == \
        f"pinset sim: error: {cfg}:7: pins[0].checks[0].command.timeout: must be a number of seconds, got 'abc'"
    cfg = write_pins(project / "pins.yaml", PINS + "    checks:\n      - command: {argv: [x], expect: y, timeout: 0x10}\n")
    assert load_pinset(cfg).pins[0].checks[0].timeout == 16.0


@pytest.mark.parametrize("value, seconds", [("1e3", 1000.0), ("2.5E2", 250.0), ("1.0e+3", 1000.0), ("90", 90.0)])
def test_check_timeout_in_exponent_notation(project, value, seconds):
    """YAML 1.1 reads `1e3` as a string: a timeout written so is still a number of seconds."""
    cfg = write_pins(project / "pins.yaml", PINS + f"    checks:\n      - command: {{argv: [x], expect: y, timeout: {value}}}\n")
    assert load_pinset(cfg).pins[0].checks[0].timeout == seconds
    cfg = write_pins(project / "pins.yaml", PINS + f"    checks:\n      - command: {{argv: [x], expect: y, timeout: '{value}'}}\n")
    with pytest.raises(PinsetError, match="must be a number of seconds"):
        load_pinset(cfg)  # quoted: a string, as everywhere in YAML


# --- patch series --------------------------------------------------------------------------------

def _series_error(capsys, project, name: str, problem: str) -> None:
    cfg = project / "pins.yaml"
    assert bad(capsys, ["sim", "-c", str(cfg)], project) == \
        f"pinset sim: error: {cfg}:5: pins[0].patches: patches/s/{name}: {problem}"


@pytest.mark.parametrize("content, problem", [
    ("", "empty file, not a patch"),
    (PATCH[:PATCH.index("+TWO")], "not a patch git can read: corrupt patch at line 13"),
    (PATCH[:PATCH.index("diff --git")], "no diff in it: not a git format-patch file"),
    ("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR garbage", "no diff in it: not a git format-patch file"),
    (PATCH.replace("@@ -1,3 +1,3 @@", "@@ -1,3 +1,9 @@"), "not a patch git can read: corrupt patch at line 16"),
])
def test_broken_patch_file_is_bad_input(project, capsys, content, problem):
    (project / "patches" / "s" / "0002-broken.patch").write_text(content, errors="surrogateescape")
    _series_error(capsys, project, "0002-broken.patch", problem)


def test_patch_entries_that_are_not_files(project, capsys):
    series = project / "patches" / "s"
    (series / "0002-dir.patch").mkdir()
    _series_error(capsys, project, "0002-dir.patch", "not a regular file")
    (series / "0002-dir.patch").rmdir()
    (series / "0002-link.patch").symlink_to(series / "gone.patch")
    _series_error(capsys, project, "0002-link.patch", "broken symbolic link")
    (series / "0002-link.patch").unlink()
    os.mkfifo(series / "0002-fifo.patch")
    started = time.monotonic()
    _series_error(capsys, project, "0002-fifo.patch", "not a regular file")
    assert time.monotonic() - started < 5


def test_patch_folder_without_patches_or_not_a_folder(project, capsys):
    cfg = project / "pins.yaml"
    for patch in (project / "patches" / "s").iterdir():
        patch.rename(patch.with_suffix(".diff"))
    assert bad(capsys, ["sim", "-c", str(cfg)], project) == \
        f"pinset sim: error: {cfg}:5: pins[0].patches: folder patches/s has no *.patch files"
    write_pins(cfg, PINS.replace("patches/s", "patches/s/0001-change.diff"))
    assert bad(capsys, ["sim", "-c", str(cfg)], project) == \
        f"pinset sim: error: {cfg}:5: pins[0].patches: not a folder: patches/s/0001-change.diff"


def test_unreadable_patch_and_patch_folder(shared_dir, capsys):
    (shared_dir / "patches" / "s").mkdir(parents=True)
    patch = shared_dir / "patches" / "s" / "0001-change.patch"
    patch.write_text(PATCH)
    cfg = write_pins(shared_dir / "pins.yaml", PINS)
    shared_dir.joinpath("patches").chmod(0o755)
    patch.chmod(0)
    main(["sim", "-c", str(shared_dir / "none.yaml")])
    capsys.readouterr()
    with unprivileged():
        assert bad(capsys, ["sim", "-c", str(cfg)], shared_dir) == \
            f"pinset sim: error: {cfg}:5: pins[0].patches: patches/s/0001-change.patch: cannot read: permission denied"
    patch.chmod(0o644)
    patch.parent.chmod(0)
    try:
        with unprivileged():
            assert bad(capsys, ["sim", "-c", str(cfg)], shared_dir) == \
                f"pinset sim: error: {cfg}:5: pins[0].patches: cannot read folder patches/s: permission denied"
    finally:
        patch.parent.chmod(0o755)


def test_truncated_patch_is_not_reported_as_a_conflict(make_repo, tmp_path, capsys):
    """End to end on a real upstream: the series is refused before any fetch, naming the file."""
    up = make_repo()
    up.commit("base", {"a.txt": "one\ntwo\nthree\n"})
    up.tag("v1")
    (tmp_path / "patches" / "s").mkdir(parents=True)
    (tmp_path / "patches" / "s" / "0001-change.patch").write_text(PATCH[:PATCH.index(" three")])
    cfg = write_pins(tmp_path / "pins.yaml", f"upstream: {up.path}\nbuilds: [v1]\npins:\n  - id: a\n    patches: patches/s\n")
    line = bad(capsys, ["sim", "-c", str(cfg)])
    assert line.startswith(f"pinset sim: error: {cfg}:5: pins[0].patches: patches/s/0001-change.patch: "
                           "not a patch git can read: corrupt patch at line")
    assert not (tmp_path / "cache" / "mirror.git").exists()
    (tmp_path / "patches" / "s" / "0001-change.patch").write_text(PATCH)
    assert main(["sim", "-c", str(cfg)]) == 0  # the same series, whole, applies


# --- upstream and PR pins ------------------------------------------------------------------------

@pytest.mark.parametrize("pr, problem", [
    ("https://gitlab.com/ggml-org/llama.cpp/pull/1",
     "PR https://gitlab.com/ggml-org/llama.cpp/pull/1 is on gitlab.com, but upstream is on github.com "
     "(pinset fetches pull/1/head from upstream)"),
    ("https://github.com/someone/llama.cpp/pull/7",
     "PR https://github.com/someone/llama.cpp/pull/7 belongs to someone/llama.cpp, but upstream is "
     "ggml-org/llama.cpp (pinset fetches pull/7/head from upstream: that would be another PR)"),
])
@pytest.mark.parametrize("upstream", ["https://github.com/ggml-org/llama.cpp", "https://github.com/ggml-org/llama.cpp.git",
                                      "git@github.com:ggml-org/llama.cpp.git", "ssh://git@github.com/ggml-org/llama.cpp"])
def test_pr_of_another_host_or_repository(project, capsys, upstream, pr, problem):
    cfg = write_pins(project / "pins.yaml", f"upstream: {upstream}\nbuilds: [b1]\npins:\n  - id: a\n"
                                            f"    pr: {pr}\n    commit: {SHA}\n")
    assert bad(capsys, ["sim", "-c", str(cfg)], project) == f"pinset sim: error: {cfg}:5: pins[0].pr: {problem}"


def test_pr_of_upstream_is_accepted_in_any_spelling(project):
    cfg = write_pins(project / "pins.yaml", "upstream: git@GitHub.com:ggml-org/llama.cpp.git\nbuilds: [b1]\npins:\n"
                                            f"  - id: a\n    pr: https://github.com/GGML-org/llama.cpp/pull/1/\n"
                                            f"    commit: {SHA}\n")
    assert load_pinset(cfg).pins[0].pr.number == 1


def test_local_upstream_must_be_a_git_repository(make_repo, project, capsys):
    cfg = project / "pins.yaml"
    plain = project / "plain"
    plain.mkdir()
    repo = make_repo("repo")
    repo.commit("base", {"a.txt": "one\n", "sub/b.txt": "b\n"})
    for value, problem in (
        ("plain", "'plain' is not a git repository (fatal: not a git repository"),
        ("repo/sub", "'repo/sub' is not a git repository (fatal: not a git repository"),
        (f"file://{plain}", f"'file://{plain}' is not a git repository (fatal: not a git repository"),
        ("pins.yaml", "'pins.yaml' is not a folder (a local upstream is a git repository)"),
        ("nowhere", "not a URL and no such path: 'nowhere'"),
        ("file://repo", "malformed URL 'file://repo' (file:///ABSOLUTE/PATH)"),
    ):
        write_pins(cfg, PINS.replace("https://github.com/ggml-org/llama.cpp", value))
        line = bad(capsys, ["sim", "-c", str(cfg)], project)
        assert line.startswith(f"pinset sim: error: {cfg}:1: upstream: {problem}"), line
    write_pins(cfg, PINS.replace("https://github.com/ggml-org/llama.cpp", "repo"))
    assert load_pinset(cfg).upstream == "repo"
    bare = project / "bare.git"
    repo.git("clone", "-q", "--bare", str(repo.path), str(bare))
    write_pins(cfg, PINS.replace("https://github.com/ggml-org/llama.cpp", f"file://{bare}"))
    assert load_pinset(cfg).upstream == f"file://{bare}"


# --- command-line options ------------------------------------------------------------------------

def _numeric_actions():
    """(verb argv prefix, option, its type) for every option of every verb that takes a number."""
    found = []

    def walk(parser, prefix):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, [*prefix, name])
            elif action.option_strings and action.type is not None and action.type not in (str, Path, path_or_stdout):
                found.append((prefix, action.option_strings[-1], action.type))

    for verb in cli.COMMANDS:
        parser = cli.build_parser(verb)
        walk(next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[verb], [verb])
    return found


NUMERIC = _numeric_actions()


def test_every_numeric_option_is_checked():
    """No verb takes a bare int or float: each number goes through commands.common's types."""
    assert NUMERIC, "no numeric options found"
    for prefix, option, kind in NUMERIC:
        assert kind not in (int, float), f"{' '.join(prefix)} {option}: type={kind.__name__}"
    options = {(p[0], o) for p, o, _ in NUMERIC}
    assert {("verify", "--op-timeout"), ("bench", "--rounds"), ("bench", "--repetitions"), ("kld", "--ctx"),
            ("kld", "--chunks"), ("model", "--seed"), ("verify", "--jobs")} <= options


@pytest.mark.parametrize("prefix, option", [(p, o) for p, o, _ in NUMERIC])
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-1", "1e999", "x", "1e7", str(2**31), "9" * 5000])
def test_numeric_options_refuse_nonsense(capsys, prefix, option, value):
    """Too large counts as well: they go to llama.cpp programs as C ints, and a timeout past poll(2)'s
    24.8 days is an OverflowError mid-run."""
    # -c names no file: a value the parser wrongly let through ends in that one line, not in a real run
    line = bad(capsys, [*prefix, "-c", "/nonexistent/pins.yaml", f"{option}={value}"])
    assert line.startswith(f"pinset {' '.join(prefix)}: error: argument "), line
    assert line.endswith(f"(see pinset {' '.join(prefix)} --help)")


def test_numeric_option_messages(capsys):
    assert bad(capsys, ["verify", "--op-timeout", "nan"]) == (
        "pinset verify: error: argument --op-timeout: must be a finite number of seconds > 0, got 'nan' "
        "(see pinset verify --help)")
    assert bad(capsys, ["verify", "--op-timeout=-3"]) == (
        "pinset verify: error: argument --op-timeout: must be a finite number of seconds > 0, got '-3' "
        "(see pinset verify --help)")
    assert bad(capsys, ["bench", "--rounds", "1"]) == \
        "pinset bench: error: argument --rounds: must be >= 2, got 1 (see pinset bench --help)"
    assert bad(capsys, ["kld", "--chunks", "2.5"]) == \
        "pinset kld: error: argument --chunks: '2.5' is not a whole number (see pinset kld --help)"


def test_largest_numbers_accepted():
    """The limits refuse only what cannot work: the largest C int and 11 days of timeout still run."""
    from pinset import runner
    from pinset.commands.common import MAX_COUNT, count, seconds

    assert count(1)(str(MAX_COUNT)) == MAX_COUNT == 2**31 - 1
    assert seconds(str(runner.MAX_TIMEOUT_S)) == runner.MAX_TIMEOUT_S
    assert runner.run([sys.executable, "-c", "pass"], timeout=runner.MAX_TIMEOUT_S).ok
    assert bad_message(lambda: seconds("1000001")) == "must be at most 1000000 seconds (11 days), got '1000001'"
    assert bad_message(lambda: count(1)(str(2**31))) == f"must be <= {2**31 - 1}, got {2**31}"


def bad_message(call) -> str:
    with pytest.raises(argparse.ArgumentTypeError) as exc:
        call()
    return str(exc.value)


@pytest.mark.parametrize("builds, problem", [
    ("b1,b1", "--builds: duplicate build 'b1'"),
    ("b1,,b2", "--builds 'b1,,b2': entry 2 is empty"),
    ("b1,", "--builds 'b1,': entry 2 is empty"),
    (",", "--builds: empty list"),
])
def test_builds_option(project, capsys, builds, problem):
    cfg = project / "pins.yaml"
    assert bad(capsys, ["sim", "-c", str(cfg), "--builds", builds], project) == f"pinset sim: error: {problem}"


@pytest.mark.parametrize("build, problem", [
    ("b1,b1", "--build: duplicate build 'b1'"),
    ("b1,", "--build 'b1,': entry 2 is empty"),
    (",", "--build: empty list"),
    ("no such build!", "--build: malformed build 'no such build!' (a tag, a commit sha, pypi:PACKAGE==VERSION, "
                       "or a selector tags:PATTERN:N / pypi:PACKAGE>=VERSION)"),
    ("b1,b2", "--build 'b1,b2': names 2 builds; apply writes one tree"),
])
def test_apply_names_its_own_build_option(project, capsys, build, problem):
    """apply's option is --build (one build): its errors say so, not --builds."""
    argv = ["apply", "-c", str(project / "pins.yaml"), "--build", build, "--out", str(project / "out")]
    assert bad(capsys, argv, project) == f"pinset apply: error: {problem}"


@pytest.mark.parametrize("verb, words", [("sim", "without checking anything out"),
                                         ("apply", "Your own checkout is never touched")])
def test_sim_and_apply_describe_themselves_in_help(capsys, verb, words):
    with pytest.raises(SystemExit) as exc:
        main([verb, "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert exc.value.code == 0 and words in out


def test_cache_that_is_a_file(project, capsys):
    cache = project / "cache-file"
    cache.write_text("x")
    assert bad(capsys, ["sim", "-c", str(project / "pins.yaml"), "--cache", str(cache)], project) == \
        f"pinset sim: error: cache {cache}: exists and is not a folder"


# --- output paths, checked before any work -------------------------------------------------------

RESULT = json.dumps({"schema": 1, "kind": "sim"})


@pytest.mark.parametrize("verb_args", [
    ["sim", "-c", "{cfg}"],
    ["verify", "-c", "{cfg}"],
    ["kld", "-c", "{cfg}", "-m", "{cfg}"],
    ["bench", "-c", "{cfg}", "-m", "{cfg}"],
    ["report", "{root}/result.json"],
])
@pytest.mark.parametrize("flag", ["--json", "--markdown"])
def test_output_path_is_a_folder_or_under_a_file(project, capsys, isolated_cache, verb_args, flag):
    (project / "result.json").write_text(RESULT)
    argv = [a.format(cfg=project / "pins.yaml", root=project) for a in verb_args]
    verb = argv[0]
    folder = project / "patches"
    assert bad(capsys, [*argv, flag, str(folder)], project) == \
        f"pinset {verb}: error: {flag} {folder}: is a folder; give a file name (nothing was run)"
    under_file = project / "pins.yaml" / "out.json"
    assert bad(capsys, [*argv, flag, str(under_file)], project) == \
        f"pinset {verb}: error: {flag} {under_file}: {project / 'pins.yaml'} is not a folder (nothing was run)"
    deep_under_file = project / "result.json" / "a" / "b" / "out.json"
    assert bad(capsys, [*argv, flag, str(deep_under_file)], project) == \
        f"pinset {verb}: error: {flag} {deep_under_file}: {project / 'result.json'} is not a folder (nothing was run)"
    assert not (isolated_cache / "mirror.git").exists()


def test_output_overwriting_an_input(project, capsys):
    cfg = project / "pins.yaml"
    assert bad(capsys, ["sim", "-c", str(cfg), "--json", str(cfg)], project) == (
        f"pinset sim: error: --json {cfg}: would overwrite the input file {cfg}; write the output elsewhere")
    result = project / "result.json"
    result.write_text(RESULT)
    assert bad(capsys, ["report", str(result), "--markdown", str(result)], project) == (
        f"pinset report: error: --markdown {result}: would overwrite the input file {result}; "
        "write the output elsewhere")
    out = project / "out.md"
    assert bad(capsys, ["sim", "-c", str(cfg), "--json", str(out), "--markdown", str(out)], project) == (
        f"pinset sim: error: --json and --markdown both name {out}: give each its own path")


def test_output_folders(project, capsys):
    cfg = project / "pins.yaml"
    assert bad(capsys, ["apply", "-c", str(cfg), "--build", "b1", "--out", str(cfg / "tree")], project) == \
        f"pinset apply: error: --out {cfg / 'tree'}: {cfg} is not a folder (nothing was run)"
    assert bad(capsys, ["verify", "-c", str(cfg), "--logs", str(cfg)], project) == \
        f"pinset verify: error: --logs {cfg}: exists and is not a folder (nothing was run)"
    (project / "v-logs").write_text("a file where verify would put its logs")
    assert bad(capsys, ["verify", "-c", str(cfg), "--json", str(project / "v.json")], project) == \
        f"pinset verify: error: the logs folder next to --json, {project / 'v-logs'}: exists and is not a folder " \
        "(nothing was run)"
    assert bad(capsys, ["model", "synth", "--arch", "llama", "--size", "tiny", "-o", str(cfg)], project) == \
        f"pinset model: error: --out {cfg}: exists and is not a folder (nothing was run)"
    assert bad(capsys, ["kld", "-c", str(cfg), "-m", str(cfg), "--log-dir", str(cfg / "logs")], project) == \
        f"pinset kld: error: --log-dir {cfg / 'logs'}: {cfg} is not a folder (nothing was run)"
    assert bad(capsys, ["bench", "-c", str(cfg), "-m", str(cfg), "--plot", str(project)], project) == \
        f"pinset bench: error: --plot {project}: is a folder; give a file name (nothing was run)"


def test_output_in_a_read_only_folder(shared_dir, capsys):
    cfg = write_pins(shared_dir / "pins.yaml", PINS)
    readonly = shared_dir / "ro"
    readonly.mkdir(mode=0o555)
    readonly.chmod(0o555)
    (shared_dir / "locked.json").write_text("{}")
    (shared_dir / "locked.json").chmod(0o444)
    main(["sim", "-c", str(shared_dir / "none.yaml")])
    main(["report", str(shared_dir / "none.json")])
    capsys.readouterr()
    with unprivileged():
        assert bad(capsys, ["sim", "-c", str(cfg), "--json", str(readonly / "sim.json")], shared_dir) == \
            f"pinset sim: error: --json {readonly / 'sim.json'}: cannot write in {readonly} (permission denied) " \
            "(nothing was run)"
        assert bad(capsys, ["report", str(cfg), "--markdown", str(readonly / "new" / "r.md")], shared_dir) == \
            f"pinset report: error: --markdown {readonly / 'new' / 'r.md'}: cannot write in {readonly} " \
            "(permission denied) (nothing was run)"
        locked = shared_dir / "locked.json"
        assert bad(capsys, ["sim", "-c", str(cfg), "--markdown", str(locked)], shared_dir) == \
            f"pinset sim: error: --markdown {locked}: exists and is not writable (nothing was run)"


# --- result files given to report ----------------------------------------------------------------

def test_report_inputs_that_are_not_results(project, capsys):
    folder = project / "patches"
    assert bad(capsys, ["report", str(folder)], project) == f"pinset report: error: {folder}: is a folder, not a result file"
    binary = project / "bin.json"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    assert bad(capsys, ["report", str(binary)], project).startswith(
        f"pinset report: error: {binary}: not a JSON result file (")
    deep = project / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    assert bad(capsys, ["report", str(deep)], project) == \
        f"pinset report: error: {deep}: not a pinset result (nested too deeply)"
    fifo = project / "fifo.json"
    os.mkfifo(fifo)
    assert bad(capsys, ["report", str(fifo)], project) == f"pinset report: error: {fifo}: no such result file"


def test_unreadable_report_input(shared_dir, capsys):
    result = shared_dir / "r.json"
    result.write_text(RESULT)
    result.chmod(0)
    main(["report", str(shared_dir / "none.json")])
    capsys.readouterr()
    with unprivileged():
        assert bad(capsys, ["report", str(result)], shared_dir) == \
            f"pinset report: error: {result}: cannot read (permission denied)"


# --- property-based: the pins.yaml reader never raises anything but pinset's own error -------------

@pytest.fixture(scope="module")
def reader_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("reader")
    (root / "patches" / "s").mkdir(parents=True)
    (root / "patches" / "s" / "0001-change.patch").write_text(PATCH)
    (root / "patches" / "t").mkdir(parents=True)
    (root / "patches" / "t" / "0001-change.patch").write_text(PATCH)
    return root


def _load_or_error(path: Path):
    try:
        return load_pinset(path, require_pins=False)
    except PinsetError as exc:
        assert str(exc).startswith(str(path)) and "\n" not in str(exc).strip(), str(exc)
        return None


KEYS = ["upstream", "builds", "pins", "cuda", "description", "id", "patches", "pr", "commit", "required",
        "checks", "unchecked", "backend-op", "ctest", "command", "op", "params", "mode", "name", "argv",
        "expect", "timeout", "architectures", "flags", "<<", "", "x"]
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=30),
    st.sampled_from(["b1", "patches/s", "patches", ".", "/", "..", "~", "~nobody/x", "a" * 5000, "pypi:x==1",
                     "https://github.com/ggml-org/llama.cpp", "https://github.com/ggml-org/llama.cpp/pull/1",
                     "git@github.com:o/r.git", "file:///nonexistent", "file://", SHA, "MUL_MAT", "(", "-Dx=1"]))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(KEYS), inner, max_size=5)), max_leaves=25)
DOCUMENTS = st.dictionaries(st.sampled_from(KEYS[:5]), VALUES, max_size=5)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=400))
def test_arbitrary_bytes_give_pinset_errors_only(reader_dir, data):
    path = reader_dir / "bytes.yaml"
    path.write_bytes(data)
    _load_or_error(path)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.text(max_size=300))
def test_arbitrary_text_gives_pinset_errors_only(reader_dir, text):
    path = reader_dir / "text.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    _load_or_error(path)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=DOCUMENTS, flow=st.sampled_from([None, True, False]))
def test_arbitrary_yaml_structures_give_pinset_errors_only(reader_dir, doc, flow):
    path = reader_dir / "structure.yaml"
    path.write_text(yaml.safe_dump(doc, default_flow_style=flow, allow_unicode=True), encoding="utf-8")
    _load_or_error(path)


# Printable text: PyYAML itself folds line separators (U+0085, U+2028) when it writes them in plain scalars.
TEXT = st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), min_size=1, max_size=40).filter(str.strip)
BUILD = st.one_of(st.from_regex(r"b[0-9]{1,5}", fullmatch=True), st.from_regex(r"v[0-9]\.[0-9]{1,2}", fullmatch=True),
                  st.from_regex(r"pypi:llama-cpp-python==0\.3\.[0-9]{1,2}", fullmatch=True))
CHECK = st.one_of(
    st.builds(lambda op, params: {"backend-op": {"op": op, **({"params": params} if params else {})}},
              st.from_regex(r"[A-Z][A-Z0-9_]{0,10}", fullmatch=True), st.sampled_from([None, "type_a=iq1_m", "n=[0-9]+"])),
    st.builds(lambda name: {"ctest": {"name": name}}, st.from_regex(r"test-[a-z]{1,8}", fullmatch=True)),
    st.builds(lambda argv, timeout: {"command": {"argv": argv, "expect": "ok", "timeout": timeout}},
              st.lists(TEXT, min_size=1, max_size=3),
              st.floats(min_value=0.001, max_value=1e6)),
)


@st.composite
def valid_pin_sets(draw):
    builds = draw(st.lists(BUILD, min_size=1, max_size=4, unique=True))
    ids = draw(st.lists(st.from_regex(r"[a-z][a-z0-9_.#+-]{0,15}", fullmatch=True), max_size=4, unique=True))
    pins = []
    for pin_id in ids:
        if draw(st.booleans()):
            pin = {"id": pin_id, "patches": draw(st.sampled_from(["patches/s", "patches/t", "./patches/s"]))}
        else:
            pin = {"id": pin_id, "pr": f"https://github.com/ggml-org/llama.cpp/pull/{draw(st.integers(1, 10**6))}",
                   "commit": SHA}
        pin["required"] = draw(st.booleans())
        checks = draw(st.lists(CHECK, max_size=3))
        if checks:
            pin["checks"] = checks
        elif draw(st.booleans()):
            pin["unchecked"] = draw(TEXT)
        pins.append(pin)
    return {"upstream": "https://github.com/ggml-org/llama.cpp", "builds": builds, "pins": pins,
            "description": draw(TEXT)}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=valid_pin_sets(), flow=st.sampled_from([None, True, False]))
def test_valid_pin_sets_round_trip(reader_dir, doc, flow):
    path = reader_dir / "valid.yaml"
    path.write_text(yaml.safe_dump(doc, default_flow_style=flow, allow_unicode=True, sort_keys=False), encoding="utf-8")
    ps = load_pinset(path, require_pins=False)
    assert ps.upstream == doc["upstream"] and list(ps.builds) == doc["builds"]
    assert ps.description == doc["description"]
    assert [p.id for p in ps.pins] == [p["id"] for p in doc["pins"]]
    for pin, want in zip(ps.pins, doc["pins"]):
        assert pin.required == want["required"]
        if "patches" in want:
            assert pin.patches == (reader_dir / want["patches"]).resolve()
            assert [f.name for f in pin.patch_files()] == ["0001-change.patch"]
        else:
            assert (pin.pr.url, pin.pr.number, pin.commit) == (want["pr"], int(want["pr"].rsplit("/", 1)[1]), SHA)
        assert pin.unchecked == want.get("unchecked")
        got = []
        for c in pin.checks:
            if c.kind == "backend-op":
                got.append({"backend-op": {"op": c.op, **({"params": c.params} if c.params else {})}})
            elif c.kind == "ctest":
                got.append({"ctest": {"name": c.name}})
            else:
                got.append({"command": {"argv": list(c.argv), "expect": c.expect, "timeout": c.timeout}})
        assert got == want.get("checks", [])


# --- other input files ---------------------------------------------------------------------------

def test_model_and_text_inputs(project, capsys):
    cfg = project / "pins.yaml"
    folder = project / "patches"
    assert bad(capsys, ["kld", "-c", str(cfg), "-m", str(folder)], project) == \
        f"pinset kld: error: --model {folder}: is a folder, not a file"
    fifo = project / "model.gguf"
    os.mkfifo(fifo)
    assert bad(capsys, ["bench", "-c", str(cfg), "-m", str(fifo)], project) == \
        f"pinset bench: error: --model {fifo}: not a regular file"
    missing = project / "none.txt"
    assert bad(capsys, ["kld", "-c", str(cfg), "-m", str(cfg), "-f", str(missing)], project) == \
        f"pinset kld: error: --text {missing}: no such file"


def test_unreadable_text_and_upstream_folder(shared_dir, capsys, make_repo):
    text = shared_dir / "prose.txt"
    text.write_text("words\n")
    text.chmod(0)
    cfg = write_pins(shared_dir / "pins.yaml", PINS.replace("https://github.com/ggml-org/llama.cpp", "up"))
    (shared_dir / "up").mkdir(mode=0o700)
    (shared_dir / "up").chmod(0o700)
    main(["kld", "-m", str(shared_dir / "none")])
    import matplotlib  # noqa: F401  (the measure extra, found before the uid changes: .ci/run's venv is root-only)
    import pandas  # noqa: F401
    capsys.readouterr()
    with unprivileged():
        assert bad(capsys, ["kld", "-c", str(cfg), "-m", str(cfg), "-f", str(text)], shared_dir) == \
            f"pinset kld: error: --text {text}: cannot read (permission denied)"
        assert bad(capsys, ["sim", "-c", str(cfg)], shared_dir) == \
            f"pinset sim: error: {cfg}:1: upstream: 'up': cannot read the folder (permission denied)"


# --- the cache and the system: read-only, full, closed -------------------------------------------

@pytest.mark.parametrize("argv", [
    ["sim"], ["pick"], ["blame", "--good", "b1", "--bad", "b2"], ["apply", "--build", "b1", "--out", "{root}/out/tree"],
])
def test_read_only_cache_is_one_line_before_any_work(shared_dir, monkeypatch, capsys, argv):
    """A cache that exists but cannot be written (another user's, a read-only mount) fails on its first
    entry half-way through a run otherwise (a PermissionError traceback from `locks/`)."""
    (shared_dir / "patches" / "s").mkdir(parents=True)
    (shared_dir / "patches" / "s" / "0001-change.patch").write_text(PATCH)
    cfg = write_pins(shared_dir / "pins.yaml", PINS)
    cache = shared_dir / "cache"
    cache.mkdir(mode=0o555)
    cache.chmod(0o555)
    monkeypatch.setenv("PINSET_CACHE", str(cache))
    (shared_dir / "out").mkdir(mode=0o777)
    (shared_dir / "out").chmod(0o777)
    argv = [a.format(root=shared_dir) for a in argv]
    main([*argv, "-c", str(shared_dir / "none.yaml")])  # import everything while we may
    capsys.readouterr()
    with unprivileged():
        assert bad(capsys, [*argv, "-c", str(cfg)], shared_dir) == (
            f"pinset {argv[0]}: error: cache {cache}: cannot write in it (permission denied); "
            "give a writable --cache or $PINSET_CACHE")


@pytest.fixture
def local_pins(make_repo, tmp_path):
    """A pin set on a local upstream (no network): a sim of it runs to the end."""
    up = make_repo()
    up.commit("base", {"a.txt": "one\ntwo\nthree\n"})
    up.tag("b1")
    (tmp_path / "patches" / "s").mkdir(parents=True)
    (tmp_path / "patches" / "s" / "0001-change.patch").write_text(PATCH)
    return write_pins(tmp_path / "pins.yaml", f"upstream: {up.path}\nbuilds: [b1]\npins:\n  - id: a\n"
                                              "    patches: patches/s\ngpus:\n  h200: {runs-on: [h200], architectures: '90'}\n")


def test_full_disk_mid_run_is_one_line_exit_1(local_pins, capsys):
    """The system refusing a write after the work (ENOSPC) is a runtime failure in one line, naming the path."""
    assert main(["sim", "-c", str(local_pins), "--json", "/dev/full"]) == 1
    out, err = capsys.readouterr()
    assert err == "pinset sim: error: no space left on device: /dev/full\n"


def test_result_files_are_written_whole(tmp_path):
    """A write the system cuts short (here the file-size limit: EFBIG, as a full disk's ENOSPC) leaves the
    previous file as it was and no temporary file beside it."""
    import resource

    from pinset.output import write_json

    dest = tmp_path / "out.json"
    dest.write_text("previous\n")
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, hard))
    try:
        with pytest.raises(OSError) as exc:
            write_json(dest, {"rows": ["x" * 100] * 100})
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert exc.value.filename and "out.json" in exc.value.filename
    assert dest.read_text() == "previous\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]
    write_json(dest, {"ok": True})
    assert json.loads(dest.read_text()) == {"ok": True}


def test_json_to_a_piped_stdout_is_written(local_pins):
    """`pinset sim --json /dev/stdout | jq`: a pipe has no folder to put a temporary file in (its realpath is
    /proc/PID/fd/pipe:[N]); the JSON is written to the stream itself."""
    import subprocess

    done = subprocess.run([sys.executable, "-m", "pinset", "sim", "-c", str(local_pins), "--json", "/dev/stdout"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120,
                          env=child_env())
    assert done.returncode == 0, done.stderr
    assert '"kind": "sim"' in done.stdout and done.stderr == ""


def test_stale_results_removed_never_a_stream_or_a_link(tmp_path):
    """remove_stale (verify, kld, bench before they run) removes an earlier result file, but never an open
    stream named as the output (/dev/stdout, itself a link: as root, unlinking it removed it from /dev) nor,
    for a link, the file it names (kept elsewhere on purpose): the link goes."""
    from pinset.output import remove_stale, write_text

    stream = tmp_path / "to-stdout.json"
    stream.symlink_to("/dev/stdout")   # under pytest, fd 1 is a regular file: is_file() is True through it
    result = tmp_path / "run-1.json"
    result.write_text("green of an earlier run\n")
    latest = tmp_path / "latest.json"
    latest.symlink_to(result.name)
    plain = tmp_path / "plain.json"
    plain.write_text("old\n")
    remove_stale([stream, latest, plain, None])
    assert stream.is_symlink() and os.readlink(stream) == "/dev/stdout"
    assert not latest.is_symlink() and result.read_text() == "green of an earlier run\n" and not plain.exists()
    write_text(latest, "new\n")
    assert latest.read_text() == "new\n" and result.read_text() == "green of an earlier run\n"


def test_closed_stdout_ends_quietly(local_pins):
    """`pinset matrix | head -c 0`: the reader went away before the JSON was written; no traceback."""
    import subprocess

    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run([sys.executable, "-m", "pinset", "matrix", "-c", str(local_pins)], stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=120,
                              env=child_env())
    finally:
        os.close(write_end)
    assert done.returncode == 1 and done.stderr == ""


# --- --help of every verb ------------------------------------------------------------------------

def _verb_parsers():
    """(argv prefix, parser) of every verb and sub-verb (model synth)."""
    found = []

    def walk(parser, prefix):
        found.append((prefix, parser))
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, [*prefix, name])

    for verb in cli.COMMANDS:
        top = cli.build_parser(verb)
        walk(next(a for a in top._actions if isinstance(a, argparse._SubParsersAction)).choices[verb], [verb])
    return found


def test_top_level_help_fits_and_names_the_exit_codes(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    out = capsys.readouterr().out
    assert exc.value.code == 0 and max(len(line) for line in out.splitlines()) <= 80, out
    words = " ".join(out.split())
    assert "2 bad input, nothing changed; 130 interrupted" in words and all(verb in out for verb in cli.COMMANDS)


@pytest.mark.parametrize("prefix", [p for p, _ in _verb_parsers()], ids=" ".join)
def test_help_fits_80_columns_and_describes_every_option(capsys, monkeypatch, prefix):
    monkeypatch.setenv("COLUMNS", "80")
    with pytest.raises(SystemExit) as exc:
        main([*prefix, "--help"])
    out = capsys.readouterr().out
    assert exc.value.code == 0
    assert max(len(line) for line in out.splitlines()) <= 80, out
    parser = dict((" ".join(p), q) for p, q in _verb_parsers())[" ".join(prefix)]
    assert parser.description, f"pinset {' '.join(prefix)} --help says nothing about what it does"
    for action in parser._actions:
        if action.option_strings:
            assert action.help, f"pinset {' '.join(prefix)} {action.option_strings[-1]}: no help"
    # an option named in a help text is never split at its hyphens ("--\nop-jobs")
    assert not any(line.rstrip().endswith(("--", " -", '"-')) for line in out.splitlines()), out


# --- model synth: a shape that cannot be made changes nothing ------------------------------------

@pytest.mark.parametrize("override, problem", [
    (["--embd", "40"], "token_embd.weight: rows of 40 weights are not whole Q8_0 blocks of 32"),
    (["--heads", "3"], "n_head 3 is not a multiple of n_head_kv 2"),
    (["--vocab", "none-such"], "no models/ggml-vocab-none-such.gguf found"),
    (["--layers", "2000000000"], "llama.cpp loads at most 512 layers"),
    (["--embd", "2000000000"], "needs at least"),
])
def test_model_synth_bad_shape_leaves_no_output_folder(tmp_path, capsys, override, problem):
    """Found before the folder is made (the disk cannot hold it) or on the way (vocab, block sizes):
    exit 2, one line, and -o is not left behind empty."""
    from tests.testing.gguf import gguf, make_vocab

    if gguf is None:
        pytest.skip("no gguf package: cannot write the tokenizer file")
    vocab = make_vocab(tmp_path / "vocab.gguf")
    out = tmp_path / "deep" / "out"
    argv = ["model", "synth", "--arch", "llama", "--size", "tiny", "--direct", "--quant", "Q8_0", "-t", "1",
            "-o", str(out), "--vocab", str(vocab), *override]
    before = snapshot(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err  # stdout may have announced the model before a block size was found wrong
    assert len(err.splitlines()) == 1 and err.startswith("pinset model: error: ") and problem in err, err
    assert snapshot(tmp_path) == before


# --- CUDA architectures: refused when read, not by CMake minutes later ---------------------------

BAD_ARCHS = ["banana", "sm_90", "9.0", "90;", ";90", "90;;86", "90 86", "native;90", "-90", "compute_90"]
GOOD_ARCHS = ["90", "90a", "100f", "86;90", "86,90", " 90 ; 86 ", "86-real", "90-virtual", "native", "all-major"]


@pytest.mark.parametrize("arch", BAD_ARCHS)
@pytest.mark.parametrize("where, line", [("cuda: {{architectures: '{arch}'}}\n", 6),
                                         ("gpus: {{h200: {{runs-on: [h200], architectures: '{arch}'}}}}\n", 6)])
def test_malformed_cuda_architectures_in_pins_yaml(project, capsys, arch, where, line):
    cfg = write_pins(project / "pins.yaml", PINS + where.format(arch=arch))
    key = "cuda.architectures" if where.startswith("cuda") else "gpus.h200.architectures"
    assert bad(capsys, ["sim", "-c", str(cfg)], project) == \
        f"pinset sim: error: {cfg}:{line}: {key}: malformed {arch!r} (e.g. \"90\" or \"86;90\")"


@pytest.mark.parametrize("arch", GOOD_ARCHS)
def test_cuda_architectures_cmake_takes(project, arch):
    cfg = write_pins(project / "pins.yaml", PINS + f"cuda: {{architectures: '{arch}'}}\n"
                                                   f"gpus: {{h200: {{runs-on: [h200], architectures: '{arch}'}}}}\n")
    pins = load_pinset(cfg)
    assert pins.cuda_architectures == arch and pins.gpus[0].architectures == arch


@pytest.mark.parametrize("arch", BAD_ARCHS[:4])
@pytest.mark.parametrize("prefix", [["kld", "-m", "x.gguf"], ["bench", "-m", "x.gguf"],
                                    ["model", "synth", "--arch", "llama", "--size", "tiny", "-o", "out"]])
def test_malformed_cuda_architectures_option(capsys, prefix, arch):
    line = bad(capsys, [*prefix, "-c", "/nonexistent/pins.yaml", f"--cuda-architectures={arch}"])
    verb = " ".join(prefix[:2] if prefix[0] == "model" else prefix[:1])
    assert line == f"pinset {verb}: error: argument --cuda-architectures: malformed {arch!r} " \
                   f"(e.g. \"90\" or \"86;90\") (see pinset {verb} --help)"


def test_outside_text_that_reads_as_markup_is_printed_as_it_is(local_pins, tmp_path, capsys):
    """A path (or file name, or git's words) with `[/x]` in it is not rich markup: the tree was written,
    so the run ends 0 with its line, not in a MarkupError traceback."""
    out = tmp_path / "tree[/x]"
    assert main(["apply", "-c", str(local_pins), "--build", "b1", "--out", str(out)]) == 0
    assert f"to {out}" in " ".join(capsys.readouterr().out.split())
    assert (out / "a.txt").read_text() == "one\nTWO\nthree\n"


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_terminal_that_cannot_show_the_text(local_pins, tmp_path, encoding):
    """The report's markdown (emoji, dashes) and rich's tables on an ASCII or Latin-1 stdout: escaped
    characters, never a UnicodeEncodeError traceback."""
    import subprocess

    sim = tmp_path / "sim.json"
    assert main(["sim", "-c", str(local_pins), "--json", str(sim)]) == 0
    env = child_env(PYTHONIOENCODING=encoding)
    for argv in (["report", str(sim)], ["sim", "-c", str(local_pins)]):
        done = subprocess.run([sys.executable, "-m", "pinset", *argv], env=env, capture_output=True, timeout=120)
        assert b"Traceback" not in done.stderr and done.returncode in (0, 1), done.stderr.decode(errors="replace")
    assert b"\\u2705" in subprocess.run([sys.executable, "-m", "pinset", "report", str(sim)], env=env,
                                        capture_output=True, timeout=120).stdout


# --- options that act only with another: refused, never ignored in silence -----------------------

@pytest.mark.parametrize("argv, line", [
    (["verify", "--ops", "MUL_MAT"], "pinset verify: error: --ops needs --cuda"),
    (["verify", "--backend", "CUDA1"], "pinset verify: error: --backend needs --cuda"),
    (["verify", "--op-jobs", "4"], "pinset verify: error: --op-jobs needs --cuda"),
    (["verify", "--cuda-flags=-DGGML_CUDA_FA=OFF"], "pinset verify: error: --cuda-flags needs --cuda"),
    (["pick", "--cuda"], "pinset pick: error: --cuda needs --verify"),
    (["pick", "-j", "2"], "pinset pick: error: -j/--jobs needs --verify"),
    (["pick", "--logs", "{root}/logs"], "pinset pick: error: --logs needs --verify"),
    (["pick", "--no-progress"], "pinset pick: error: --no-progress needs --verify"),
    (["bench", "-m", "{root}/pins.yaml", "--rounds", "3", "--max-time", "60"],
     "pinset bench: error: --max-time needs adaptive rounds (no --rounds)"),
    (["bench", "-m", "{root}/pins.yaml", "--rounds", "3", "--max-rounds", "9"],
     "pinset bench: error: --max-rounds needs adaptive rounds (no --rounds)"),
    (["kld", "-m", "{root}/pins.yaml", "--cpu", "-ngl", "5"],
     "pinset kld: error: -ngl/--gpu-layers needs the device (not --cpu, which runs -ngl 0)"),
])
def test_option_that_needs_another(project, capsys, isolated_cache, argv, line):
    argv = [a.format(root=project) for a in argv]
    assert bad(capsys, [*argv, "-c", str(project / "pins.yaml")], project) == line
    assert not (isolated_cache / "mirror.git").exists()


def test_kld_cpu_with_ngl_0_is_what_it_runs(project, capsys, isolated_cache):
    """`--cpu -ngl 0` says what --cpu runs: not refused as an -ngl without the device (the next check, the
    model, is what answers here)."""
    argv = ["kld", "-m", str(project / "pins.yaml"), "--cpu", "-ngl", "0", "-c", str(project / "pins.yaml")]
    assert bad(capsys, argv, project).startswith("pinset kld: error: --model ")


def test_relative_xdg_cache_home_is_ignored(monkeypatch, tmp_path):
    """The XDG spec calls a relative XDG_CACHE_HOME invalid: taken as it is, the cache would land in the
    current folder, the user's own checkout."""
    from pinset.store import default_cache_dir

    monkeypatch.delenv("PINSET_CACHE")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CACHE_HOME", "relcache")
    assert default_cache_dir() == tmp_path / ".cache" / "pinset"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "pinset"


def test_writable_result_file_in_a_read_only_folder(shared_dir):
    """check_outputs accepts a writable file in a folder we cannot create in: it is written in place
    there (no room for a temporary file beside it), not refused after the work."""
    from pinset.output import write_json

    folder = shared_dir / "ro"
    folder.mkdir()
    (folder / "out.json").write_text("previous\n")
    (folder / "out.json").chmod(0o666)
    folder.chmod(0o555)
    with unprivileged():
        write_json(folder / "out.json", {"ok": True})
    assert json.loads((folder / "out.json").read_text()) == {"ok": True}
    assert [p.name for p in folder.iterdir()] == ["out.json"]
