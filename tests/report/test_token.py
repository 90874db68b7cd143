"""The GitHub token stays where it belongs: sent to the API, never printed, never written, never in a
child program's environment. Every verb runs with known token values in the environment (some runs
fail on purpose), then every output stream and every file written is searched for them; the child
programs (git, cmake, ninja, ctest, feature checks, llama.cpp programs) record their environment."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import pinset.github.client as github_module
from pinset import runner
from pinset.cli import main
from tests.testing import FIXTURES, ROOT, one_patch, write_pins
from tests.testing.fake_github import FakeGitHub
from tests.testing.gguf import gguf, make_vocab
from tests.testing.stand_in import stand_in_files

# One known value per variable runner.SECRET_ENV scrubs; every one is searched for everywhere.
SECRETS = {name: f"ghp_{name.lower()}_Secret0Value" for name in runner.SECRET_ENV}
FIX = FIXTURES


def test_children_never_inherit_a_token(monkeypatch, tmp_path):
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    printed = runner.run(["env"]).stdout
    streamed = runner.run_streaming(["env"], env={"GITHUB_TOKEN": "from-the-caller", "KEEP": "1"}).stdout
    assert "PATH=" in printed and "KEEP=1" in streamed
    for text in (printed, streamed):
        assert not any(line.split("=")[0] in SECRETS for line in text.splitlines())
        assert not any(value in text for value in SECRETS.values()) and "from-the-caller" not in text
    assert os.environ["GITHUB_TOKEN"] == SECRETS["GITHUB_TOKEN"]  # pinset itself still has it


FAKE_LLAMA = """#!{python}
# Stand-in for a llama.cpp program: records its environment, replays captured output of the real one.
import json, os, pathlib, sys
name = pathlib.Path(sys.argv[0]).name
record = pathlib.Path({record!r})
(record / f"{{name}}-{{os.getpid()}}.env").write_text(json.dumps(dict(os.environ)))
fix = pathlib.Path({fixtures!r})
argv = sys.argv[1:]
if os.environ.get("FAKE_LLAMA_CRASH") or pathlib.Path(sys.argv[0]).parent.name == "broken":
    print("GGML_ASSERT failed", file=sys.stderr)
    sys.exit(134)
if name == "llama-perplexity":
    if "--kl-divergence" in argv:
        stem = "perplexity/kld-iq1m-vs-f16"
    else:
        stem = "perplexity/ref-cpu-f16"
        pathlib.Path(argv[argv.index("--kl-divergence-base") + 1]).write_bytes(b"logits")
    sys.stdout.write((fix / (stem + ".stdout")).read_text())
    sys.stderr.write((fix / (stem + ".stderr")).read_text())
elif name == "llama-bench":
    sys.stdout.write((fix / "llama-bench/cpu-tiny-moe-iq1m.jsonl").read_text())
    sys.stderr.write((fix / "llama-bench/cpu-tiny-moe-iq1m.stderr").read_text())
elif name == "llama-imatrix":
    pathlib.Path(argv[argv.index("-o") + 1]).write_bytes(b"imatrix")
elif name == "llama-quantize":
    if argv[0] == "--imatrix":
        argv = argv[2:]
    pathlib.Path(argv[1]).write_bytes(pathlib.Path(argv[0]).read_bytes())
"""

WRAPPER = """#!/bin/sh
# {name} as usual, after recording the environment it was started with.
env > "{record}/{name}-$$.env"
echo "ARGV=$*" >> "{record}/{name}-$$.env"
exec "{real}" "$@"
"""


def executable(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


@pytest.fixture
def world(tmp_path, make_repo, monkeypatch):
    """Tokens in the environment, recording wrappers for git/cmake/ninja/ctest first on PATH, fake
    llama.cpp programs, and the stand-in llama.cpp upstream with a pin set."""
    record = tmp_path / "record"
    record.mkdir()
    wrappers = tmp_path / "wrappers"
    for name in ("git", "cmake", "ninja", "ctest"):
        executable(wrappers / name, WRAPPER.format(name=name, record=record, real=shutil.which(name)))
    for folder in ("llama-bin", "broken"):
        for name in ("llama-perplexity", "llama-bench", "llama-imatrix", "llama-quantize"):
            executable(tmp_path / folder / name, FAKE_LLAMA.format(python=sys.executable, record=str(record),
                                                                   fixtures=str(FIX)))

    upstream = make_repo("upstream")
    files = {k: v for k, v in stand_in_files().items() if v is not None}
    # the build itself would print a token it could see into the build log
    files["CMakeLists.txt"] += 'message(STATUS "token seen by cmake: [$ENV{GITHUB_TOKEN}] [$ENV{GH_TOKEN}]")\n'
    upstream.commit("v1", files)
    upstream.tag("v1")
    upstream.commit("v2: test-chat broken", {"replay/chat.exit": "1\n"})
    upstream.tag("v2")
    one_patch(make_repo("work"), tmp_path / "patches" / "feature",
              {"README": "x\n"}, {"feature.txt": "feature on\n"}, "feature")
    pins = write_pins(tmp_path / "pins.yaml", """
        upstream: upstream
        builds: [v1, v2]
        pins:
          - id: feature
            patches: patches/feature
            checks:
              - backend-op: {op: MUL_MAT, params: "type_a=iq1_s,"}
              - command: {argv: ["env"], expect: "^PATH=", timeout: 30}
        """)
    (tmp_path / "model.gguf").write_bytes(b"GGUF" + bytes(60))
    # from here on (the repositories above are the test's own), every git, cmake... is recorded
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("PATH", f"{wrappers}{os.pathsep}{os.environ['PATH']}")
    return tmp_path, pins, record


@pytest.mark.skipif(not all(shutil.which(t) for t in ("git", "cmake", "ninja", "ctest", "cc")),
                    reason="git, cmake, ninja, ctest and cc are needed for the verify run")
def test_every_verb_keeps_the_token_to_itself(world, capfd, isolated_cache, monkeypatch):
    monkeypatch.setattr(github_module, "_default_sleep", lambda seconds: None)  # report's retries
    tmp_path, pins, record = world
    out = tmp_path / "out"
    streams: list[str] = []
    codes: dict[str, int] = {}

    def pinset(label: str, *argv: str) -> int:
        codes[label] = main(list(argv))
        captured = capfd.readouterr()
        streams.extend((captured.out, captured.err))
        assert "Traceback" not in captured.err, (label, captured.err)
        return codes[label]

    pinset("sim", "sim", "-c", str(pins), "--json", str(out / "sim.json"), "--markdown", str(out / "sim.md"))
    pinset("apply", "apply", "-c", str(pins), "--build", "v1", "--out", str(tmp_path / "tree"))
    pinset("apply unknown build", "apply", "-c", str(pins), "--build", "no-such-tag", "--out", str(tmp_path / "t2"))
    pinset("verify", "verify", "-c", str(pins), "--json", str(out / "verify.json"), "--markdown",
           str(out / "verify.md"), "--no-progress", "-j", "2")
    bins = ["--base-bin", str(tmp_path / "llama-bin"), "--head-bin", str(tmp_path / "llama-bin")]
    model = ["-m", str(tmp_path / "model.gguf")]
    pinset("kld", "kld", *bins, *model, "--cpu", "--json", str(out / "kld.json"), "--log-dir", str(out / "kld-logs"))
    pinset("kld crashing", "kld", "--base-bin", str(tmp_path / "broken"), "--head-bin", str(tmp_path / "broken"),
           *model, "--cpu", "--ctx", "256", "--json", str(out / "kld-broken.json"), "--log-dir", str(out / "kld-broken"))
    pinset("bench", "bench", *bins, *model, "--cpu", "--rounds", "3", "-r", "2", "--json", str(out / "bench.json"),
           "--markdown", str(out / "bench.md"), "--log-dir", str(out / "bench-logs"), "--", "-p", "32")
    pinset("bench crashing", "bench", "--base-bin", str(tmp_path / "broken"), "--head-bin", str(tmp_path / "broken"),
           *model, "--cpu", "--rounds", "2", "--json", str(out / "bench-broken.json"),
           "--log-dir", str(out / "bench-broken"))
    # with a gguf module (installed, or $PINSET_LLAMA_TREE's gguf-py) the model is written and the fake
    # llama-imatrix/llama-quantize run; without one the verb stops at that in one line
    vocab = ["--vocab", str(make_vocab(tmp_path / "vocab.gguf"))] if gguf else []
    pinset("model synth", "model", "synth", "--arch", "llama", "--size", "tiny", "--quant", "IQ1_M", *vocab,
           "--layers", "1", "--bin", str(tmp_path / "llama-bin"), "-o", str(out / "model"),
           "--json", str(out / "model.json"))

    # every result the verbs wrote goes into the report: what is searched is what it prints, sends and writes
    results = [str(out / name) for name in ("sim.json", "verify.json", "kld.json", "bench.json")]
    api = FakeGitHub(token=SECRETS["GITHUB_TOKEN"])
    api.thread.start()
    try:
        os.environ["GITHUB_TOKEN"] = "  " + SECRETS["GITHUB_TOKEN"] + "\r\n"  # as pasted: stripped, not refused
        report = ["report", *results, "-c", str(pins), "--api-url", api.url]
        pinset("report dry run", *report, "--post", "o/r#7", "--dry-run")
        pinset("report post", *report, "--post", "o/r#7", "--markdown", str(out / "report.md"),
               "--json", str(out / "report.json"))
        api.fail = (502, {"message": f"upstream said Bearer {SECRETS['GITHUB_TOKEN']}"}, {})
        pinset("report post failing", *report, "--post", "o/r#7")  # report kept in the cache
    finally:
        api.server.shutdown()
        api.server.server_close()

    # the runs did run: results written, children recorded, the API got the token (its one place)
    assert (out / "sim.json").is_file() and (out / "verify.json").is_file() and (out / "kld.json").is_file()
    assert (out / "bench.json").is_file() and (out / "report.md").is_file()
    assert codes["apply"] == 0 and codes["apply unknown build"] == 2 and codes["report post failing"] == 1
    assert codes["report dry run"] == codes["report post"] == 1  # not ready: v2 is red
    assert codes["verify"] == 1  # v2's test-chat is red
    assert codes["kld crashing"] != 0 and codes["bench crashing"] != 0
    recorded = {p.name.split("-")[0] if not p.name.startswith("llama-") else p.name.rsplit("-", 1)[0]
                for p in record.iterdir()}
    assert {"git", "cmake", "ninja", "ctest", "llama-perplexity", "llama-bench"} <= recorded, recorded
    assert codes["model synth"] == (0 if gguf else 2)
    if gguf:
        assert {"llama-imatrix", "llama-quantize"} <= recorded and (out / "model.json").is_file()
    assert api.requests and api.requests[0][2]["Authorization"] == f"Bearer {SECRETS['GITHUB_TOKEN']}"
    assert len(api.comments) == 1 and codes["report post"] == 1  # posted; exit 1: the report blocks
    logs = "".join(p.read_text(errors="replace") for p in tmp_path.rglob("*.log"))
    assert "token seen by cmake: [] []" in logs  # the configure step ran and saw no token
    assert "\nPATH=" in logs  # the `env` feature check ran and its output was logged

    for env_file in record.iterdir():
        text = env_file.read_text()
        names = json.loads(text) if text.startswith("{") else dict(
            line.split("=", 1) for line in text.splitlines() if "=" in line)
        leaked = {k for k in SECRETS if names.get(k)}
        assert not leaked, f"{env_file.name} was started with {sorted(leaked)} set: {names.get('ARGV')}"

    found = [label for label, text in enumerate(streams) if any(v in text for v in SECRETS.values())]
    assert not found, [streams[i] for i in found]
    written = [p for p in tmp_path.rglob("*") if p.is_file() and not p.is_symlink()]
    assert any(isolated_cache in p.parents for p in written)  # the cache was written and is searched too
    for path in written:
        data = path.read_bytes()
        assert not any(v.encode() in data for v in SECRETS.values()), f"a token is in {path}"


def test_mirror_starts_git_without_a_token(tmp_path):
    """The mirror makes itself and reads blobs with git: a fresh interpreter with a recording git first on PATH."""
    record = tmp_path / "record"
    record.mkdir()
    executable(tmp_path / "wrappers" / "git", WRAPPER.format(name="git", record=record, real=shutil.which("git")))
    env = {**os.environ, **SECRETS, "PATH": f"{tmp_path / 'wrappers'}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": str(ROOT)}
    code = ("import sys; from pathlib import Path; from pinset.upstream.mirror import Mirror; "
            "m = Mirror(Path(sys.argv[1])); print(m.read_blob('4b825dc642cb6eb9a060e54bf8d69288fbee4904', 'x'))")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "mirror")], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    started = [p.read_text() for p in record.iterdir()]
    assert any("init" in text for text in started) and any("cat-file" in text for text in started)
    for text in started:
        assert not any(v in text for v in SECRETS.values()), text.splitlines()[-1]
