"""The forecast as one call: open PRs (API) -> heads, fork points and files (git) -> the PRs that touch a
pin's file merged onto the build -> the whole pin set simulated on BUILD and on each BUILD+PR -> effects.

The filter rule: a PR can change a pin's fate only if it changes (fork point to head) a file some pin of
the set changes. The engine applies each pin to an index that holds just those files, so BUILD and BUILD+PR
differ for it only there; the one reach beyond them, sim's search of the whole tree for a conflicting pin's
lines in moved code, is left to the nightly sim once the PR has landed.

One Simulator (one engine session) serves BUILD and every BUILD+PR: the pins are prepared once, their base
blobs packed once, the line counts of the pins' base files read once; each BUILD+PR costs its merge-tree,
its commit and one pass of the pin set.

That pass leaves out what cannot change (`pin_groups`): pins are grouped by the files they share (a pin
is applied, attributed and checked only on its own files and those of the earlier pins it meets there),
and a group none of whose files the PR changes and whose pins are all fine on BUILD gets BUILD's result
again. A group with a pin that is not fine on BUILD is simulated whole with every PR: sim's search for
its lines in moved code reads the whole tree, which the PR may change anywhere. The effects are those of
the whole pin set (tests/forecast: both ways on every PR of the tests' upstream).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from pinset.config.schema import PinSet
from pinset.errors import PinsetError
from pinset.forecast import heads as git_side
from pinset.forecast.model import BREAKS, NONE, STATES, ForecastPR, ForecastResult, PinEffect, effect, rank_key
from pinset.github.client import Repo
from pinset.github.pulls import OpenPR, PullsAPI
from pinset.sim.engine import Simulator
from pinset.sim.markdown import numbered
from pinset.sim.model import BuildResult
from pinset.sim.pins import prepare_pins
from pinset.store import Store
from pinset.upstream.builds import Build, resolve_build, resolve_builds, upstream_url
from pinset.upstream.mirror import Mirror
from pinset.upstream.select import order_oldest_first


@dataclass
class Forecast:
    result: ForecastResult
    before: BuildResult              # the pin set on BUILD (for the table's header)


def onto_build(pinset: PinSet, onto: str | None, store: Store, mirror: Mirror) -> Build:
    """--onto, else the newest build of pins.yaml (upstream's order: pinset/upstream/select.py)."""
    base = pinset.path.parent
    if onto:
        return resolve_build(onto, pinset.upstream, base, store, mirror)
    if not pinset.builds:
        raise PinsetError(f"{pinset.path}: no builds to forecast onto (add `builds:` or give --onto)")
    return order_oldest_first(resolve_builds(list(pinset.builds), pinset.upstream, base, store, mirror), mirror)[-1]


def forecast(pinset: PinSet, store: Store, onto: str | None, repo: Repo | tuple[str, str], api: PullsAPI,
             say: Callable[[str], None] = lambda _: None, whole: bool = False) -> Forecast:
    """`whole`: every BUILD+PR gets a pass of every pin (the tests compare it with the grouped pass)."""
    if pinset.upstream is None:
        raise PinsetError(f"{pinset.path}: forecast needs an `upstream:` (its refs/pull/*/head are the PR heads)")
    url = upstream_url(pinset.upstream, pinset.path.parent)
    owner, name = repo
    with Mirror(store.mirror) as mirror:
        # the build and the pins first: a bad --onto or pin is bad input before any API request (docs/forecast.md)
        build = onto_build(pinset, onto, store, mirror)
        prepared = prepare_pins(pinset, store, mirror)
        open_prs = api.open_pulls(owner, name)
        say(f"{len(open_prs)} open PRs in {owner}/{name}")
        pulled = git_side.fetch_pull_heads(url, mirror)
        git_side.default_branch(url, mirror)
        pin_paths = set().union(*(p.change.touched or () for p in prepared.values() if p.change is not None))

        heads = {pr.number: pulled.get(pr.number) for pr in open_prs}
        forks = git_side.fork_points(mirror, [h for h in heads.values() if h])
        pairs: dict[int, tuple[str, str]] = {}
        for number, head in heads.items():
            fork = forks.get(head) if head else None
            if head and fork:
                pairs[number] = (fork, head)
        files = git_side.changed_files(mirror, list(pairs.values()))

        sim = Simulator(pinset, mirror, prepared)
        before = sim.simulate_build(build)
        before_by_id = {p.id: p for p in before.pins}
        groups = pin_groups(prepared, [spec.id for spec in pinset.pins])
        always = {pin_id for group in groups if any(not before_by_id[i].ok for i in group) for pin_id in group}
        out: list[ForecastPR] = []
        kept: dict[int, str] = {}
        touching = [pr for pr in open_prs if pr.number in pairs and bearing(files[pairs[pr.number]], pin_paths)[0]]
        say(f"{len(touching)} of them touch a file of the pin set; simulating each onto {build.name}")
        judged = {pr.number for pr in touching}
        for pr in open_prs:
            entry = _entry(pr, heads[pr.number])
            out.append(entry)
            if entry.head is None:
                entry.note = f"no refs/pull/{pr.number}/head upstream (the head is gone)"
                continue
            if pr.number not in pairs:
                entry.note = "shares no history with upstream's default branch"
                continue
            if pr.number not in judged:
                continue
            fork, head = pairs[pr.number]
            touches, reached = bearing(files[fork, head], pin_paths)
            entry.touches = sorted(touches)
            merged = git_side.merge_onto(mirror, build, pr.number, head, fork)
            entry.merges = merged.merges
            if not merged.merges or merged.build is None:
                entry.conflicts = list(merged.conflicts)
                entry.note = f"does not merge onto {build.name} (conflicts in {', '.join(merged.conflicts[:5])})"
                continue
            kept[pr.number] = entry.onto = merged.build.oid
            wanted = always | {pin_id for group in groups if group_files(prepared, group) & reached
                                for pin_id in group}
            after = _simulate(sim, pinset, merged.build, wanted, whole)
            entry.pins = _effects(before_by_id, after)
        git_side.keep_refs(mirror, kept)
    # Reviews only for the PRs that were judged and are not drafts: the API requests grow with those, not
    # with the open PRs (whose list pages are all the rest).
    api.restart_deadline()
    for entry in out:
        if entry.merges and entry.state != "draft":
            entry.state = api.review_state(owner, name, entry.number)
    out.sort(key=rank_key)
    result = ForecastResult(f"{owner}/{name}", build.name, build.commit, out, pinset.digest,
                            [spec.id for spec in pinset.pins], api.requests_made)
    return Forecast(result, before)


def pin_groups(prepared: dict, order: list[str]) -> list[list[str]]:
    """The pins (in pin set order) grouped by shared files: two pins that change a file in common, directly
    or through other pins, are in one group. A pin whose files are unknown is a group of its own."""
    groups: list[tuple[list[str], set[str]]] = []
    for pin_id in order:
        change = prepared[pin_id].change
        files = set(change.touched or ()) if change is not None else set()
        met = [g for g in groups if g[1] & files]
        ids = [i for g in met for i in g[0]] + [pin_id]
        groups = [g for g in groups if g not in met] + [(sorted(ids, key=order.index), files.union(*(g[1] for g in met)))]
    return [ids for ids, _ in groups]


def bearing(changed: set[str], pin_paths: set[str]) -> tuple[set[str], set[str]]:
    """(the files of `changed` (a PR's) that bear on applying a pin, the pins' paths they bear on): a pin's own
    file; a file where a pin's path needs a folder (`src/new` against a pin's `src/new/x.txt`) or one inside a
    pin's path (git refuses both, "appears as both a file and as a directory"); a `.gitattributes` of a folder
    on the way to a pin's path (merge attributes). As the engine reads them (Simulator._neighbours)."""
    mine = changed & pin_paths
    touches, reached = set(mine), set(mine)
    rest = changed - mine
    if not rest:
        return touches, reached
    folders = {p[:i] for p in pin_paths for i in range(len(p)) if p[i] == "/"}
    for path in rest:
        parent = path.rsplit("/", 1)[0] if "/" in path else ""
        if path in folders or (path.rsplit("/", 1)[-1] == ".gitattributes" and (parent in folders or not parent)):
            under = path + "/" if path in folders else (parent + "/" if parent else "")
            touches.add(path)
            reached |= {p for p in pin_paths if p.startswith(under)}
            continue
        owner = next((path[:i] for i in range(len(path)) if path[i] == "/" and path[:i] in pin_paths), None)
        if owner is not None:   # inside a pin's path: the pin makes a file where the PR needs a folder
            touches.add(path)
            reached.add(owner)
    return touches, reached


def group_files(prepared: dict, group: list[str]) -> set[str]:
    return set().union(*(prepared[i].change.touched or () for i in group if prepared[i].change is not None))


def _simulate(sim: Simulator, pinset: PinSet, build: Build, wanted: set[str], whole: bool) -> BuildResult:
    """The engine's pass over the wanted pins only, in pin set order (all of them with `whole`)."""
    if whole:
        return sim.simulate_build(build)
    sim.pinset = replace(pinset, pins=tuple(spec for spec in pinset.pins if spec.id in wanted))
    try:
        return sim.simulate_build(build)
    finally:
        sim.pinset = pinset


def _entry(pr: OpenPR, head: str | None) -> ForecastPR:
    return ForecastPR(pr.number, pr.title, pr.url, head, STATES[3] if pr.draft else STATES[2], pr.updated_at)


def _effects(before: dict, after: BuildResult) -> list[PinEffect]:
    effects = []
    for pin in after.pins:
        was = before[pin.id]
        kind = effect(was, pin)
        if kind == NONE:
            continue
        e = PinEffect(pin.id, kind, pin.required, was.state, pin.state, was.apply_mode, pin.apply_mode)
        if kind == BREAKS:
            e.detail = pin.detail or "; ".join(pin.contract.problems) or None
            e.hunk = list(pin.hunk) if pin.hunk else None
            e.files = list(pin.files) if pin.conflicts else []
            if pin.build_has is not None:
                e.has = [f"{pin.build_has.path}:", *numbered(pin.build_has)]
        effects.append(e)
    return effects
