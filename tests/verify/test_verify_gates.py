"""The gate pipeline end to end on a stand-in tree: real git, real CMake/Ninja/ctest builds, and
programs that replay real captured test-backend-ops output (fixtures/verify/stand-in/replay.c).

What is under test is verify's orchestration: gate order, stop at the first red gate, the other
builds still verified, feature checks (all three kinds + unchecked), JSON/markdown, exit codes.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pinset.cli import main
from tests.testing import FIXTURES, ROOT, child_env, one_patch, run_doc, write_pins
from tests.testing.stand_in import OPS, STAND_IN, stand_in_files

FIX = FIXTURES

pytestmark = pytest.mark.skipif(not (shutil.which("cmake") and shutil.which("ninja") and shutil.which("cc")
                                     and shutil.which("ctest")), reason="cmake, ninja, ctest and cc are needed")


@pytest.fixture
def upstream(make_repo):
    repo = make_repo("upstream")
    repo.commit("v1", {k: v for k, v in stand_in_files().items() if v is not None})
    repo.tag("v1")
    repo.commit("v2: test-chat broken", {"replay/chat.exit": "1\n"})
    repo.tag("v2")
    repo.git("checkout", "-q", "v1")
    repo.commit("v3: test-backend-ops aborts", {"replay/test-MUL_MAT-CPU.log": (OPS / "cpu-killed-sigabrt.stdout").read_text(),
                                               "replay/test-MUL_MAT-CPU.exit": "ABRT\n"})
    repo.tag("v3")
    repo.git("checkout", "-q", "master")
    return repo


@pytest.fixture
def pin_set(tmp_path, make_repo, upstream):
    work = make_repo("work")
    one_patch(work, tmp_path / "patches" / "feature", {"README": "x\n"},
              {"feature.txt": "feature on\nfeature on again\n"}, "feature")
    work.commit("docs", {"docs/notes.md": "how pinned builds are configured\n"})
    work.format_patch("HEAD~1..HEAD", tmp_path / "patches" / "docs")
    return write_pins(tmp_path / "pins.yaml", """
        upstream: upstream
        builds: [v1, v2, v3]
        pins:
          - id: feature
            patches: patches/feature
            checks:
              - backend-op: {op: MUL_MAT, params: "type_a=iq1_s,"}
              - ctest: {name: test-grammar-parser}
              - command: {argv: ["cat", "{src}/feature.txt"], expect: "^feature on", timeout: 30}
          - id: docs
            patches: patches/docs
            unchecked: documentation only
        """)


def run_verify(pins: Path, tmp_path: Path, *extra: str) -> tuple[int, dict]:
    out = tmp_path / "verify.json"
    code = main(["verify", "-c", str(pins), "--json", str(out), "--markdown", str(tmp_path / "verify.md"),
                 "--no-progress", "-j", "2", *extra])
    return code, run_doc(out.read_text())


def gates(build: dict) -> dict:
    return {g["name"]: g for g in build["gates"]}


def test_gates_stop_per_build_and_every_build_is_verified(pin_set, tmp_path):
    code, doc = run_verify(pin_set, tmp_path)
    assert code == 1 and doc["kind"] == "verify" and doc["schema"] == 1 and not doc["ok"]
    v1, v2, v3 = doc["builds"]

    # v1: every CPU gate and every feature check green; the GPU gates not requested
    g = gates(v1)
    assert v1["ok"], v1
    assert [g[n]["status"] for n in ("cpu-build", "cpu-backend-ops", "cpu-test-chat", "feature-checks")] == ["passed"] * 4
    assert all(g[n]["status"] == "not-run" and g[n]["not_requested"] for n in ("cuda-build", "test-chat", "backend-ops"))
    # MUL_MAT and MUL_MAT_ID (no GGML_TYPE_* in these pins: no -p filter), then the backend-op check's op
    assert [(o["op"], o.get("params"), o["passed"], o["total"]) for o in g["cpu-backend-ops"]["ops"]] == \
        [("MUL_MAT", None, 14, 14), ("MUL_MAT_ID", None, 4, 4), ("MUL_MAT", "type_a=iq1_s,", 14, 14)]
    checks = {c["check"].split()[0]: c for c in g["feature-checks"]["checks"]}
    assert checks["backend-op"]["status"] == "passed" and checks["backend-op"]["cases"] == 14
    assert checks["ctest"]["status"] == "passed" and checks["ctest"]["cases"] == 1
    assert checks["command"]["status"] == "passed" and checks["command"]["cases"] == 2
    assert checks["unchecked"]["status"] == "unchecked" and checks["unchecked"]["detail"] == "documentation only"
    assert g["feature-checks"]["detail"].startswith("3/3 feature checks on CPU; 1 pin(s) unchecked")
    assert "test-grammar-parser" in g["cpu-build"]["targets"]          # found through ctest --show-only
    assert [p["id"] for p in v1["pins"]] == ["feature", "docs"] and all(len(p["ref"]) == 12 for p in v1["pins"])
    assert "-DGGML_NATIVE=OFF" in v1["cmake_flags"]

    # v2: red at cpu-test-chat, the rest not run (and says why)
    g = gates(v2)
    assert not v2["ok"] and g["cpu-test-chat"]["status"] == "failed" and "Failed" in g["cpu-test-chat"]["detail"]
    assert g["feature-checks"]["status"] == "not-run" and "cpu-test-chat failed" in g["feature-checks"]["detail"]

    # v3: test-backend-ops dies by SIGABRT -> red at cpu-backend-ops with the last output lines
    g = gates(v3)
    assert g["cpu-backend-ops"]["status"] == "failed"
    assert "killed by SIGABRT" in g["cpu-backend-ops"]["detail"] and "last output:" in g["cpu-backend-ops"]["detail"]
    assert g["cpu-test-chat"]["status"] == "not-run"

    md = (tmp_path / "verify.md").read_text()
    assert "| cpu-test-chat | failed |" in md and "3/3 feature checks on CPU" in md

    # the log names docs/verify.md gives: <logs>/<build>/{cpu,cuda}-{configure,build}.log, one per gate
    doc_text = (ROOT / "docs" / "verify.md").read_text()
    assert "`<logs>/<build>/{cpu,cuda}-{configure,build}.log` and one log per gate" in doc_text
    written = sorted(p.name for p in (tmp_path / "verify-logs" / "v1").iterdir())
    assert written == sorted(["cpu-configure.log", "cpu-build.log"] +
                             [f"{n}.log" for n in ("cpu-backend-ops", "cpu-test-chat", "feature-checks")])


def test_unchanged_reverify_does_not_rebuild(pin_set, tmp_path):
    write_pins(pin_set, pin_set.read_text().replace("builds: [v1, v2, v3]", "builds: [v1]"))
    code, first = run_verify(pin_set, tmp_path)
    assert code == 0 and first["ok"] and gates(first["builds"][0])["cpu-build"]["cached"] is False
    code, again = run_verify(pin_set, tmp_path)
    build = gates(again["builds"][0])["cpu-build"]
    assert code == 0 and build["cached"] is True and "no work to do" in build["detail"]


def test_a_check_that_matches_nothing_is_red(pin_set, tmp_path):
    text = pin_set.read_text().replace("builds: [v1, v2, v3]", "builds: [v1]").replace('"^feature on"', '"^feature off"')
    write_pins(pin_set, text)
    code, doc = run_verify(pin_set, tmp_path)
    fc = gates(doc["builds"][0])["feature-checks"]
    assert code == 1 and fc["status"] == "failed" and fc["detail"].startswith("2/3 feature checks on CPU")
    bad = [c for c in fc["checks"] if c["status"] == "failed"]
    assert len(bad) == 1 and bad[0]["cases"] == 0 and "does not match" in bad[0]["detail"]


def test_required_pin_that_does_not_apply_means_nothing_is_built(pin_set, tmp_path, make_repo):
    other = make_repo("other")
    other.commit("base", {"chat.c": "different\n"})
    other.commit("conflicting", {"chat.c": "different and changed\n"})
    other.format_patch("HEAD~1..HEAD", tmp_path / "patches" / "conflict")
    text = pin_set.read_text().replace("builds: [v1, v2, v3]", "builds: [v1]") + \
        "  - id: conflict\n    patches: patches/conflict\n    unchecked: test\n"
    write_pins(pin_set, text)
    code, doc = run_verify(pin_set, tmp_path)
    build = doc["builds"][0]
    assert code == 1 and not build["ok"]
    assert all(g["status"] == "not-run" for g in build["gates"])
    assert "required pins not in the tree: conflict" in gates(build)["cpu-build"]["detail"]


def test_toolchain_and_usage_errors_are_one_line_exit_2(pin_set, tmp_path, capsys, monkeypatch):
    assert main(["verify", "-c", str(pin_set), "--ops", "mul_mat"]) == 2
    assert main(["verify", "-c", str(pin_set), "--cuda-flags=-DGGML_CUDA_FA=OFF"]) == 2
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    (empty / "git").symlink_to(shutil.which("git"))  # pins.yaml is read with git (patches, upstream)
    monkeypatch.setenv("PATH", str(empty))
    assert main(["verify", "-c", str(pin_set)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == "pinset verify: error: cmake not found on PATH (install CMake >= 3.14)"
    assert not (tmp_path / "cache" / "builds").exists()


def test_cuda_gates_with_stand_ins(pin_set, tmp_path, upstream, monkeypatch):
    """The --cuda path end to end, GPU programs replaced: an `nvidia-smi` stand-in that answers the two
    queries verify makes (values of the H200 in shared/captured's README), the stand-in tree's
    test-backend-ops replaying the real H200 captures for CUDA0. nvcc must be real (the CUDA toolkit)."""
    from pinset.build.cmake import find_nvcc

    if find_nvcc() is None:
        pytest.skip("no CUDA toolkit (nvcc) here")
    _gpu_replays(upstream, tmp_path, monkeypatch, cpu_pad=True)
    # the replay ignores -p: check an op whose whole capture has no "not supported" case (PAD)
    write_pins(pin_set, pin_set.read_text().replace("builds: [v1, v2, v3]", "builds: [v1]")
               .replace('{op: MUL_MAT, params: "type_a=iq1_s,"}', '{op: PAD, params: "type=f32"}'))
    code, doc = run_verify(pin_set, tmp_path, "--cuda", "--op-jobs", "4")
    build = doc["builds"][0]
    g = gates(build)
    assert code == 0 and doc["ok"], json.dumps(g, indent=1)[:3000]
    assert doc["machine"]["gpu"]["name"] == "NVIDIA H200" and doc["options"]["cuda_architectures"] == "90"
    assert [g[n]["status"] for n in ("cpu-build", "cpu-backend-ops", "cpu-test-chat", "cuda-build", "test-chat",
                                     "backend-ops", "feature-checks")] == ["passed"] * 7
    assert "-DGGML_CUDA=ON" in build["cmake_flags"] and "-DCMAKE_CUDA_ARCHITECTURES=90" in build["cmake_flags"]
    assert g["cuda-build"]["build_dir"] != g["cpu-build"]["build_dir"]
    assert [o["op"] + f" {o['passed']}/{o['total']}" for o in g["backend-ops"]["ops"]] == \
        ["MUL_MAT 1304/1304", "MUL_MAT_ID 931/931", "PAD 34/34", "GET_ROWS 216/216"]
    assert g["backend-ops"]["device"] == "NVIDIA H200"
    assert g["feature-checks"]["where"] == "GPU" and g["feature-checks"]["detail"].startswith("3/3 feature checks on GPU")
    log = Path(g["backend-ops"]["log"]).read_text()
    assert "-b CUDA0 -j 4" in log                                        # --op-jobs reaches test-backend-ops
    md = (tmp_path / "verify.md").read_text()
    assert "MUL_MAT 1304/1304" in md and "NVIDIA H200 (driver 580.159.04, compute capability 9.0" in md

    # a feature check whose matching cases the GPU backend does not support is red, not a pass (the replay
    # ignores -p; the parser's own exact filter keeps the iq1_s cases on the CPU, and on CUDA0 also the 33
    # q4_0 x f16 cases, "not supported")
    write_pins(pin_set, pin_set.read_text().replace('{op: PAD, params: "type=f32"}',
                                                    '{op: MUL_MAT, params: "type_a=(iq1_s|q4_0),type_b=f(16|32)"}'))
    code, doc = run_verify(pin_set, tmp_path, "--cuda")
    g = gates(doc["builds"][0])
    assert code == 1 and g["cuda-build"]["cached"] is True and g["backend-ops"]["status"] == "passed"
    assert g["feature-checks"]["status"] == "failed"
    assert "33 matching cases not supported on CUDA0" in g["feature-checks"]["detail"]


def test_an_interrupted_verify_writes_no_pass_and_leaves_no_stale_green(pin_set, tmp_path):
    """SIGINT during a gate (here: the feature checks, the last gate): exit 130, and the JSON at --json is this
    run's, with the cut gate `not-run` — not the green file an earlier run left there."""
    import subprocess
    import sys

    text = pin_set.read_text().replace("builds: [v1, v2, v3]", "builds: [v1, v2]")
    write_pins(pin_set, text)
    code, first = run_verify(pin_set, tmp_path)
    assert gates(first["builds"][0])["feature-checks"]["status"] == "passed"
    # the command check now signals pinset itself, as Ctrl-C in the terminal would
    write_pins(pin_set, text.replace('["cat", "{src}/feature.txt"]', '["sh", "-c", "kill -INT $PPID; sleep 30"]'))
    env = child_env()
    done = subprocess.run([sys.executable, "-m", "pinset", "verify", "-c", str(pin_set), "--json",
                           str(tmp_path / "verify.json"), "--markdown", str(tmp_path / "verify.md"), "--no-progress",
                           "-j", "2"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 130, done.stderr[-2000:]
    assert "Traceback" not in done.stderr and done.stderr.strip().splitlines()[-1] == "pinset: interrupted"
    doc = json.loads((tmp_path / "verify.json").read_text())
    assert not doc["ok"] and doc["summary"] == "verify was interrupted (SIGINT/SIGTERM): gates not run on v1, v2"
    v1, v2 = doc["builds"]
    g = gates(v1)
    assert [g[n]["status"] for n in ("cpu-build", "cpu-backend-ops", "cpu-test-chat")] == ["passed"] * 3
    assert g["feature-checks"]["status"] == "not-run" and "interrupted" in g["feature-checks"]["detail"]
    assert "checks" not in g["feature-checks"] and not v1["ok"]
    assert {"what": "gates from feature-checks on", "why": "verify was interrupted (SIGINT/SIGTERM)"} in v1["not_tested"]
    # the build after it never started: every gate not-run, saying why
    assert not v2["ok"] and all(x["status"] == "not-run" for x in v2["gates"])
    assert "interrupted" in gates(v2)["cpu-build"]["detail"]
    assert "not-run" in (tmp_path / "verify.md").read_text()


def _gpu_replays(upstream, tmp_path, monkeypatch, cpu_pad=False):
    """The stand-in tree replaying the H200 captures for CUDA0 (and with `cpu_pad` the CPU's PAD capture),
    and an nvidia-smi stand-in for one H200."""
    upstream.git("checkout", "-q", "v1")
    for op in ("MUL_MAT", "MUL_MAT_ID", "PAD", "GET_ROWS"):
        upstream.write(f"replay/test-{op}-CUDA0.log", (OPS / f"h200-test-{op}.log").read_text())
    if cpu_pad:
        upstream.write("replay/test-PAD-CPU.log", (OPS / "cpu-test-PAD.log").read_text())
    upstream.git("add", "replay")
    upstream.git("commit", "-q", "-m", "GPU replays")
    upstream.git("tag", "-f", "v1")
    smi = tmp_path / "gpu-bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text('#!/bin/sh\ncase "$*" in\n  *compute_cap,*) echo "NVIDIA H200, 580.159.04, 9.0, 143771";;\n'
                   '  *compute_cap*) echo "9.0";;\nesac\n')
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{smi.parent}:{__import__('os').environ['PATH']}")


def test_a_cuda_build_for_another_architecture_than_the_gpu_says_so(pin_set, tmp_path, upstream, monkeypatch):
    """pins.yaml builds for 8.0, the GPU is a 9.0: its kernels ran as PTX compiled on the fly (or not at all), so
    the code of the GPU's own architecture was never compiled. The JSON says so instead of a plain green."""
    from pinset.build.cmake import find_nvcc

    if find_nvcc() is None:
        pytest.skip("no CUDA toolkit (nvcc) here")
    _gpu_replays(upstream, tmp_path, monkeypatch)
    write_pins(pin_set, pin_set.read_text().replace("builds: [v1, v2, v3]", "builds: [v1]\ncuda:\n  architectures: \"80\""))
    code, doc = run_verify(pin_set, tmp_path, "--cuda", "--ops", "PAD")
    build = doc["builds"][0]
    assert doc["options"]["cuda_architectures"] == "80" and doc["options"]["gpu_architectures"] == "90"
    assert {"what": "CUDA code for this GPU's architecture (90)",
            "why": "the build is for CUDA architectures 80 only"} in build["not_tested"], build["not_tested"]


@pytest.mark.parametrize("recipe", ["true", "touch ${CMAKE_BINARY_DIR}/bin/llama-fake"])
def test_a_target_that_builds_without_its_program_is_a_red_build(pin_set, tmp_path, upstream, recipe):
    """ninja says the target is built, but bin/ has no program by that name (a custom target that makes
    nothing, or a file that cannot run): the build gate is red, not the check that would run it."""
    upstream.git("checkout", "-q", "v1")
    upstream.write("CMakeLists.txt", (STAND_IN / "CMakeLists.txt").read_text()
                   + f"add_custom_target(llama-fake COMMAND {recipe})\n")
    upstream.git("commit", "-q", "-am", "a target that makes no program")
    upstream.git("tag", "-f", "v1")
    write_pins(pin_set, pin_set.read_text().replace("builds: [v1, v2, v3]", "builds: [v1]")
               .replace('["cat", "{src}/feature.txt"]', '["{bin}/llama-fake", "--help"]'))
    code, doc = run_verify(pin_set, tmp_path)
    g = gates(doc["builds"][0])
    assert code == 1 and g["cpu-build"]["status"] == "failed", g["cpu-build"]
    assert "llama-fake" in g["cpu-build"]["detail"] and g["feature-checks"]["status"] == "not-run"


def test_a_build_whose_tree_cannot_be_built_is_red_and_the_others_are_verified(pin_set, tmp_path, upstream):
    """A tree without CMakeLists.txt (not a llama.cpp tree at that commit) stopped the whole run with exit 2
    and no JSON; it is that build's red cpu-build, and the other builds are still verified."""
    upstream.git("checkout", "-q", "v1")
    upstream.git("rm", "-q", "CMakeLists.txt")
    upstream.git("commit", "-q", "-m", "no CMakeLists.txt")
    upstream.tag("v4")
    write_pins(pin_set, pin_set.read_text().replace("builds: [v1, v2, v3]", "builds: [v4, v1]"))
    code, doc = run_verify(pin_set, tmp_path)
    v4, v1 = doc["builds"]
    assert code == 1 and not v4["ok"] and v1["ok"]
    g = gates(v4)
    assert g["cpu-build"]["status"] == "failed" and "no CMakeLists.txt" in g["cpu-build"]["detail"]
    assert g["cpu-backend-ops"]["status"] == "not-run"


def test_gpu_gates_on_another_gpu_than_the_result_names_are_red(pin_set, tmp_path, upstream, monkeypatch):
    """CUDA numbers GPUs fastest first, nvidia-smi by PCI bus: on a machine with two models, CUDA0 may not be
    the GPU the JSON records (machine.gpu). test-backend-ops names its device; a result that would credit
    another GPU with the run is red."""
    from pinset.build.cmake import find_nvcc

    if find_nvcc() is None:
        pytest.skip("no CUDA toolkit (nvcc) here")
    _gpu_replays(upstream, tmp_path, monkeypatch)
    smi = tmp_path / "gpu-bin" / "nvidia-smi"
    smi.write_text(smi.read_text().replace("NVIDIA H200, 580.159.04, 9.0, 143771", "NVIDIA GH200 480GB, 580.159.04, 9.0, 97871"))
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    write_pins(pin_set, pin_set.read_text().replace("builds: [v1, v2, v3]", "builds: [v1]"))
    code, doc = run_verify(pin_set, tmp_path, "--cuda", "--ops", "PAD")
    g = gates(doc["builds"][0])
    assert doc["machine"]["gpu"]["name"] == "NVIDIA GH200 480GB"
    assert code == 1 and g["backend-ops"]["status"] == "failed", g["backend-ops"]
    assert "ran on NVIDIA H200, not on NVIDIA GH200 480GB" in g["backend-ops"]["detail"]


def test_a_log_folder_that_cannot_hold_a_builds_logs_is_one_line(pin_set, tmp_path, capsys):
    """--logs names a folder in which the build's own subfolder is a file: one line naming it, not a traceback."""
    write_pins(pin_set, pin_set.read_text().replace("builds: [v1, v2, v3]", "builds: [v1]"))
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "v1").write_text("not a folder\n")
    code = main(["verify", "-c", str(pin_set), "--logs", str(tmp_path / "logs"), "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "Traceback" not in err[0]
    assert err[0].startswith("pinset verify: error: ") and str(tmp_path / "logs" / "v1") in err[0]
