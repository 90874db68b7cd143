"""`pinset rebase OWNER#N --as-series patches/NAME`: a PR pin becomes a local series pin.

Its commits (fork point..pinned commit) are exported with `git format-patch --base=<fork point>`, one file
per commit; a PR with merge commits in it becomes one patch of its whole diff (format-patch would drop
the merges). Proof before anything is written: the series applied on the fork point gives the pinned
commit's tree. pins.yaml is then edited as text, only that pin's `pr:` and `commit:` entries: `pr:`
becomes `patches:` with a comment naming the PR and commit, `commit:` goes; every other line, comment
and format is the user's own. The new file must read as a pin set before it replaces the old one.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from pinset.config.schema import PinSet, PinSpec, load_pinset
from pinset.errors import PinsetError, RuntimeFailure
from pinset.heal.series import stage_new_folder, staged_file_name
from pinset.redact import redact_url
from pinset.sim.pins import prepare_pins
from pinset.store import Store, atomic_write, cache_tmp, scratch_dir
from pinset.swap import swap_in
from pinset.upstream.mirror import Mirror


def as_series(pinset: PinSet, store: Store, spec: PinSpec, rel: str) -> tuple[int, str]:
    """PR pin `spec` exported into the folder `rel` (relative to pins.yaml) and pins.yaml edited to name it:
    (the number of patches, the fork point they are based on). The verb checks its options first, and has
    recovered what a killed run left staged beside the folder and pins.yaml (`series.recover`)."""
    folder = (pinset.path.parent / rel).resolve()
    used = _used(folder, rel)
    single = type(pinset)(pinset.path, pinset.upstream, pinset.builds, (spec,), text=pinset.text)
    with Mirror(store.mirror) as mirror, scratch_dir(cache_tmp(store.root), "as-series-") as scratch:
        patches, fork, commit = _export(mirror, store, single, spec, scratch)
        if used and not _holds_exactly(folder, patches):
            raise PinsetError(f"--as-series {rel}: exists and is not an empty folder; nothing changed")
        text = edit_pin(pinset.path, pinset.text, spec, rel, fork)
        made = [d for d in (folder.parent, *folder.parent.parents) if not d.exists()]   # removed again on failure
        created = not folder.exists()
        if not used:   # else: a killed run put this very series in place and died before pins.yaml named it
            try:
                staged = stage_new_folder(folder, patches)
            except BaseException:   # Ctrl-C while copying: nothing left beside the user's folders
                _remove_empty(made)
                raise
            swap_in(staged, folder)   # onto an empty folder of the user's, or where there was none
        try:
            trial = staged_file_name(pinset.path)
            trial.write_text(text, encoding="utf-8")
            try:
                load_pinset(trial)
            except PinsetError as exc:   # pinset's own edit does not read: say so of pins.yaml, not the trial file
                raise RuntimeFailure(f"{pinset.path.name}: the edited pin set does not read "
                                     f"({str(exc).replace(str(trial), pinset.path.name)}); nothing changed") from None
            finally:
                trial.unlink(missing_ok=True)
            atomic_write(pinset.path, text.encode("utf-8"))
        except BaseException:
            if not used:
                shutil.rmtree(folder, ignore_errors=True)
                if not created:
                    folder.mkdir()
                _remove_empty(made)
            raise
    return len(patches), fork


def _used(folder: Path, rel: str) -> bool:
    """Whether the series folder already holds something (refused unless it is exactly the series: `_holds_exactly`)."""
    if folder.exists() and not folder.is_dir():
        raise PinsetError(f"--as-series {rel}: exists and is not an empty folder; nothing changed")
    return folder.is_dir() and any(folder.iterdir())


def _holds_exactly(folder: Path, patches: list[Path]) -> bool:
    """`folder` holds these patch files, byte for byte, and nothing else: what a run killed after putting the
    series in place (and before pins.yaml named it) leaves."""
    try:
        found = {p.name: p for p in folder.iterdir()}
        return sorted(found) == sorted(p.name for p in patches) and all(
            found[p.name].is_file() and not found[p.name].is_symlink()
            and found[p.name].read_bytes() == p.read_bytes() for p in patches)
    except OSError:
        return False


def _export(mirror: Mirror, store: Store, single: PinSet, spec: PinSpec, scratch: Path) -> tuple[list[Path], str, str]:
    """The PR's commits as a series in `scratch`, proven to give the pinned commit's tree on the fork point:
    (the patch files, the fork point, the pinned commit)."""
    prep = prepare_pins(single, store, mirror)[spec.id]
    if prep.error:
        raise PinsetError(f"pin {spec.id}: {prep.error}")
    fork, commit = prep.fork_point, spec.commit
    if fork is None or commit is None or spec.pr is None:
        raise PinsetError(f"pin {spec.id}: no fork point or commit known; nothing changed")
    tip = commit
    if mirror.git_ok("rev-list", "--merges", f"{fork}..{commit}").strip():
        message = f"{redact_url(spec.pr.url)} at {commit[:12]} (its diff from the fork point: the PR has merges)\n"
        tip = mirror.git_ok("commit-tree", f"{commit}^{{tree}}", "-p", fork, input=message,
                            env={"GIT_AUTHOR_NAME": "pinset", "GIT_AUTHOR_EMAIL": "pinset@localhost",
                                 "GIT_COMMITTER_NAME": "pinset", "GIT_COMMITTER_EMAIL": "pinset@localhost"}).strip()
    out = scratch / "series"
    out.mkdir()
    mirror.git_ok("-c", "format.signature=pinset", "format-patch", "-q", f"--base={fork}", "-o", str(out),
                  f"{fork}..{tip}")
    patches = sorted(out.glob("*.patch"))
    if not patches:
        raise PinsetError(f"pin {spec.id}: the PR has no commits of its own after its fork point {fork[:12]}")
    index = mirror.new_index(mirror.tree_of(fork))
    for patch in patches:
        mirror.git_ok("apply", "--cached", "--whitespace=nowarn", str(patch), index=index)
    if mirror.write_tree(index) != mirror.tree_of(commit):
        raise RuntimeFailure(f"pin {spec.id}: the exported series does not give the tree of {commit[:12]}; "
                             "nothing changed")
    return patches, fork, commit


def _remove_empty(folders: list[Path]) -> None:
    """The folders this run created above the new series folder, innermost first, if still empty."""
    for d in folders:
        try:
            d.rmdir()
        except OSError:
            return


def edit_pin(path: Path, text: str, spec, rel: str, fork: str) -> str:
    """pins.yaml's text with this pin's `pr:` made `patches: rel` (and a comment) and `commit:` removed."""
    root = yaml.compose(text)
    pins = next(v for k, v in root.value if k.value == "pins")
    node = next(n for n in pins.value if any(k.value == "id" and v.value == spec.id for k, v in n.value))
    keys = {k.value: (k, v) for k, v in node.value}
    (pr_key, pr_val) = keys["pr"]
    # no `commit:` when the PR URL names the commit (.../pull/N/commits/SHA); `repo:` (a fork's PR) only with pr:
    gone = [keys[k] for k in ("commit", "repo") if k in keys]
    source = f" from {redact_url(spec.repo)}" if getattr(spec, "repo", None) else ""   # never a token in a file
    comment = (f"# was {redact_url(spec.pr.url)} at {spec.commit}{source} (pinset rebase --as-series; base: its fork point "
               f"{fork[:12]})")
    edits = []   # (start, end, replacement), applied from the end
    value = rel if yaml.safe_load(rel) == rel and ":" not in rel and "#" not in rel else repr(rel)
    if node.flow_style:
        edits.append((pr_key.start_mark.index, pr_val.end_mark.index, f"patches: {value}"))
        for c_key, c_val in gone:
            start = text.rfind(",", 0, c_key.start_mark.index)
            edits.append((start if start > pr_val.end_mark.index - 1 else c_key.start_mark.index,
                          c_val.end_mark.index, ""))
        line_end = text.find("\n", node.end_mark.index)
        line_end = len(text) if line_end < 0 else line_end
        if "#" not in text[node.end_mark.index:line_end]:
            edits.append((line_end, line_end, f"  {comment}"))
    else:
        pr_line_end = text.find("\n", pr_val.end_mark.index)
        pr_line_end = len(text) if pr_line_end < 0 else pr_line_end
        rest = text[pr_val.end_mark.index:pr_line_end]
        edits.append((pr_key.start_mark.index, pr_line_end, f"patches: {value}   {comment}"
                      + (f"  {rest.strip()}" if rest.strip().startswith("#") else "")))
        for c_key, c_val in gone:
            line_start = text.rfind("\n", 0, c_key.start_mark.index) + 1
            line_end = text.find("\n", c_val.end_mark.index)
            line_end = len(text) if line_end < 0 else line_end
            rest = text[c_val.end_mark.index:line_end].strip()
            if text[line_start:c_key.start_mark.index].strip() == "":
                indent = text[line_start:c_key.start_mark.index]
                edits.append((line_start, line_end + 1, f"{indent}{rest}\n" if rest.startswith("#") else ""))
            else:
                edits.append((c_key.start_mark.index, c_val.end_mark.index, ""))
    for start, end, new in sorted(edits, reverse=True):
        text = text[:start] + new + text[end:]
    return text
