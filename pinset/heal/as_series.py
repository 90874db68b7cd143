"""`pinset rebase OWNER#N --as-series patches/NAME`: a PR pin becomes a local series pin.

Its commits (fork point..pinned commit) are exported with `git format-patch --base=<fork point>`, one file
per commit; a PR with merge commits in it becomes one patch of its whole diff (format-patch would drop
the merges). Proof before anything is written: the series applied on the fork point gives the pinned
commit's tree. pins.yaml is then edited as text, only that pin's `pr:` and `commit:` entries: `pr:`
becomes `patches:` with a comment naming the PR and commit, `commit:` goes; every other line, comment
and format is the user's own. The new file must read as a pin set before it replaces the old one.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import yaml

from pinset.config.schema import PinSet, PinSpec, load_pinset
from pinset.errors import PinsetError, RuntimeFailure
from pinset.sim.pins import prepare_pins
from pinset.store import Store, atomic_write, cache_tmp, scratch_dir
from pinset.upstream.mirror import Mirror


def as_series(pinset: PinSet, store: Store, spec: PinSpec, rel: str) -> tuple[int, str]:
    """PR pin `spec` exported into the folder `rel` (relative to pins.yaml) and pins.yaml edited to name it:
    (the number of patches, the fork point they are based on). The verb checks its options first."""
    folder = (pinset.path.parent / rel).resolve()
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise PinsetError(f"--as-series {rel}: exists and is not an empty folder; nothing changed")
    single = type(pinset)(pinset.path, pinset.upstream, pinset.builds, (spec,), text=pinset.text)
    with Mirror(store.mirror) as mirror, scratch_dir(cache_tmp(store.root), "as-series-") as scratch:
        prep = prepare_pins(single, store, mirror)[spec.id]
        if prep.error:
            raise PinsetError(f"pin {spec.id}: {prep.error}")
        fork, commit = prep.fork_point, spec.commit
        if fork is None or commit is None or spec.pr is None:
            raise PinsetError(f"pin {spec.id}: no fork point or commit known; nothing changed")
        tip = commit
        if mirror.git_ok("rev-list", "--merges", f"{fork}..{commit}").strip():
            message = f"{spec.pr.url} at {commit[:12]} (its diff from the fork point: the PR has merges)\n"
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
        text = edit_pin(pinset.path, pinset.text, spec, rel, fork)
        staged = folder.parent / f".{folder.name}.pinset-new"
        shutil.rmtree(staged, ignore_errors=True)
        made = [d for d in (folder.parent, *folder.parent.parents) if not d.exists()]   # removed again on failure
        try:
            staged.mkdir(parents=True)
            for patch in patches:
                shutil.copyfile(patch, staged / patch.name)
        except BaseException:   # Ctrl-C while copying: nothing left beside the user's folders
            shutil.rmtree(staged, ignore_errors=True)
            _remove_empty(made)
            raise
        created = not folder.exists()
        if not created:
            folder.rmdir()
        os.rename(staged, folder)
        try:
            trial = pinset.path.parent / f".{pinset.path.name}.pinset-new"
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
            shutil.rmtree(folder, ignore_errors=True)
            if not created:
                folder.mkdir()
            _remove_empty(made)
            raise
    return len(patches), fork


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
    source = f" from {spec.repo}" if getattr(spec, "repo", None) else ""
    comment = (f"# was {spec.pr.url} at {spec.commit}{source} (pinset rebase --as-series; base: its fork point "
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
