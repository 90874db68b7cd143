"""The user's environment (issue 40, class 3): `LANG=C LC_ALL=C PYTHONUTF8=0` with non-ASCII names in the
workspace, the cache and the outputs (UTF-8 names, and a name that is no UTF-8 at all): every verb that runs
offline works there, with no traceback (memo keys, JSON, Markdown, logs, the ledger), its outputs named as
asked and their text in UTF-8."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.testing import ROOT, GitRepo, series, write_pins
from tests.testing.fake_llama import FIXTURE_TESTS, fake_bin
from tests.testing.gguf import gguf, make_vocab

BODY = "".join(f"int f{i}(void) {{ return {i}; }}\n" for i in range(30))
ODD = os.fsdecode(b"-\xff")   # a byte that is no UTF-8: Python holds it as a surrogate escape


@pytest.fixture
def place(tmp_path):
    """A workspace `wörk` (upstream, a series touching src/ünï.c, pins.yaml, in a git repository), a cache
    whose name is not UTF-8, and the environment of a C locale that refuses UTF-8 mode."""
    work = tmp_path / "wörk"
    up = GitRepo(work / "üpstream")
    b1 = up.commit("base", {"src/ünï.c": "int a;\n" + BODY, "README": "up\n"})
    up.tag("b1")
    up.commit("shift", {"src/ünï.c": "// moved\n// two\nint a;\n" + BODY})
    up.tag("b2")
    up.commit("clash", {"src/ünï.c": "int a = 3;\n" + BODY})
    up.tag("b3")
    series(up, b1, [("ädd b", {"src/ünï.c": "int a;\nint b;\n" + BODY})], work / "pätches" / "spéc")
    write_pins(work / "pins.yaml", f"upstream: {up.path}\nbuilds: [b1, b2]\n"
               "gpus: {h200: {runs-on: [self-hosted, h200], architectures: '90'}}\n"
               "pins:\n  - id: spec\n    patches: pätches/spéc\n")
    dist = GitRepo(work)
    dist.git("add", "pins.yaml", "pätches")
    dist.git("commit", "-q", "-m", "the pin set")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LC_", "PYTHONIO"))}
    env.update(LANG="C", LC_ALL="C", PYTHONUTF8="0", PINSET_CACHE=str(tmp_path / f"cäche{ODD}"),
               PYTHONPATH=str(ROOT))
    return work, env


def _pinset(work: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "import sys; from pinset.cli import main; sys.exit(main())",
                           *args], cwd=work, env=env, capture_output=True, timeout=300)


def _sim(work, env):
    return ["sim", "-c", "pins.yaml", "--json", f"sïm{ODD}.json", "--markdown", f"sïm{ODD}.md"], \
        [f"sïm{ODD}.json", f"sïm{ODD}.md"], {0}


VERBS = {
    "sim": _sim,
    "pick": lambda work, env: (["pick", "-c", "pins.yaml", "--json", f"pïck{ODD}.json", "--markdown",
                                 f"pïck{ODD}.md"], [f"pïck{ODD}.json"], {0}),
    "blame": lambda work, env: (["blame", "-c", "pins.yaml", "--good", "b1", "--bad", "b3", "--json",
                                  f"blämé{ODD}.json"], [f"blämé{ODD}.json"], {0, 1}),
    "apply": lambda work, env: (["apply", "-c", "pins.yaml", "--build", "b2", "--out", f"äpplied{ODD}"],
                                 [f"äpplied{ODD}/src/ünï.c"], {0}),
    "refresh": lambda work, env: (["refresh", "-c", "pins.yaml", "--onto", "b2", "--write"],
                                   ["pätches/spéc/0001-dd-b.patch"], {0}),
    "rebase": lambda work, env: (["rebase", "-c", "pins.yaml", "spec", "--onto", "b3", "--worktree",
                                  f"rebäse{ODD}"], [f"rebäse{ODD}"], {0, 1}),
    "report": lambda work, env: (_then(work, env, _sim) + ["report", "-c", "pins.yaml", f"sïm{ODD}.json",
                                                             "--json", f"repört{ODD}.json", "--markdown",
                                                             f"repört{ODD}.md"], [f"repört{ODD}.md"], {0, 1}),
    "matrix": lambda work, env: (["matrix", "-c", "pins.yaml", "--results-dir", f"resülts{ODD}", "--json",
                                  f"mätrix{ODD}.json"], [f"mätrix{ODD}.json"], {0}),
    "cache info": lambda work, env: (_then(work, env, _sim) + ["cache", "info", "--json", f"cäche{ODD}.json"],
                                     [f"cäche{ODD}.json"], {0}),
    "cache clean": lambda work, env: (_then(work, env, _sim) + ["cache", "clean", "--json", f"cläan{ODD}.json"],
                                      [f"cläan{ODD}.json"], {0}),
    "schema": lambda work, env: (["schema", "--out", f"schémä{ODD}.json"], [f"schémä{ODD}.json"], {0}),
    "bump": lambda work, env: (["bump", "-c", "pins.yaml", "--onto", "b2", "--dry-run"], [], {0}),
    "bench": lambda work, env: (_bench(work) + ["--json", f"bënch{ODD}.json", "--markdown", f"bënch{ODD}.md",
                                                "--", *FIXTURE_TESTS], [f"bënch{ODD}.json", f"bënch{ODD}.md"], {0, 1}),
    "model synth": lambda work, env: (["model", "synth", "--arch", "llama", "--size", "tiny", "--direct",
                                       "--vocab", str(make_vocab(work / f"vöcab{ODD}.gguf")),
                                       "-o", f"mödel{ODD}.gguf"], [f"mödel{ODD}.gguf"], {0}),
}


def _then(work, env, first) -> list[str]:
    """Run `first` (its outputs are this verb's inputs); the words of the verb to test follow."""
    args, outputs, codes = first(work, env)
    done = _pinset(work, env, *args)
    assert done.returncode in codes, done.stderr.decode(errors="replace")
    return []


def _bench(work: Path) -> list[str]:
    base = fake_bin(work / f"bäse{ODD}", {"pp": 100.0, "tg": 20.0}, 0.0, 1)
    head = fake_bin(work / f"hëad{ODD}", {"pp": 100.0, "tg": 20.0}, 0.0, 2)
    model = work / f"mödel{ODD}.gguf"
    model.write_bytes(b"GGUF")
    return ["bench", "--base-bin", str(base), "--head-bin", str(head), "--cpu", "-m", str(model), "-r", "1",
            "--rounds", "3"]   # (the same speeds: "undecided" after 3 rounds, exit 1)


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_every_verb_works_in_the_c_locale_with_non_ascii_names(place, verb):
    work, env = place
    if verb == "model synth" and gguf is None:
        pytest.skip("no `gguf` package to write the vocabulary with (tests/testing/gguf.py)")
    args, outputs, codes = VERBS[verb](work, env)
    done = _pinset(work, env, *args)
    err = done.stderr.decode(errors="replace")
    assert b"Traceback" not in done.stderr + done.stdout, err
    assert done.returncode in codes, err
    for name in outputs:
        path = work / name
        assert path.exists(), f"{name} not written: {err}"
        if path.suffix in (".json", ".md"):
            text = path.read_bytes().decode("utf-8")   # UTF-8 text, whatever the locale
            if path.suffix == ".json":
                json.loads(text)
    if verb == "sim":
        doc = json.loads((work / f"sïm{ODD}.json").read_text(encoding="utf-8"))
        assert doc["ok"] and "src/ünï.c" in json.dumps(doc, ensure_ascii=False)
        again = _pinset(work, env, *args)   # the memo answers now: its keys take these names too
        assert again.returncode == 0 and b"Traceback" not in again.stderr


def test_a_name_that_is_no_utf8_is_kept_as_bytes_in_results(place):
    """--json written under a name that is not UTF-8 lands under exactly that name (bytes), and the JSON names
    what it read (pins.yaml in the UTF-8 folder) as real text."""
    work, env = place
    done = _pinset(work, env, "sim", "-c", str(work / "pins.yaml"), "--json", f"ödd{ODD}.json")
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    assert os.fsencode(f"ödd{ODD}.json") in os.listdir(os.fsencode(work))
