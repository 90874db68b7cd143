"""Provable add/add unions (issue 44): pins.yaml `unions:` lets sim resolve exactly the conflict where upstream
and a pin both only added at one spot, different constructs — upstream's addition first, then the pin's — and
nothing else. The rule on git's own diff3 view (pure), then on real llama.cpp files (the vendored tree of
llama-cpp-python 0.3.36): the union equals a hand-made repin, each refusal stays a conflict."""

from __future__ import annotations

import pytest

from pinset.sim.unions import merge_diff3, refusal, split_diff3, union
from tests.testing import GitRepo, write_pins
from tests.testing.sim import by_id, run_sim

SWITCH = b"switch (a) {\n    case A:\n        return 1;\n    default:\n        return 0;\n}\n"


def _at_default(text: bytes, lines: str) -> bytes:
    return text.replace(b"    default:", lines.encode() + b"    default:")


def _union(tmp_path, ours: bytes, theirs: bytes, base: bytes = SWITCH):
    return union("x.c", merge_diff3(ours, base, theirs, tmp_path / "m"))


def test_two_arms_with_disjoint_labels_are_unioned_upstream_first(tmp_path):
    """Both bodies are `return 1;`: two runs of case arms with disjoint labels are two constructs."""
    text, hunks, why = _union(tmp_path, _at_default(SWITCH, "    case U:\n        return 1;\n"),
                              _at_default(SWITCH, "    case P:\n        return 1;\n"))
    assert why is None and text is not None
    assert text.encode() == _at_default(SWITCH, "    case U:\n        return 1;\n    case P:\n        return 1;\n")
    (hunk,) = hunks
    assert (hunk.file, hunk.line, hunk.upstream, hunk.pin) == ("x.c", 6, ("    case U:", "        return 1;"),
                                                               ("    case P:", "        return 1;"))


@pytest.mark.parametrize("ours, theirs, base, why", [
    # an edit on a side: the merge base has lines in the hunk
    (SWITCH.replace(b"return 1;", b"return 2;"), SWITCH.replace(b"return 1;", b"return 3;"), SWITCH, "merge base has lines"),
    # the same label added twice (one change made twice, partly)
    (_at_default(SWITCH, "    case U:\n        return 1;\n"), _at_default(SWITCH, "    case U:\n    case P:\n        return 2;\n"),
     SWITCH, "both sides add the label case U:"),
    # shared content lines that are no case arms
    (_at_default(SWITCH, "        log_it(a);\n        count++;\n"), _at_default(SWITCH, "        log_it(a);\n        other();\n"),
     SWITCH, "one change made twice"),
    # only block scaffolding on one side
    (_at_default(SWITCH, "    case U:\n        return 1;\n"), _at_default(SWITCH, "        break;\n    }\n"), SWITCH,
     "only block scaffolding"),
    (_at_default(SWITCH, "    case U:\n        return 1;\n"), _at_default(SWITCH, "    } break;\n    return;\n"), SWITCH,
     "only block scaffolding"),
    # disjoint labels, but both sides first add the same line to the arm above (one change made twice)
    (_at_default(SWITCH, "        log_it(a);\n    case U:\n        return 1;\n"),
     _at_default(SWITCH, "        log_it(a);\n    case P:\n        return 1;\n"), SWITCH, "one change made twice"),
], ids=["edit", "same-label", "shared-line", "scaffolding", "scaffolding-break", "shared-line-before-arms"])
def test_anything_else_is_refused(tmp_path, ours, theirs, base, why):
    text, hunks, refused = _union(tmp_path, ours, theirs, base)
    assert text is None and hunks == [] and refused is not None and why in refused, refused


def test_markers_that_do_not_nest_are_refused_and_one_side_empty_is_no_union():
    bar = "|" * 31
    assert split_diff3(f"a\n{bar} base\nb\n") is None
    assert split_diff3(f"{'<' * 31} upstream\nx\n{bar} base\n{'<' * 31} upstream\n") is None
    assert refusal([], [], ["case P:"]) == "one side adds nothing"
    assert refusal(["  "], [], ["case P:"]) == "one side adds nothing"


# --- real llama.cpp files ---------------------------------------------------------------------------------------

VERSION = "0.3.36"
ARCH_H, ARCH_CPP, CLIP = "src/llama-arch.h", "src/llama-arch.cpp", "tools/mtmd/clip.cpp"
HYBRID = "        case LLM_ARCH_DEEPSEEK4:\n        case LLM_ARCH_MINIMAX_01:\n"
# (file, the line after which both sides register their new architecture, what one registers there, by NAME)
SPOTS = [
    (ARCH_H, "    LLM_ARCH_GEMMA4_ASSISTANT,\n", "    LLM_ARCH_{N},\n"),
    (ARCH_CPP, '    { LLM_ARCH_GEMMA4_ASSISTANT, "gemma4-assistant" },\n', '    {{ LLM_ARCH_{N}, "{n}" }},\n'),
    (ARCH_CPP, HYBRID, "        case LLM_ARCH_{N}:\n"),   # llm_arch_is_hybrid's fallthrough group
    (CLIP, "                builder = std::make_unique<clip_graph_mimovl>(ctx, img);\n            } break;\n",
     "        case PROJECTOR_TYPE_{N}V:\n            {{\n"
     "                builder = std::make_unique<clip_graph_siglip>(ctx, img);\n            }} break;\n"),
]


def _real_files() -> dict[str, str]:
    from tests.testing.snapshots import vendored_file

    return {path: vendored_file(VERSION, path) for path in (ARCH_H, ARCH_CPP, CLIP)}


def _register(files: dict[str, str], *names: str) -> dict[str, str]:
    """`files` with each architecture of `names` registered at every spot, in that order (a person's repin)."""
    out = dict(files)
    for path, after, line in SPOTS:
        assert out[path].count(after) == 1, (path, after)
        added = "".join(line.format(N=name.upper(), n=name) for name in names)
        out[path] = out[path].replace(after, after + added)
    return out


def _pin_on_b1(up: GitRepo, tmp_path, name: str, files: dict[str, str]):
    """A pin made on b1 (format-patch, no base-commit:), its branch gone."""
    up.git("checkout", "-q", "-b", f"pin-{name}", "b1")
    up.commit(f"{name}: register", files)
    up.git("format-patch", "-q", "-o", str(tmp_path / "patches" / name), "b1..HEAD")
    up.git("checkout", "-q", "master")
    up.git("branch", "-q", "-D", f"pin-{name}")


@pytest.fixture(scope="module")
def real_files():
    return _real_files()


def _world(make_repo, tmp_path, real_files, pin_files: dict[str, str], name: str = "mine"):
    up = make_repo("upstream")
    up.commit("base", real_files)
    up.tag("b1")
    _pin_on_b1(up, tmp_path, name, pin_files)
    up.commit("model: add upnew (#100)", _register(real_files, "upnew"))
    up.tag("b2")
    return up


def _pins_yaml(tmp_path, up, *ids: str, unions: bool = True):
    entries = "".join(f"  - id: {i}\n    patches: patches/{i}\n" for i in ids)
    return write_pins(tmp_path / "pins.yaml", f"upstream: {up.path}\nbuilds: [b2]\n"
                      + ("unions: true\n" if unions else "") + f"pins:\n{entries}")


@pytest.mark.slow
def test_new_architectures_at_the_same_spots_are_unioned_as_a_person_would(make_repo, tmp_path, real_files, capsys):
    up = _world(make_repo, tmp_path, real_files, _register(real_files, "mine"))
    # without the key: a conflict, exactly as before
    code, data = run_sim(tmp_path, _pins_yaml(tmp_path, up, "mine", unions=False))
    assert code == 1 and by_id(data["builds"][0])["mine"]["status"] == "conflict"
    code, data = run_sim(tmp_path, _pins_yaml(tmp_path, up, "mine"))
    pin = by_id(data["builds"][0])["mine"]
    assert code == 0 and pin["status"] == "applied" and pin["apply_mode"] == "union" and pin["contract"]["ok"], pin
    # every unioned hunk named: file, line in the applied file, both additions
    repin = _register(real_files, "upnew", "mine")
    assert sorted(u["file"] for u in pin["unions"]) == [ARCH_CPP, ARCH_CPP, ARCH_H, CLIP]
    for u in pin["unions"]:
        lines = repin[u["file"]].split("\n")
        assert lines[u["line"] - 1:u["line"] - 1 + len(u["pin"])] == u["pin"], u
        assert "UPNEW" in "".join(u["upstream"]) and "MINE" in "".join(u["pin"]) and "UPNEW" not in "".join(u["pin"])
    # and a reviewer sees each of them under the grid
    shown = capsys.readouterr().out
    h = next(u for u in pin["unions"] if u["file"] == ARCH_H)
    assert (f"mine on b2: union (no person wrote it; verify it) at {ARCH_H}:{h['line']}: upstream added "
            "`LLM_ARCH_UPNEW,`, the pin `LLM_ARCH_MINE,`") in shown, shown
    # the tree `pinset apply` writes is the hand-made repin, byte for byte
    out = tmp_path / "tree"
    from pinset.cli import main

    assert main(["apply", "-c", str(tmp_path / "pins.yaml"), "--build", "b2", "--out", str(out)]) == 0
    assert "no person wrote it" in capsys.readouterr().out
    for path, text in repin.items():
        assert (out / path).read_text() == text, path


@pytest.mark.slow
@pytest.mark.parametrize("change, why", [
    # upstream's own architecture registered by the pin too (one change made twice, partly)
    (lambda files: _register(files, "upnew", "mine"), "both sides add"),
    # an edit where upstream adds: the pin rewrites the line the spot follows (a non-empty base)
    (lambda files: {**files, ARCH_CPP: files[ARCH_CPP].replace(HYBRID, HYBRID.replace(":\n", ": // hybrid\n"))},
     "merge base has lines"),
    # only scaffolding on the pin's side
    (lambda files: {**files, ARCH_CPP: files[ARCH_CPP].replace(HYBRID, HYBRID + "        {\n        }\n")},
     "only block scaffolding"),
], ids=["same-arch", "edit", "scaffolding"])
def test_what_is_no_provable_union_stays_a_conflict(make_repo, tmp_path, real_files, change, why):
    up = _world(make_repo, tmp_path, real_files, change(real_files))
    code, data = run_sim(tmp_path, _pins_yaml(tmp_path, up, "mine"))
    pin = by_id(data["builds"][0])["mine"]
    assert code == 1 and pin["status"] == "conflict" and pin["conflict_with"] == "upstream", pin
    assert "no provable add/add union" in pin["detail"] and why in pin["detail"], pin["detail"]
    assert "unions" not in pin


def test_the_key_is_opt_in_the_pins_word_over_the_pin_sets_and_a_bad_value_is_one_line(tmp_path):
    from pinset.config.schema import load_pinset
    from pinset.errors import ConfigError

    (tmp_path / "p.patch").write_text("diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1 +1,2 @@\n x\n+y\n")
    pins = "pins:\n  - id: a\n    patches: p.patch\n  - id: b\n    patches: p.patch\n    unions: {b}\n"
    for top, b, want in [("", "true", (False, True)), ("unions: true\n", "false", (True, False))]:
        path = write_pins(tmp_path / "pins.yaml", "builds: [pypi:llama-cpp-python==0.3.36]\n" + top + pins.format(b=b))
        assert tuple(p.unions for p in load_pinset(path).pins) == want
    path = write_pins(tmp_path / "pins.yaml", "builds: [pypi:llama-cpp-python==0.3.36]\n" + pins.format(b="maybe"))
    with pytest.raises(ConfigError, match=r"pins\.yaml:7.*pins\[1\]\.unions.*true or false"):
        load_pinset(path)


def test_a_warm_run_gives_the_same_union_and_another_pin_set_without_the_key_a_conflict(make_repo, tmp_path):
    """The memo (sim/memo.py) keeps an apply's answer by what it reads: the union is part of the answer only for
    a pin that allows it, so a cache warmed with `unions: true` never answers a pin set without the key."""
    up = make_repo("upstream")
    up.commit("base", {"x.c": SWITCH.decode()})
    up.tag("b1")
    _pin_on_b1(up, tmp_path, "arch", {"x.c": _at_default(SWITCH, "    case P:\n        return 1;\n").decode()})
    up.commit("case U", {"x.c": _at_default(SWITCH, "    case U:\n        return 1;\n").decode()})
    up.tag("b2")
    first = run_sim(tmp_path, _pins_yaml(tmp_path, up, "arch"))
    again = run_sim(tmp_path, _pins_yaml(tmp_path, up, "arch"))
    assert first == again and by_id(first[1]["builds"][0])["arch"]["apply_mode"] == "union", first
    code, data = run_sim(tmp_path, _pins_yaml(tmp_path, up, "arch", unions=False))
    assert code == 1 and by_id(data["builds"][0])["arch"]["status"] == "conflict"
    # pick takes the same answer: b2 is green, and says which pin a union applied
    import json

    from pinset.cli import main

    assert main(["pick", "-c", str(_pins_yaml(tmp_path, up, "arch")), "--builds", "b2,b1",
                 "--json", str(tmp_path / "pick.json")]) == 0
    row = json.loads((tmp_path / "pick.json").read_text())["builds"][0]
    assert row["verdict"] == "picked" and row["unioned"] == {"arch": ["x.c:6"]}, row


@pytest.mark.slow
def test_refresh_writes_the_unioned_series_so_the_next_night_applies_exactly(make_repo, tmp_path, real_files):
    from pinset.cli import main

    up = _world(make_repo, tmp_path, real_files, _register(real_files, "mine"))
    pins = _pins_yaml(tmp_path, up, "mine")
    assert main(["refresh", "mine", "--onto", "b2", "--write", "-c", str(pins)]) == 0
    code, data = run_sim(tmp_path, pins)
    pin = by_id(data["builds"][0])["mine"]
    assert code == 0 and pin["apply_mode"] == "exact" and "unions" not in pin, pin
    out = tmp_path / "tree"
    assert main(["apply", "-c", str(pins), "--build", "b2", "--out", str(out)]) == 0
    for path, text in _register(real_files, "upnew", "mine").items():
        assert (out / path).read_text() == text, path
