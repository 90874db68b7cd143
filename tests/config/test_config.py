"""Bad input: one clear line naming file, line and key; exit 2; nothing changed."""

from __future__ import annotations

import io
import tarfile

import pytest

from pinset.cli import main
from pinset.config.schema import load_pinset
from pinset.errors import ConfigError
from tests.testing import write_pins

SHA = "44eb88e9aba218b24c0f374f2ec1c4d7d7920877"
PATCH = """From 0 Mon Sep 17 00:00:00 2001
Subject: [PATCH] x

---
diff --git a/a.txt b/a.txt
--- a/a.txt
+++ b/a.txt
@@ -1 +1 @@
-a
+b
--
2.39.5
"""


@pytest.fixture
def patch_dir(tmp_path):
    d = tmp_path / "patches" / "series"
    d.mkdir(parents=True)
    (d / "0001-x.patch").write_text(PATCH)
    return d


def fails(tmp_path, text, capsys, *args):
    cfg = write_pins(tmp_path / "pins.yaml", text)
    before = sorted(p.name for p in tmp_path.iterdir() if p.name != "cache")
    code = main(["sim", "-c", str(cfg), *args])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1, err
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "cache") == before  # nothing written
    return err


def test_valid_file_loads(tmp_path, patch_dir):
    cfg = write_pins(tmp_path / "pins.yaml", f"""
        upstream: https://github.com/ggml-org/llama.cpp
        builds: [b11756, pypi:llama-cpp-python==0.3.36]
        cuda: {{architectures: "90", flags: ["-DGGML_CUDA_FA=OFF"]}}
        pins:
          - id: cuda-mmq-iq1m
            patches: patches/series
            checks:
              - backend-op: {{op: MUL_MAT, params: "type_a=iq1_m"}}
              - ctest: {{name: test-chat}}
              - command: {{argv: ["{{bin}}/llama-cli", "--version"], expect: "version"}}
          - id: ggml-org#25731
            pr: https://github.com/ggml-org/llama.cpp/pull/25731
            commit: {SHA}
            required: false
            unchecked: no GPU feature to check
    """)
    ps = load_pinset(cfg)
    assert ps.builds == ("b11756", "pypi:llama-cpp-python==0.3.36")
    assert [p.id for p in ps.pins] == ["cuda-mmq-iq1m", "ggml-org#25731"]
    assert ps.pins[0].patches == patch_dir.resolve() and ps.pins[0].required is True
    assert [c.kind for c in ps.pins[0].checks] == ["backend-op", "ctest", "command"]
    assert ps.pins[1].pr.number == 25731 and ps.pins[1].pr.owner == "ggml-org" and ps.pins[1].required is False
    assert ps.cuda_architectures == "90" and ps.cuda_flags == ("-DGGML_CUDA_FA=OFF",)


@pytest.mark.parametrize("body, expected", [
    ("builds: [b1]\npins:\n  - id: a\n    patches: patches/series\n    colour: red\n",
     "pins.yaml:5: pins[0].colour: unknown key"),
    ("builds: [b1]\nflavour: x\npins: []\n", "pins.yaml:2: flavour: unknown key"),
    ("builds: [b1]\npins:\n  - id: a\n    patches: patches/series\n  - id: a\n    patches: patches/series\n",
     "pins.yaml:5: pins[1].id: duplicate id 'a' (first on line 4)"),
    ("builds: [b1]\npins:\n  - id: a\n    patches: patches/nope\n",
     "pins.yaml:4: pins[0].patches: no such folder: patches/nope"),
    ("builds: [b1]\npins:\n  - id: a\n    pr: https://github.com/ggml-org/llama.cpp/pull/1\n    commit: 44eb88e9xyz\n",
     "pins.yaml:5: pins[0].commit: malformed sha '44eb88e9xyz'"),
    ("builds: [b1]\npins:\n  - id: a\n    pr: https://github.com/ggml-org/llama.cpp/issues/1\n    commit: " + SHA + "\n",
     "pins.yaml:4: pins[0].pr: malformed PR URL"),
    ("builds: [b1]\npins:\n  - id: a\n    pr: https://github.com/ggml-org/llama.cpp/pull/1\n",
     "pins.yaml:3: pins[0].commit: missing"),
    ("builds: [b1]\npins: []\n", "pins.yaml:2: pins: no pins listed"),
    ("builds: [b1]\n", "pins.yaml:0: pins: no pins listed"),
    ("builds: []\npins: []\n", "pins.yaml:1: builds: empty list"),
    ("builds: [b1, b1]\npins: []\n", "pins.yaml:1: builds[]: duplicate build 'b1'"),
    ("builds: [b1]\npins:\n  - id: a\n    patches: patches/series\n    required: maybe\n",
     "pins.yaml:5: pins[0].required: must be true or false"),
    ("builds: [b1]\npins:\n  - id: a\n    patches: patches/series\n    checks:\n      - backend-op: {params: x}\n",
     "pins.yaml:6: pins[0].checks[0].backend-op.op: missing"),
    ("builds: [b1]\npins:\n  - id: a\n    patches: patches/series\n    checks:\n      - command: {argv: [x], expect: '('}\n",
     "pins.yaml:6: pins[0].checks[0].command.expect: bad regular expression"),
    ("builds: [b1]\npins:\n  - id: a\n", "pins.yaml:3: pins[0]: give exactly one of `patches:`"),
    ("builds: [b1]\npins: [\n", "pins.yaml:3: not valid YAML"),
    ("builds: [b1]\ncuda: {flags: [GGML_CUDA_FA=OFF]}\npins: []\n",
     "pins.yaml:2: cuda.flags[]: malformed CMake flag 'GGML_CUDA_FA=OFF'"),
])
def test_bad_config(tmp_path, patch_dir, capsys, body, expected):
    err = fails(tmp_path, "upstream: https://github.com/ggml-org/llama.cpp\n" + body, capsys)
    # Lines count from the upstream: line we prepend.
    file_, line, rest = expected.split(":", 2)
    assert f"{file_}:{int(line) + 1}:{rest}" in err, err


def test_malformed_upstream_url(tmp_path, patch_dir, capsys):
    err = fails(tmp_path, "upstream: https://\nbuilds: [b1]\npins:\n  - id: a\n    patches: patches/series\n", capsys)
    assert "pins.yaml:1: upstream: malformed URL 'https://'" in err


def test_build_without_upstream(tmp_path, patch_dir, capsys):
    err = fails(tmp_path, "builds: [b1]\npins:\n  - id: a\n    patches: patches/series\n", capsys)
    assert "pins.yaml:1: builds[]: build 'b1' needs an `upstream:`" in err


def test_missing_config_file(tmp_path, capsys):
    assert main(["sim", "-c", str(tmp_path / "none.yaml")]) == 2
    assert "none.yaml: no such file" in capsys.readouterr().err


def test_config_error_message_format(tmp_path):
    err = ConfigError(tmp_path / "pins.yaml", 7, "pins[2].commit", "malformed sha 'x'")
    assert str(err) == f"{tmp_path / 'pins.yaml'}:7: pins[2].commit: malformed sha 'x'"


def test_unknown_tag_is_one_line_exit_2(make_repo, tmp_path, patch_dir, capsys):
    up = make_repo()
    up.commit("base", {"a.txt": "a\n"})
    err = fails(tmp_path, f"upstream: {up.path}\nbuilds: [b404]\npins:\n  - id: a\n    patches: patches/series\n", capsys)
    assert f"build 'b404': no such tag, branch or commit at {up.path}" in err


def test_unreachable_upstream_is_one_line_exit_2(tmp_path, patch_dir, capsys):
    err = fails(tmp_path, "upstream: https://127.0.0.1:9/nobody/nothing.git\nbuilds: [b1]\npins:\n"
                          "  - id: a\n    patches: patches/series\n", capsys)
    assert "unreachable" in err


def test_builds_option_is_validated(tmp_path, patch_dir, capsys):
    cfg = write_pins(tmp_path / "pins.yaml", "builds: [pypi:llama-cpp-python==0.3.36]\npins:\n  - id: a\n    patches: patches/series\n")
    assert main(["sim", "-c", str(cfg), "--builds", "b1"]) == 2
    assert "--builds: 'b1' needs an `upstream:`" in capsys.readouterr().err


def test_sdist_without_vendored_tree(tmp_path, patch_dir, capsys, isolated_cache):
    # A real (tiny) sdist in the download cache that lacks vendor/llama.cpp.
    downloads = isolated_cache / "downloads"
    downloads.mkdir(parents=True)
    with tarfile.open(downloads / "llama_cpp_python-9.9.9.tar.gz", "w:gz") as tar:
        data = b"## [9.9.9]\n\n- feat: update llama.cpp to ggml-org/llama.cpp@0c1e57098\n"
        info = tarfile.TarInfo("llama_cpp_python-9.9.9/CHANGELOG.md")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    err = fails(tmp_path, "builds: [pypi:llama-cpp-python==9.9.9]\npins:\n  - id: a\n    patches: patches/series\n", capsys)
    assert "pypi:llama-cpp-python==9.9.9: sdist llama_cpp_python-9.9.9.tar.gz has no vendored vendor/llama.cpp tree" in err


# Pin ids become paths (refresh's scratch folder, rebase's worktree name): an id that climbs out is refused.
UNSAFE_IDS = ["a/../../x", "a/..", "x/./y", "a//b", "a/", "a/.hidden", "fork#9/../../../etc", "..", "./a", "a\\b"]
SAFE_IDS = ["ggml-org#25731", "fork#9", "mine", "ollama/0001-fix-cuda", "a.b", "v1.2+local", "x/y_z", "cuda-mmq-iq1m",
            "a..b", "A/B/C"]


@pytest.mark.parametrize("pin_id", UNSAFE_IDS)
def test_a_pin_id_that_could_escape_as_a_path_is_refused_naming_the_line(tmp_path, patch_dir, capsys, pin_id):
    err = fails(tmp_path, f"""
        upstream: https://github.com/ggml-org/llama.cpp
        builds: [b11756]
        pins:
          - id: "{pin_id.replace(chr(92), chr(92) * 2)}"
            patches: patches/series
    """, capsys)
    assert "pins.yaml:4: pins[0].id: malformed id" in err and "pinset sim: error:" in err


@pytest.mark.parametrize("pin_id", SAFE_IDS)
def test_every_id_of_the_examples_still_reads(tmp_path, patch_dir, pin_id):
    cfg = write_pins(tmp_path / "pins.yaml", f"""
        upstream: https://github.com/ggml-org/llama.cpp
        builds: [b11756]
        pins:
          - id: "{pin_id}"
            patches: patches/series
    """)
    assert [p.id for p in load_pinset(cfg).pins] == [pin_id]


def test_the_ids_of_the_shipped_examples_all_read():
    import re

    from pinset.config.schema import PIN_ID_RE
    from tests.testing import ROOT

    found = set()
    for path in [ROOT / "pins.yaml", *(ROOT / "examples").rglob("*.yaml"), *(ROOT / "tests").rglob("*.py")]:
        found |= set(re.findall(r"^\s*- id: \"?([^\"\s]+)\"?\s*$", path.read_text(errors="replace"), re.M))
    found = {i for i in found if "{" not in i and i not in UNSAFE_IDS}
    assert len(found) > 20 and not [i for i in found if not PIN_ID_RE.match(i)]
