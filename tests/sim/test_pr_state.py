"""PR pins' pull requests (issue 43): asked once per run from a local GitHub stand-in (GraphQL, REST when
GraphQL fails), shown in sim's grid, JSON and markdown, judged by `pinset report`; `skip-unless-open` pins
left out once their PR is merged or closed. Real git repositories; only GitHub is a fake."""

from __future__ import annotations

import json
import socket
import time

import pytest

from pinset.cli import main
from pinset.config.schema import load_pinset
from pinset.github.pr_state import pr_states
from pinset.results import read_document
from pinset.sim.model import SimResult
from tests.testing import GitRepo, without_start, write_pins
from tests.testing.fake_github import TOKEN

BASE = {"src/a.c": "int a(void) { return 1; }\n", "src/b.c": "int b(void) { return 2; }\n"}


def _upstream(make_repo) -> tuple[GitRepo, dict[str, list[str]]]:
    """upstream with b1, PR 1 (two commits on src/a.c) and PR 2 (one commit on src/b.c); refs/pull/N/head at
    each PR's first commit (what the pins name)."""
    up = make_repo("upstream")
    up.commit("base", BASE)
    up.tag("b1")
    commits: dict[str, list[str]] = {}
    for number, path in ((1, "src/a.c"), (2, "src/b.c")):
        up.git("checkout", "-q", "-b", f"pr{number}", "b1")
        first = up.commit(f"pr{number}", {path: BASE[path].replace("return", "return 10 +")})
        second = up.commit(f"pr{number} more", {path: BASE[path].replace("return", "return 20 +")})
        up.git("update-ref", f"refs/pull/{number}/head", first)
        commits[f"ggml-org/llama.cpp#{number}"] = [first, second]
    up.git("checkout", "-q", "master")
    return up, commits


def _pins(tmp_path, up: GitRepo, commits, *, skip: bool = False, optional: bool = False):
    pins = []
    for number in (1, 2):
        key = f"ggml-org/llama.cpp#{number}"
        pins.append(f"""  - id: ggml-org#{number}
    pr: https://github.com/ggml-org/llama.cpp/pull/{number}
    commit: {commits[key][0]}""")
    if skip:
        pins[0] += "\n    skip-unless-open: true"
    if optional:
        pins[0] += "\n    required: false"
    return write_pins(tmp_path / "pins.yaml", f"upstream: {up.path}\nbuilds: [b1]\npins:\n" + "\n".join(pins) + "\n")


def _sim(tmp_path, cfg, capsys, *extra):
    out = tmp_path / "sim.json"
    code = main(["sim", "-c", str(cfg), "--json", str(out), "--markdown", str(tmp_path / "sim.md"), *extra])
    captured = capsys.readouterr()
    return code, json.loads(out.read_text()), captured.out, captured.err


def _states(data) -> dict[str, dict]:
    return {s["pin"]: s for s in data["prs"]["pins"]}


def test_open_pr_at_its_pin_and_one_graphql_request_for_all(make_repo, tmp_path, github, capsys):
    up, commits = _upstream(make_repo)
    github.add_pr("ggml-org/llama.cpp#1", commits["ggml-org/llama.cpp#1"][:1], review="APPROVED")
    github.add_pr("ggml-org/llama.cpp#2", commits["ggml-org/llama.cpp#2"][:1], draft=True)
    code, data, out, err = _sim(tmp_path, _pins(tmp_path, up, commits), capsys)
    assert code == 0, out + err
    states = _states(data)
    assert (states["ggml-org#1"]["state"], states["ggml-org#1"]["behind"], states["ggml-org#1"]["review"]) == \
        ("open", 0, "APPROVED")
    assert states["ggml-org#2"]["state"] == "draft" and data["prs"]["source"] == "graphql"
    assert "ggml-org#1 (PR open)" in out and "ggml-org#2 (PR draft)" in out   # the grid's pin column
    assert "`ggml-org#2` (PR draft)" in (tmp_path / "sim.md").read_text()
    assert [(m, p) for m, p, _, _ in github.requests] == [("POST", "/graphql")]   # one request, every pin
    assert github.requests[0][2]["Authorization"] == f"Bearer {TOKEN}"
    assert TOKEN not in out + err + (tmp_path / "sim.json").read_text() + (tmp_path / "sim.md").read_text()
    doc, kind, _, _ = read_document(tmp_path / "sim.json")   # the report's reader keeps every field
    assert kind == "sim" and SimResult.from_json(doc).to_json() == without_start(data)


def test_head_moved_past_the_pin_is_said_with_the_count_and_the_head(make_repo, tmp_path, github, capsys):
    up, commits = _upstream(make_repo)
    pr1 = commits["ggml-org/llama.cpp#1"]
    github.add_pr("ggml-org/llama.cpp#1", pr1)
    github.add_pr("ggml-org/llama.cpp#2", commits["ggml-org/llama.cpp#2"][:1])
    code, data, out, _ = _sim(tmp_path, _pins(tmp_path, up, commits), capsys)
    state = _states(data)["ggml-org#1"]
    assert (state["behind"], state["on_head"], state["head"]) == (1, True, pr1[1])
    assert "ggml-org#1 (PR open, 1 behind)" in out
    assert f"ggml-org#1: PR open, 1 commit behind its head {pr1[1][:9]}" in out
    assert f"1 commit behind its head {pr1[1][:9]}" in (tmp_path / "sim.md").read_text()
    assert code == 0   # a note, not a failure of the sim

    report = main(["report", str(tmp_path / "sim.json"), "--markdown", str(tmp_path / "r.md")])
    text = (tmp_path / "r.md").read_text()
    assert f"1 commit behind its head {pr1[1][:9]}" in text and "blocked" not in text.split("\n\n")[0] + str(report)


def test_force_pushed_past_the_pin(make_repo, tmp_path, github, capsys):
    up, commits = _upstream(make_repo)
    rewritten = "f" * 40
    github.add_pr("ggml-org/llama.cpp#1", ["e" * 40, rewritten])   # the pinned commit is no longer on the PR
    github.add_pr("ggml-org/llama.cpp#2", commits["ggml-org/llama.cpp#2"][:1])
    _, data, out, _ = _sim(tmp_path, _pins(tmp_path, up, commits), capsys)
    state = _states(data)["ggml-org#1"]
    assert (state["on_head"], state["behind"], state["head"]) == (False, None, rewritten)
    assert "force-pushed: the pin is no longer on it (head fffffffff)" in out


def test_closed_without_merge_blocks_the_report_unless_optional(make_repo, tmp_path, github, capsys):
    up, commits = _upstream(make_repo)
    github.add_pr("ggml-org/llama.cpp#1", commits["ggml-org/llama.cpp#1"][:1], state="CLOSED")
    github.add_pr("ggml-org/llama.cpp#2", commits["ggml-org/llama.cpp#2"][:1])
    code, data, out, _ = _sim(tmp_path, _pins(tmp_path, up, commits), capsys)
    assert _states(data)["ggml-org#1"]["state"] == "closed" and code == 0   # still applied: sim says what is
    assert "ggml-org#1: PR closed without merge" in out
    assert main(["report", str(tmp_path / "sim.json"), "--json", str(tmp_path / "r.json"),
                 "--markdown", str(tmp_path / "r.md")]) == 1
    verdict = json.loads((tmp_path / "r.json").read_text())["verdict"]
    assert any("ggml-org#1" in b and "closed without merge" in b for b in verdict["blockers"]), verdict

    github.requests.clear()
    _sim(tmp_path, _pins(tmp_path, up, commits, optional=True), capsys)
    main(["report", str(tmp_path / "sim.json"), "--json", str(tmp_path / "r.json"), "--markdown", str(tmp_path / "r.md")])
    verdict = json.loads((tmp_path / "r.json").read_text())["verdict"]
    assert not any("closed" in b for b in verdict["blockers"]) and "closed without merge" in (tmp_path / "r.md").read_text()


@pytest.mark.parametrize("state", ["MERGED", "CLOSED"])
def test_skip_unless_open_leaves_the_pin_out_in_every_output(make_repo, tmp_path, github, capsys, state):
    up, commits = _upstream(make_repo)
    github.add_pr("ggml-org/llama.cpp#1", commits["ggml-org/llama.cpp#1"][:1], state=state)
    github.add_pr("ggml-org/llama.cpp#2", commits["ggml-org/llama.cpp#2"][:1])
    code, data, out, _ = _sim(tmp_path, _pins(tmp_path, up, commits, skip=True), capsys)
    assert code == 0
    assert [p["id"] for p in data["builds"][0]["pins"]] == ["ggml-org#2"]   # not applied at all
    assert _states(data)["ggml-org#1"]["skipped"] is True
    word = state.lower()
    assert f"not open ({word}): skipped" in out and f"not open ({word}): skipped" in (tmp_path / "sim.md").read_text()
    main(["report", str(tmp_path / "sim.json"), "--json", str(tmp_path / "r.json"), "--markdown", str(tmp_path / "r.md")])
    assert "skipped (skip-unless-open)" in (tmp_path / "r.md").read_text()
    assert not json.loads((tmp_path / "r.json").read_text())["verdict"]["blockers"]


def test_an_open_skip_unless_open_pin_is_applied(make_repo, tmp_path, github, capsys):
    up, commits = _upstream(make_repo)
    github.add_pr("ggml-org/llama.cpp#1", commits["ggml-org/llama.cpp#1"][:1])
    github.add_pr("ggml-org/llama.cpp#2", commits["ggml-org/llama.cpp#2"][:1])
    _, data, _, _ = _sim(tmp_path, _pins(tmp_path, up, commits, skip=True), capsys)
    assert [p["status"] for p in data["builds"][0]["pins"]] == ["applied", "applied"]


def test_a_graphql_error_falls_back_to_rest_one_request_per_pin(make_repo, tmp_path, github, capsys):
    up, commits = _upstream(make_repo)
    github.add_pr("ggml-org/llama.cpp#1", commits["ggml-org/llama.cpp#1"], state="MERGED")
    github.add_pr("ggml-org/llama.cpp#2", commits["ggml-org/llama.cpp#2"][:1])
    github.script.append({"method": "POST", "status": 200, "body": {"errors": [{"message": "Something went wrong"}]}})
    _, data, out, _ = _sim(tmp_path, _pins(tmp_path, up, commits, skip=True), capsys)
    assert data["prs"]["source"] == "rest"
    assert [(m, p) for m, p, _, _ in github.requests] == [
        ("POST", "/graphql"), ("GET", "/repos/ggml-org/llama.cpp/pulls/1"), ("GET", "/repos/ggml-org/llama.cpp/pulls/2")]
    states = _states(data)
    assert (states["ggml-org#1"]["state"], states["ggml-org#1"]["skipped"], states["ggml-org#1"]["review"]) == \
        ("merged", True, None)
    assert (states["ggml-org#2"]["state"], states["ggml-org#2"]["behind"]) == ("open", 0)


def test_a_server_without_graphql_falls_back_too(make_repo, tmp_path, github, capsys):
    up, commits = _upstream(make_repo)
    github.graphql = False
    github.add_pr("ggml-org/llama.cpp#1", commits["ggml-org/llama.cpp#1"])
    github.add_pr("ggml-org/llama.cpp#2", commits["ggml-org/llama.cpp#2"][:1])
    _, data, out, _ = _sim(tmp_path, _pins(tmp_path, up, commits), capsys)
    state = _states(data)["ggml-org#1"]
    assert (data["prs"]["source"], state["behind"], state["head"]) == ("rest", None, commits["ggml-org/llama.cpp#1"][1])
    assert f"its head moved to {commits['ggml-org/llama.cpp#1'][1][:9]}" in out


def test_an_unknown_pr_is_unknown_and_the_others_known(make_repo, tmp_path, github, capsys):
    up, commits = _upstream(make_repo)
    github.add_pr("ggml-org/llama.cpp#2", commits["ggml-org/llama.cpp#2"][:1])
    _, data, _, _ = _sim(tmp_path, _pins(tmp_path, up, commits), capsys)
    states = _states(data)
    assert states["ggml-org#1"]["state"] == "unknown" and "no such pull request" in states["ggml-org#1"]["why"]
    assert states["ggml-org#2"]["state"] == "open"


def test_no_token_is_unknown_said_once_and_fast(make_repo, tmp_path, capsys):
    up, commits = _upstream(make_repo)
    cfg = _pins(tmp_path, up, commits, skip=True)
    start = time.monotonic()
    states = pr_states(load_pinset(cfg), None, "https://api.github.com")
    assert time.monotonic() - start < 1.0
    assert {s.state for s in states.pins} == {"unknown"} and "no token" in (states.note or "")
    code, data, out, err = _sim(tmp_path, cfg, capsys)
    assert code == 0 and (out + err).count("PR state unknown") == 1 and "PR state unknown: no token" in out
    assert [p["status"] for p in data["builds"][0]["pins"]] == ["applied", "applied"]   # applied as if open
    assert data["prs"]["note"].startswith("PR state unknown: no token")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("api_url", [lambda: f"http://127.0.0.1:{_closed_port()}", lambda: "https://no-such-host.invalid"])
def test_no_network_is_unknown_within_a_second(make_repo, tmp_path, api_url):
    up, commits = _upstream(make_repo)
    start = time.monotonic()
    states = pr_states(load_pinset(_pins(tmp_path, up, commits)), TOKEN, api_url())
    assert time.monotonic() - start < 1.0
    assert {s.state for s in states.pins} == {"unknown"}
    assert "PR state unknown" in (states.note or "") and TOKEN not in (states.note or "")


def test_no_pr_state_asks_nothing(make_repo, tmp_path, github, capsys):
    up, commits = _upstream(make_repo)
    _, data, _, _ = _sim(tmp_path, _pins(tmp_path, up, commits), capsys, "--no-pr-state")
    assert github.requests == [] and "prs" not in data


def test_pick_never_passes_a_build_over_for_a_skipped_pin(make_repo, tmp_path, github, capsys):
    up, commits = _upstream(make_repo)
    up.commit("b2", {"src/a.c": "int a(void) { return 100; }\n"})   # PR 1's line: it conflicts on b2
    up.tag("b2")
    cfg = _pins(tmp_path, up, commits, skip=True)
    cfg.write_text(cfg.read_text().replace("builds: [b1]", "builds: [b1, b2]"))
    github.add_pr("ggml-org/llama.cpp#1", commits["ggml-org/llama.cpp#1"][:1])
    github.add_pr("ggml-org/llama.cpp#2", commits["ggml-org/llama.cpp#2"][:1])
    assert main(["pick", "-c", str(cfg), "--json", str(tmp_path / "p.json")]) == 0
    assert json.loads((tmp_path / "p.json").read_text())["picked"] == "b1"   # open: it counts, b2 is red
    github.prs["ggml-org/llama.cpp#1"]["state"] = "MERGED"
    capsys.readouterr()
    assert main(["pick", "-c", str(cfg), "--json", str(tmp_path / "p.json")]) == 0
    assert json.loads((tmp_path / "p.json").read_text())["picked"] == "b2"
    assert "ggml-org#1: PR merged: skipped (skip-unless-open)" in capsys.readouterr().out
