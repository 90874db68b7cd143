"""`pinset rebase OWNER#N --as-series patches/NAME`: a PR pin becomes a local series, pins.yaml edited in place."""

from __future__ import annotations

import json

from pinset.cli import main


def make_pr(make_repo, merges=False):
    up = make_repo("upstream")
    up.commit("base", {"a.c": "int a(void) { return 1; }\n", "b.c": "int b;\n"})
    fork = up.head()
    up.commit("upstream moves", {"b.c": "int b;\nint b2;\n"})
    mid = up.head()
    up.git("checkout", "-q", "-b", "pr", fork)
    up.commit("pr: first", {"a.c": "int a(void) { return 2; }\n"})
    if merges:
        up.git("merge", "-q", "--no-edit", mid)
    head = up.commit("pr: second", {"c.c": "int c(void) { return 3; }\n"})
    up.git("update-ref", "refs/pull/7/head", head)
    up.git("checkout", "-q", "master")
    up.tag("b1")
    return up, head


PINS = """\
# my pin set
upstream: {up}
builds: [b1]   # one build
pins:
  - id: first
    patches: patches/first
    unchecked: none
  - id: ggml-org#7          # the PR we carry
    pr: https://github.com/ggml-org/llama.cpp/pull/7   # reviewed
    commit: {head}   # exact commit
    required: false
    unchecked: "no GPU feature"
"""


def setup(tmp_path, make_repo, merges=False):
    up, head = make_pr(make_repo, merges)
    (tmp_path / "patches" / "first").mkdir(parents=True)
    up.git("checkout", "-q", "-b", "s", "b1")
    up.commit("first", {"d.c": "int d;\n"})
    up.git("format-patch", "-q", "-o", str(tmp_path / "patches" / "first"), "b1..s")
    up.git("checkout", "-q", "master")
    cfg = tmp_path / "pins.yaml"
    cfg.write_text(PINS.format(up=up.path, head=head))
    return up, head, cfg


def test_pr_pin_becomes_a_series_pin_keeping_the_users_file(make_repo, tmp_path, capsys):
    up, head, cfg = setup(tmp_path, make_repo)
    sim = tmp_path / "before.json"
    main(["sim", "-c", str(cfg), "--json", str(sim)])
    assert main(["rebase", "ggml-org#7", "-c", str(cfg), "--as-series", "patches/pr7"]) == 0
    text = cfg.read_text()
    expected = PINS.format(up=up.path, head=head).replace(
        "    pr: https://github.com/ggml-org/llama.cpp/pull/7   # reviewed\n    commit: " + head + "   # exact commit\n",
        f"    patches: patches/pr7   # was https://github.com/ggml-org/llama.cpp/pull/7 at {head} "
        f"(pinset rebase --as-series; base: its fork point ")
    assert text.startswith(expected.split("(pinset rebase")[0])
    assert "# my pin set" in text and "# one build" in text and "# the PR we carry" in text
    assert "commit:" not in text and "    # exact commit\n" in text and "required: false" in text
    files = sorted(p.name for p in (tmp_path / "patches" / "pr7").iterdir())
    assert files == ["0001-pr-first.patch", "0002-pr-second.patch"]
    after = tmp_path / "after.json"
    assert main(["sim", "-c", str(cfg), "--json", str(after)]) == 0
    pins = {p["id"]: p for p in json.loads(after.read_text())["builds"][0]["pins"]}
    assert pins["ggml-org#7"]["status"] == "applied"
    assert pins["ggml-org#7"]["touched"] == json.loads(sim.read_text())["builds"][0]["pins"][1]["touched"]


def test_pr_with_merges_becomes_one_patch_of_its_diff(make_repo, tmp_path, capsys):
    _, _, cfg = setup(tmp_path, make_repo, merges=True)
    assert main(["rebase", "ggml-org#7", "-c", str(cfg), "--as-series", "patches/pr7"]) == 0
    files = sorted((tmp_path / "patches" / "pr7").iterdir())
    assert len(files) == 1 and "int b2;" not in files[0].read_text()   # not upstream's history it merged


def test_as_series_refuses_a_series_pin_and_a_used_folder(make_repo, tmp_path, capsys):
    _, _, cfg = setup(tmp_path, make_repo)
    before = cfg.read_bytes()
    assert main(["rebase", "first", "-c", str(cfg), "--as-series", "patches/x"]) == 2
    assert main(["rebase", "ggml-org#7", "-c", str(cfg), "--as-series", "patches/first"]) == 2
    assert "not an empty folder" in capsys.readouterr().err
    assert cfg.read_bytes() == before
