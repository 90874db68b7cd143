"""Several nights of real pinset results for `pinset history`: each night's sim, pick, blame, verify, bench, kld
and forecast JSON written by the verbs themselves (in-process `pinset.cli.main`) on one upstream that moves
under two pins, as the nightly workflow keeps them: RESULTS/<night>/<verb>.json.

The story (upstream tags n1, n2, n3; pins feat and types of tests/testing/nightly.py):
- 2026-11-01: builds [n1]. Both pins apply exactly; bench "faster", verify green.
- 2026-11-02: upstream n2 gates MMQ on a flag (feat conflicts there) and adds lines above types' hunk (types
  applies by offset). builds [n1, n2]: feat red on n2, blamed on n2's commit by blame n1..n2; pick keeps n1.
  Forecast: PR #1 (adds a type where types adds its own) would break types.
- 2026-11-03: feat's series replaced (made again on n2), types refreshed onto n2 (`pinset refresh --write`):
  both digests change; builds [n2], all green. PR #1 still open (2 nights), PR #2 (would break feat) appears.
- 2026-11-04: PR #1 merged upstream as n3: types conflicts on n3, blamed by blame n2..n3; builds [n2, n3].
  PR #2 still open (2 nights). A damaged file (cut short) and a foreign one (a matrix) lie in this night's folder.
Commits have fixed dates (GIT_AUTHOR_DATE...): every run of the maker gives the same commits and patches.
"""

from __future__ import annotations

import os
import shutil
import sys
from contextlib import contextmanager
from pathlib import Path

from tests.testing import GitRepo, write_pins
from tests.testing.fake_github import TOKEN, FakeGitHub, serving
from tests.testing.fake_llama import fake_bin, fake_perplexity, write_script
from tests.testing.nightly import BROKEN_MMQ, FEAT, FEAT_AND_TYPES, MMQ_CU, README, TYPES, TYPES_H, series
from tests.testing.stand_in import stand_in_files

NIGHTS = ("2026-11-01", "2026-11-02", "2026-11-03", "2026-11-04")
DATE = "2026-11-01T00:00:00+00:00"
PR1_TYPES = TYPES_H.replace("    GGML_TYPE_COUNT", "    GGML_TYPE_BF16 = 30,\n    GGML_TYPE_COUNT")
MOVED_TYPES = "".join(f"// header line {i}\n" for i in range(6)) + TYPES_H
PR2_MMQ = BROKEN_MMQ.replace("        case GGML_TYPE_Q4_0:\n", "        case GGML_TYPE_Q4_0:\n        case GGML_TYPE_Q8_0:\n")
# bench speeds per night (tokens/s of the fake llama-bench, base then head): head 3x, then about the same
SPEEDS = {"2026-11-01": ({"pp": 100.0, "tg": 20.0}, {"pp": 300.0, "tg": 20.0}),
          "2026-11-02": ({"pp": 100.0, "tg": 20.0}, {"pp": 290.0, "tg": 20.0}),
          "2026-11-03": ({"pp": 100.0, "tg": 20.0}, {"pp": 100.0, "tg": 20.0}),
          "2026-11-04": ({"pp": 100.0, "tg": 20.0}, {"pp": 305.0, "tg": 20.0})}


@contextmanager
def environment(**values: str):
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def pull(number: int, updated: str) -> dict:
    return {"number": number, "title": f"PR {number}", "html_url": f"https://github.test/o/r/pull/{number}",
            "draft": False, "updated_at": updated, "head": {"sha": "0" * 40}, "user": {"login": "dev"}}


def make_nights(work: Path, *, verify: bool = True) -> Path:
    """Write the nights (module docstring) under work/results and return that folder. `verify`: also run
    `pinset verify` each night (a CMake build of the stand-in tree: needs cmake, ninja and cc)."""
    from pinset.cli import main

    def pinset(*argv: str, codes=(0, 1)) -> None:
        rc = main([str(a) for a in argv])
        assert rc in codes, (argv, rc)

    results = work / "results"
    with environment(PINSET_CACHE=str(work / "cache"), GIT_AUTHOR_DATE=DATE, GIT_COMMITTER_DATE=DATE,
                     GITHUB_TOKEN=TOKEN, NO_PROXY="127.0.0.1", no_proxy="127.0.0.1",
                     PATH=f"{work / 'bins' / 'smi'}{os.pathsep}{os.environ['PATH']}"):
        up = GitRepo(work / "upstream")
        base_files = {"src/mmq.cu": MMQ_CU, "src/types.h": TYPES_H, "README": README,
                      **{k: v for k, v in stand_in_files().items() if v is not None}}
        n1 = up.commit("base", base_files)
        up.tag("n1")
        # PR 1 from n1: a type where the pin types adds its own
        up.git("checkout", "-q", "-b", "pr1", n1)
        up.commit("ggml : add BF16 (#1)", {"src/types.h": PR1_TYPES})
        up.git("update-ref", "refs/pull/1/head", "HEAD")
        up.git("checkout", "-q", "master")
        up.commit("cuda : gate MMQ on a runtime flag (#7)", {"src/mmq.cu": BROKEN_MMQ})
        up.commit("ggml : header comments (#8)", {"src/types.h": MOVED_TYPES})
        n2 = up.head()
        up.tag("n2")
        # PR 2 from n2: another case where feat adds its own
        up.git("checkout", "-q", "-b", "pr2", n2)
        up.commit("cuda : Q8_0 MMQ (#2)", {"src/mmq.cu": PR2_MMQ})
        up.git("update-ref", "refs/pull/2/head", "HEAD")
        up.git("checkout", "-q", "master")

        project = work / "project"
        patches = project / "patches"
        series(up, n1, "feat", FEAT, patches)
        series(up, n1, "types", TYPES, patches)

        def pins_yaml(builds: str) -> Path:
            return write_pins(project / "pins.yaml", f"upstream: {up.path}\nbuilds: [{builds}]\n"
                                                     f"description: the test pin set\npins:\n" + FEAT_AND_TYPES)

        bins = work / "bins"
        fake_perplexity(bins / "kld")
        write_script(bins / "smi" / "nvidia-smi",   # a visible GPU for kld's device runs (fake_llama.visible_gpu)
                     'if "--query-gpu=compute_cap" in sys.argv:\n    print("9.0")\nelse:\n    sys.exit(9)\n')
        model = work / "model.gguf"
        model.write_bytes(b"GGUF" + bytes(60))
        fake = FakeGitHub()
        with serving(fake):
            for i, night in enumerate(NIGHTS):
                out = results / night
                out.mkdir(parents=True)
                if night == "2026-11-02":
                    fake.pulls = [pull(1, "2026-11-01T10:00:00Z")]
                if night == "2026-11-03":
                    shutil.rmtree(patches / "feat")
                    series(up, n2, "feat", {"src/mmq.cu": BROKEN_MMQ.replace(
                        "        case GGML_TYPE_Q4_0:\n", "        case GGML_TYPE_Q4_0:\n        case GGML_TYPE_IQ1_M:\n")},
                        patches)
                    pinset("refresh", "-c", pins_yaml("n1, n2"), "types", "--onto", "n2", "--write", codes=(0,))
                    fake.pulls = [pull(1, "2026-11-02T10:00:00Z"), pull(2, "2026-11-02T11:00:00Z")]
                if night == "2026-11-04":
                    up.git("merge", "-q", "--no-ff", "-m", "Merge pull request #1", "pr1")
                    up.tag("n3")
                    fake.pulls = [pull(2, "2026-11-03T10:00:00Z")]
                builds = {"2026-11-01": "n1", "2026-11-02": "n1, n2", "2026-11-03": "n2", "2026-11-04": "n2, n3"}[night]
                cfg = pins_yaml(builds)
                shipped, newest = builds.split(", ")[0], builds.split(", ")[-1]
                pinset("sim", "-c", cfg, "--json", out / "sim.json")
                if shipped != newest:
                    pinset("pick", "-c", cfg, "--json", out / "pick.json")
                    pinset("blame", "-c", cfg, "--good", shipped, "--bad", newest, "--json", out / "blame.json")
                if verify:
                    pinset("verify", "-c", cfg, "--builds", shipped, "--json", out / "verify.json", "--no-progress",
                           "-j", "2", "--logs", work / "logs" / night)
                base, head = SPEEDS[night]
                pinset("bench", "--base-bin", fake_bin(bins / f"base-{i}", base, 0.01, 1 + 2 * i),
                       "--head-bin", fake_bin(bins / f"head-{i}", head, 0.01, 2 + 2 * i), "--cpu", "-m", model,
                       "-r", "1", "--rounds", "6", "--json", out / "bench.json", "--log-dir", work / "logs" / f"bench-{night}",
                       "--", "-p", "64", "-n", "16")
                pinset("kld", "--base-bin", bins / "kld", "--head-bin", bins / "kld", "-m", model, "--ctx", "256",
                       "--chunks", "3", "--json", out / "kld.json", "--log-dir", work / "logs" / f"kld-{night}")
                if fake.pulls:
                    pinset("forecast", "-c", cfg, "--repo", "o/r", "--api-url", fake.url, "--json", out / "forecast.json")
        last = results / NIGHTS[-1]
        (last / "damaged.json").write_text((last / "sim.json").read_text()[:200])
        (last / "matrix.json").write_text('{"schema": 1, "include": []}\n')
    print(f"history nights written under {results}", file=sys.stderr)
    return results
