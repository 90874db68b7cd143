"""pin_paths: the patch files and folders a pins.yaml names, read by the config layer's reader (the one
load_pinset uses) without validating: the outputs rule and the recovery of a pin folder need them even when the
pin set does not load, and a file that does not read names nothing."""

from __future__ import annotations

import time

from pinset.config.paths import pin_paths
from pinset.config.reading import MAX_BYTES


def test_patch_files_and_folders_relative_to_the_pin_set(tmp_path):
    (tmp_path / "sub").mkdir()
    config = tmp_path / "sub" / "pins.yaml"
    config.write_text("builds: [b1]\npins:\n  - {id: a, patches: series}\n  - id: b\n    patches: [one.patch, 'two.patch']\n"
                      "  - {id: c, pr: 'https://github.com/o/r/pull/1'}\n  - {id: d, patches: 7}\n  - not a pin\n")
    assert pin_paths(config) == [str(tmp_path / "sub" / name) for name in ("series", "one.patch", "two.patch")]


def test_a_relative_pin_set_gives_relative_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pins.yaml").write_text("\ufeffpins:\n  - {id: a, patches: series}\n")   # a UTF-8 BOM is fine
    assert pin_paths("pins.yaml") == ["series"]


def test_yaml_as_the_loader_reads_it(tmp_path):
    """Aliases are followed and the last of two equal keys wins, as yaml.safe_load had it."""
    config = tmp_path / "pins.yaml"
    config.write_text("common: &p [x.patch]\npins:\n  - {id: a, patches: *p}\npins:\n  - {id: b, patches: y}\n")
    assert pin_paths(config) == [str(tmp_path / "y")]
    config.write_text("common: &p [x.patch]\npins:\n  - {id: a, patches: *p}\n")
    assert pin_paths(config) == [str(tmp_path / "x.patch")]


def test_what_does_not_read_names_nothing(tmp_path):
    """The verb's own reader says why; here each is no paths, quickly (no alias bomb is expanded)."""
    bad = tmp_path / "pins.yaml"
    assert pin_paths(tmp_path / "missing.yaml") == [] and pin_paths(tmp_path) == []
    for content in (b"pins: [\n", b"\xff\xfep\x00i\x00", b"pins:\n  - {id: a, patches: \"\xe9\"}\n",
                    b"[" * 5000 + b"]" * 5000, b"x" * (MAX_BYTES + 1)):
        bad.write_bytes(content)
        assert pin_paths(bad) == [], content[:20]
    bomb = ["a: &a [x.patch, x.patch, x.patch, x.patch, x.patch, x.patch, x.patch, x.patch, x.patch, x.patch]"]
    bomb += [f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]" for i in range(8)]
    bad.write_text("\n".join(bomb) + "\npins:\n  - {id: a, patches: *i}\n")
    start = time.monotonic()
    assert pin_paths(bad) == []
    assert time.monotonic() - start < 5
