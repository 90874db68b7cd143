"""`pinset forecast` offline: a local upstream with refs/pull/N/head, the fake GitHub for the API, and every
effect checked against plain git (`git am -3` of each pin on the build and on the build merged with the PR)."""

from __future__ import annotations

import subprocess

import pytest

import pinset.github.client as report_github
from pinset.cli import main
from tests.testing import GIT_ENV, first_build, run_doc, series, write_pins
from tests.testing.fake_github import TOKEN, FakeGitHub, serving

A_C = "".join(f"int a_{i}(void) {{ return {i}; }}\n" for i in range(1, 101))
B_C = "".join(f"int b_{i}(void) {{ return {i}; }}\n" for i in range(1, 101))


def line(text: str, n: int, new: str) -> str:
    lines = text.splitlines(keepends=True)
    lines[n - 1] = new + "\n"
    return "".join(lines)


PIN_A = line(line(A_C, 10, "int a_10(void) { return 10 * PIN_A; }"), 30, "int a_30(void) { return 30 * PIN_A; }")
PIN_B = line(A_C, 30, "int a_30(void) { return 30 * PIN_B; }")
PIN_C = line(B_C, 5, "int b_5(void) { return 5 * PIN_C; }")
B2_B_C = line(B_C, 50, "int b_50(void) { return 50 * UPSTREAM; }")


@pytest.fixture
def world(make_repo, tmp_path):
    """b1, b2 (b1 + an upstream change of b.c line 50); pins a, b (b collides with a), c; PRs from b1."""
    up, b1 = first_build(make_repo, {"src/a.c": A_C, "src/b.c": B_C, "README": "upstream\n"})
    pins = tmp_path / "patches"
    series(up, b1, [("pin a", {"src/a.c": PIN_A})], pins / "pin-a")
    series(up, b1, [("pin b", {"src/a.c": PIN_B})], pins / "pin-b")
    series(up, b1, [("pin c", {"src/b.c": PIN_C})], pins / "pin-c")
    up.commit("upstream b.c", {"src/b.c": B2_B_C})
    up.tag("b2")
    prs = {
        1: {"src/a.c": line(A_C, 10, "int a_10(void) { return 1000; }")},         # breaks a, so b applies
        2: {"src/b.c": "int b_0(void) { return 0; }\n" * 3 + B_C},                # moves c (offset)
        3: {"src/a.c": line(A_C, 90, "int a_90(void) { return 9000; }")},         # far from every hunk
        4: {"src/b.c": line(PIN_C, 70, "int b_70(void) { return 7000; }")},       # squashes c's change
        5: {"src/a.c": line(A_C, 95, "int a_95(void) { return 9500; }")},         # a draft
        7: {"src/b.c": line(B_C, 50, "int b_50(void) { return 50 * OTHER; }")},   # does not merge onto b2
        8: {"README": "upstream\nmore\n"},                                        # touches no pin file
    }
    for number, files in prs.items():
        up.git("checkout", "-q", "-b", f"pr{number}", b1)
        up.commit(f"PR {number}", files)
        up.git("update-ref", f"refs/pull/{number}/head", "HEAD")
        up.git("checkout", "-q", "master")
    cfg = write_pins(tmp_path / "pins.yaml", f"""\
        upstream: {up.path}
        builds: [b1, b2]
        pins:
          - id: a
            patches: {pins / 'pin-a'}
          - id: b
            patches: {pins / 'pin-b'}
          - id: c
            patches: {pins / 'pin-c'}
        """)
    return up, pins, cfg


def pull(number: int, updated: str, draft: bool = False) -> dict:
    return {"number": number, "title": f"PR {number}", "html_url": f"https://github.test/o/r/pull/{number}",
            "draft": draft, "updated_at": updated, "head": {"sha": "0" * 40}, "user": {"login": "dev"}}


@pytest.fixture
def fake(monkeypatch):
    fake = FakeGitHub()
    fake.pulls = [pull(1, "2026-01-05T00:00:00Z"), pull(2, "2026-01-04T00:00:00Z"), pull(3, "2026-01-01T00:00:00Z"),
                  pull(4, "2026-01-02T00:00:00Z"), pull(5, "2026-01-06T00:00:00Z", draft=True),
                  pull(6, "2026-01-03T00:00:00Z"), pull(7, "2026-01-03T00:00:00Z"), pull(8, "2026-01-03T00:00:00Z")]
    fake.reviews = {3: [{"user": {"login": "m"}, "state": "CHANGES_REQUESTED"}, {"user": {"login": "m"}, "state": "APPROVED"}],
                    4: [{"user": {"login": "m"}, "state": "COMMENTED"}],
                    5: [{"user": {"login": "m"}, "state": "APPROVED"}]}
    fake.max_per_page = 3
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    waits: list[float] = []
    monkeypatch.setattr(report_github, "_default_sleep", waits.append)
    fake.waits = waits
    with serving(fake):
        yield fake


def run_forecast(tmp_path, cfg, fake, *extra):
    out, md = tmp_path / "forecast.json", tmp_path / "forecast.md"
    code = main(["forecast", "-c", str(cfg), "--repo", "o/r", "--api-url", fake.url, "--json", str(out),
                 "--markdown", str(md), *extra])
    return code, (run_doc(out.read_text()) if out.exists() else None), (md.read_text() if md.exists() else "")


def effects(pr: dict) -> dict[str, str]:
    return {p["id"]: p["effect"] for p in pr["pins"]}


# --- plain git: what a person would run -------------------------------------------------------------------
def git(cwd, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=cwd, env={**GIT_ENV, "PATH": "/usr/bin:/bin", "HOME": str(cwd)},
                          capture_output=True, text=True, check=check)


def plain_git(up, tmp_path, rev: str, pins, pr: int | None = None, folders: dict | None = None) -> dict[str, str]:
    """Each pin's fate by `git am -3` on a checkout of `rev` (merged with PR `pr`): applied, offset (applies,
    but `git apply` needs an offset), noop (already there), conflict. `folders`: pin id -> its patch folder
    (default: pins a, b, c of the world)."""
    where = tmp_path / f"plain-{rev}-{pr}"
    git(up.path, "worktree", "add", "-q", "--detach", str(where), rev)
    if pr is not None:
        git(where, "merge", "-q", "--no-edit", f"refs/pull/{pr}/head")
    states = {}
    for pin, folder in (folders or {p: pins / f"pin-{p}" for p in ("a", "b", "c")}).items():
        patches = sorted(str(p) for p in folder.glob("*.patch"))
        before = git(where, "rev-parse", "HEAD^{tree}").stdout
        check = git(where, "apply", "--check", "-v", *patches, check=False)
        am = git(where, "am", "-q", "-3", *patches, check=False)
        if am.returncode:
            git(where, "am", "--abort", check=False)
            states[pin] = "noop" if "already applied" in am.stdout + am.stderr else "conflict"
        elif git(where, "rev-parse", "HEAD^{tree}").stdout == before:
            states[pin] = "noop"
        else:
            states[pin] = "offset" if "offset" in check.stderr else "applied"
    return states


def plain_effect(before: str, after: str) -> str:
    """The effect rule on plain git's states."""
    if after == "noop" and before != "noop":
        return "carries"
    ok = {"applied", "offset", "noop"}
    if before in ok and after not in ok:
        return "breaks"
    if before not in ok and after in ok:
        return "fixes"
    if before == "applied" and after == "offset":
        return "moves"
    return "none"


def test_every_effect_matches_plain_git(world, tmp_path, fake):
    up, pins, cfg = world
    code, data, md = run_forecast(tmp_path, cfg, fake)
    assert code == 1 and data["ok"] is False  # #1 breaks the required pin a
    assert data["kind"] == "forecast" and data["schema"] == 1 and data["onto"]["build"] == "b2"
    prs = {pr["number"]: pr for pr in data["prs"]}
    assert effects(prs[1]) == {"a": "breaks", "b": "fixes"}      # order interplay: a breaks, so b applies
    assert effects(prs[2]) == {"c": "moves"}
    assert effects(prs[3]) == {} and prs[3]["merges"] is True and prs[3]["touches"] == ["src/a.c"]
    assert effects(prs[4]) == {"c": "carries"}
    assert prs[5]["state"] == "draft" and effects(prs[5]) == {}
    assert prs[6]["head"] is None and prs[6]["merges"] is None and "gone" in prs[6]["note"]
    assert prs[7]["merges"] is False and prs[7]["pins"] == [] and prs[7]["conflicts"] == ["src/b.c"]
    assert prs[8]["touches"] == [] and prs[8]["merges"] is None
    base = plain_git(up, tmp_path, "b2", pins)
    assert base == {"a": "applied", "b": "conflict", "c": "applied"}
    for number in (1, 2, 3, 4, 5):
        after = plain_git(up, tmp_path, "b2", pins, number)
        plain = {pin: plain_effect(base[pin], after[pin]) for pin in base}
        assert {pin: e for pin, e in plain.items() if e != "none"} == effects(prs[number]), number
    # breaks: the hunk and the command that prepares the fix
    a = prs[1]["pins"][0]
    assert a["before"] == "applied" and a["after"] == "conflict" and a["files"] == ["src/a.c"]
    assert any("PIN_A" in h for h in a["hunk"])
    assert f"pinset rebase a --onto {prs[1]['onto']}" in md and "```diff" in md and "PIN_A" in md
    assert "<!-- pinset-forecast o/r -->" in md
    # the rebase line's commit is in the cache's mirror, kept by a ref
    mirror = tmp_path / "cache" / "mirror.git"
    refs = git(tmp_path, "--git-dir", str(mirror), "for-each-ref", "refs/pinset/forecast/").stdout
    assert prs[1]["onto"] in refs
    # and the line works: rebase starts a worktree at BUILD+PR with pin a's conflict to resolve
    wt = tmp_path / "rebase-a"
    code = main(["rebase", "a", "--onto", prs[1]["onto"], "-c", str(cfg), "--worktree", str(wt)])
    assert code in (0, 1) and wt.is_dir()
    assert "return 1000;" in (wt / "src" / "a.c").read_text()   # the PR's line is there


def test_ranking_and_api_requests(world, tmp_path, fake):
    _, _, cfg = world
    _, data, _ = run_forecast(tmp_path, cfg, fake)
    order = [pr["number"] for pr in data["prs"]]
    states = {pr["number"]: pr["state"] for pr in data["prs"]}
    assert states[3] == "approved" and states[4] == "reviewed" and states[1] == states[2] == "open"
    # approved > reviewed > open (recent first: #1 of 01-05, #2 of 01-04, then 01-03: #8, #7, #6) > draft
    assert order == [3, 4, 1, 2, 8, 7, 6, 5]
    # list pages (8 PRs, 3 a page: every Link followed) and one reviews request per judged, non-draft PR
    pages = [r for r in fake.requests if r[1].startswith("/repos/o/r/pulls?") or r[1].startswith("/repos/o/r/pulls")
             and "reviews" not in r[1]]
    reviews = sorted(r[1].split("/")[5] for r in fake.requests if "reviews" in r[1])
    assert len(pages) == 3 and reviews == ["1", "2", "3", "4"]
    assert data["api_requests"] == len(fake.requests) == 7


def test_rate_limit_and_server_errors_are_waited_out(world, tmp_path, fake):
    _, _, cfg = world
    fake.script = [{"method": "GET", "status": 403, "body": {"message": "API rate limit exceeded"},
                    "headers": {"Retry-After": "7"}},
                   {"method": "GET", "status": 502, "body": {"message": "Bad gateway"}}]
    code, data, _ = run_forecast(tmp_path, cfg, fake)
    assert code == 1 and len(data["prs"]) == 8
    assert 7.0 in fake.waits  # the Retry-After of the 403, waited through report --post's client


def test_a_server_that_keeps_failing_is_exit_1_naming_it(world, tmp_path, fake, capsys):
    _, _, cfg = world
    fake.fail = (503, {"message": "down"}, {})
    code, data, _ = run_forecast(tmp_path, cfg, fake)
    assert code == 1 and data is None
    err = capsys.readouterr().err
    assert "HTTP 503" in err and TOKEN not in err


def test_no_token_reads_a_public_repository(world, tmp_path, fake, monkeypatch):
    _, _, cfg = world
    monkeypatch.delenv("GITHUB_TOKEN")
    fake.public = True
    code, data, _ = run_forecast(tmp_path, cfg, fake)
    assert code == 1 and all("Authorization" not in r[2] for r in fake.requests)


def test_sdist_like_onto_without_shared_history(world, tmp_path, fake):
    """--onto a build whose commit shares no history with the PRs (as an sdist's imported tree): the PR is
    merged as a child of its fork point, and judged the same as on b2's commit."""
    up, pins, cfg = world
    up.git("checkout", "-q", "--orphan", "flat", "b2")
    up.git("commit", "-q", "-m", "flat copy of b2")
    up.tag("flat")
    up.git("checkout", "-q", "master")
    code, data, _ = run_forecast(tmp_path, cfg, fake, "--onto", "flat")
    assert code == 1
    prs = {pr["number"]: pr for pr in data["prs"]}
    assert effects(prs[1]) == {"a": "breaks", "b": "fixes"} and effects(prs[4]) == {"c": "carries"}


def test_bad_input_is_exit_2(world, tmp_path, fake, capsys):
    _, _, cfg = world
    assert main(["forecast", "-c", str(cfg), "--repo", "not a repo", "--api-url", fake.url]) == 2
    assert "--repo" in capsys.readouterr().err
    assert main(["forecast", "-c", str(cfg), "--api-url", fake.url]) == 2   # a local upstream needs --repo
    assert "--repo" in capsys.readouterr().err
    assert main(["forecast", "-c", str(cfg), "--repo", "o/r", "--api-url", "ftp://x"]) == 2
    assert fake.requests == []


def test_sdist_build_as_onto(world, tmp_path, fake, monkeypatch):
    """--onto pypi:llama-cpp-python==V: the sdist's vendored tree (b2's files) has no git history; each PR is
    merged onto it as a child of the PR's fork point, and the effects are those on b2."""
    from tests.testing.fake_pypi import FakeIndex, make_sdist, serve

    up, pins, cfg = world
    index = FakeIndex()
    index.add("llama-cpp-python", "9.9.9", make_sdist("9.9.9", {"src/a.c": A_C, "src/b.c": B2_B_C,
                                                                "README": "upstream\n"}, commit=up.head()[:9]))
    server = serve(index)
    monkeypatch.setenv("PINSET_PYPI_URL", index.url)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    try:
        code, data, _ = run_forecast(tmp_path, cfg, fake, "--onto", "pypi:llama-cpp-python==9.9.9")
    finally:
        server.shutdown()
    assert code == 1 and data["onto"]["build"] == "pypi:llama-cpp-python==9.9.9"
    prs = {pr["number"]: pr for pr in data["prs"]}
    assert effects(prs[1]) == {"a": "breaks", "b": "fixes"} and effects(prs[2]) == {"c": "moves"}
    assert effects(prs[4]) == {"c": "carries"} and prs[7]["merges"] is False


def test_the_grouped_pass_gives_the_whole_pin_sets_effects(world, tmp_path, fake):
    """forecast simulates on BUILD+PR only the pin groups the PR can reach (run.pin_groups); every PR's effects
    are those of a pass of every pin. Pin d (its own file, conflicting on BUILD) is simulated with every PR."""
    from pinset.config.schema import load_pinset
    from pinset.forecast.run import forecast, pin_groups
    from pinset.github.pulls import PullsAPI
    from pinset.sim.pins import prepare_pins
    from pinset.store import Store
    from pinset.upstream.mirror import Mirror

    up, pins, cfg = world
    series(up, "b1", [("pin d", {"README": "upstream\nPIN_D\n"})], pins / "pin-d")
    up.commit("upstream readme", {"README": "UPSTREAM\n"})   # after b2: d conflicts with master's README
    up.tag("b3")
    cfg.write_text(cfg.read_text() + f"  - id: d\n    patches: {pins / 'pin-d'}\n")
    pinset = load_pinset(str(cfg))
    store = Store.open(tmp_path / "cache")
    with Mirror(store.mirror) as mirror:
        groups = pin_groups(prepare_pins(pinset, store, mirror), ["a", "b", "c", "d"])
    assert groups == [["a", "b"], ["c"], ["d"]]
    results = [forecast(pinset, store, "b3", ("o", "r"), PullsAPI(TOKEN, fake.url), whole=whole).result
               for whole in (False, True)]
    grouped, whole = ({pr.number: [p.to_json() for p in pr.pins] for pr in r.prs} for r in results)
    assert grouped == whole
    assert {p["id"]: p["effect"] for p in grouped[1]} == {"a": "breaks", "b": "fixes"}
    # #8 changes README (d's file, where b3 has UPSTREAM): it does not merge onto b3, and is not judged
    assert next(pr for pr in results[0].prs if pr.number == 8).merges is False


@pytest.mark.slow
def test_real_llama_cpp_snapshots_against_plain_git(tmp_path, snapshot_seed, monkeypatch):
    """Real code: an upstream at llama.cpp of llama-cpp-python 0.3.35 with one open PR that brings 0.3.36's
    tree; pins: the repo's cuda-mmq-iq1m series (made for 0.3.36's MMQ code) and backports of 0.3.36's own
    changes. Every effect forecast names is the one `git am -3` shows on the build and on build+PR."""
    from pinset.upstream.mirror import Mirror
    from tests.testing import ROOT, GitRepo
    from tests.testing.snapshots import copy_store, make_backport_pins

    seed, builds = snapshot_seed
    store = copy_store(seed, tmp_path / "cache")
    monkeypatch.setenv("PINSET_CACHE", str(store.root))
    old, new = builds["0.3.35"], builds["0.3.36"]
    backports = make_backport_pins(store, old, new, tmp_path / "pins", count=3)
    for patch in (p for folder in backports for p in folder.glob("*.patch")):   # `git am` wants an address
        patch.write_text(patch.read_text().replace("From: pinset tests\n", "From: pinset tests <t@example.com>\n", 1))
    up = GitRepo(tmp_path / "upstream")
    mirror = Mirror(store.mirror)
    try:
        pr_commit = mirror.git_ok("commit-tree", new.tree, "-p", old.oid, "-m", "bring 0.3.36", env=dict(GIT_ENV)).strip()
        for ref, oid in (("refs/heads/base", old.oid), ("refs/pull/1/head", pr_commit)):
            mirror.git_ok("push", "-q", str(up.path), f"{oid}:{ref}")
    finally:
        mirror.close()
    up.git("checkout", "-q", "base")
    up.tag("b35")
    folders = {"cuda-mmq-iq1m": ROOT / "patches" / "cuda-mmq-iq1m", **{p.name: p for p in backports}}
    cfg = write_pins(tmp_path / "pins.yaml", f"upstream: {up.path}\nbuilds: [b35]\npins:\n"
                     + "".join(f"  - id: {pin}\n    patches: {folder}\n" for pin, folder in folders.items()))
    fake = FakeGitHub()
    fake.public = True
    fake.pulls = [pull(1, "2026-01-01T00:00:00Z")]
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    with serving(fake):
        code, data, _ = run_forecast(tmp_path, cfg, fake)
    assert data is not None and data["prs"][0]["merges"] is True, data
    found = effects(data["prs"][0])
    base = plain_git(up, tmp_path, "b35", None, folders=folders)
    after = plain_git(up, tmp_path, "b35", None, pr=1, folders=folders)
    plain = {pin: plain_effect(base[pin], after[pin]) for pin in folders}
    assert found == {pin: e for pin, e in plain.items() if e != "none"}
    assert all(found[p.name] == "carries" for p in backports)   # 0.3.36 has the backports' changes
    assert all(base[p.name] == "applied" for p in backports)     # and 0.3.35 takes them
    assert found["cuda-mmq-iq1m"] == "fixes"                     # the series is made for 0.3.36's MMQ code
