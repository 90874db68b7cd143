"""Under GitHub Actions (`GITHUB_ACTIONS=true`): `::error`/`::warning` annotations that point at pins.yaml lines
and patch files, and the job summary (markdown appended to `$GITHUB_STEP_SUMMARY`).

Outside Actions every function here does nothing: a terminal or another CI gets pinset's own lines only.
Annotations go to stderr (the runner reads workflow commands on both streams), so stdout keeps only results.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from pinset.sim import model as sim

ERROR, WARNING, NOTICE = "error", "warning", "notice"
MAX_ANNOTATIONS = 50   # GitHub shows 10 per step and 50 per job; more are dropped by GitHub, not by pinset


def under_actions(environ=None) -> bool:
    return (os.environ if environ is None else environ).get("GITHUB_ACTIONS") == "true"


def _data(text: str) -> str:
    """A workflow command's message: %, CR and LF escaped (GitHub's own toolkit rules)."""
    return str(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _prop(text: str) -> str:
    """A property value (file=, title=): also `:` and `,`, which end a property."""
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def workspace_path(path: str | Path) -> str:
    """`path` relative to the checkout (GITHUB_WORKSPACE, else the current folder) as GitHub wants it; a path
    outside it is given as it is."""
    root = os.environ.get("GITHUB_WORKSPACE") or os.getcwd()
    absolute = os.path.abspath(path)
    try:
        rel = os.path.relpath(absolute, os.path.abspath(root))
    except ValueError:
        return absolute
    return absolute if rel.startswith("..") else rel


def command(level: str, message: str, *, file: str | Path | None = None, line: int | None = None,
            title: str | None = None) -> str:
    """The workflow command line: `::error file=pins.yaml,line=12,title=...::message` (redacted before `:` is
    escaped, which would hide a URL's credentials from the redaction of stderr)."""
    from pinset.redact import redact

    message, title = redact(str(message)), redact(title) if title else title
    file = redact(str(file)) if file is not None else None
    props = []
    if file is not None:
        props.append(f"file={_prop(workspace_path(file))}")
        if line:
            props.append(f"line={int(line)}")
    if title:
        props.append(f"title={_prop(title)}")
    return f"::{level}{' ' + ','.join(props) if props else ''}::{_data(message)}"


def annotate(level: str, message: str, *, file=None, line=None, title=None, stream=None) -> bool:
    """Print one annotation under Actions; False (nothing printed) elsewhere."""
    if not under_actions():
        return False
    print(command(level, message, file=file, line=line, title=title), file=stream or sys.stderr, flush=True)
    return True


def annotate_error(exc: Exception | str, command_name: str) -> None:
    """The one-line error of a failed command as an annotation: a pins.yaml problem at its line."""
    path, line = getattr(exc, "path", None), getattr(exc, "line", None)
    file = path if path and Path(path).is_file() else None
    annotate(ERROR, f"{command_name}: {exc}", file=file, line=line if file else None, title=command_name)


def step_summary(markdown: str) -> bool:
    """Append `markdown` to the job summary under Actions; False when there is none (not Actions, or
    GITHUB_STEP_SUMMARY unset). A summary that cannot be written is a warning, never the command's failure."""
    from pinset.redact import redact

    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if not under_actions() or not path:
        return False
    try:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(redact(markdown).rstrip("\n") + "\n\n")   # a file GitHub shows: no token in it
    except OSError as exc:
        annotate(WARNING, f"job summary {path}: {(exc.strerror or str(exc)).lower()}")
        return False
    return True


# --- what sim / pick / verify say -------------------------------------------------------------
def patch_line(spec, files: list[str], pin=None) -> tuple[Path | None, int | None]:
    """The patch file of a patch pin and its line for a conflict: the patch that conflicted (sim's detail
    begins with its file name) at the failing hunk's `@@` line (sim's `hunk`), else that patch's `diff --git` of
    one of `files`; with no patch named, the first `diff --git` of one of `files` in the series (the first patch
    and line 1 when none names them); (None, None) for PR pins. `pin`: the PinResult, when there is one."""
    series = list(getattr(spec, "series", ()) or ())
    if not series:
        return None, None
    detail = getattr(pin, "detail", None) or ""
    named = next((patch for patch in series if detail.startswith(f"{patch.name}: ")), None)
    wanted = [f"diff --git a/{f} " for f in files]
    hunk = (getattr(pin, "hunk", None) or [None])[0]
    for patch in [named] if named is not None else series:
        try:
            lines = patch.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        at = next((i for i, text in enumerate(lines, 1) if any(text.startswith(w) for w in wanted)), None)
        if at is not None and hunk and hunk.startswith("@@"):
            header = hunk.split(" @@")[0] + " @@"
            at = next((i for i, text in enumerate(lines[at:], at + 1) if text.startswith(header)), at)
        if at is not None:
            return patch, at
        if named is not None:
            return named, 1
    return series[0], 1


def sim_annotations(pinset, sim_result, rebase=True) -> int:
    """One annotation per pin that does not apply or breaks its contract on a build: an error for a required
    pin, a warning for an optional one, at the pin's line in pins.yaml, and for a patch pin also at the patch
    (the `diff --git` line of the file that conflicts). Returns how many were printed."""
    if not under_actions():
        return 0
    specs = {p.id: p for p in pinset.pins}
    printed = 0
    for b in sim_result.builds:
        for p in b.pins:
            if p.ok or printed >= MAX_ANNOTATIONS:
                continue
            spec = specs.get(p.id)
            level = ERROR if p.required else WARNING
            what = {sim.CONFLICT: f"conflicts with {p.conflict_with or 'upstream'}"
                                + (f" in {', '.join(p.files)}" if p.files else ""),
                    sim.ERROR: f"could not be applied: {p.detail or 'error'}",
                    sim.SKIPPED: f"changes nothing: {p.detail or 'skipped'}"}.get(
                p.status, f"contract broken: {(p.contract.problems or ['contract broken'])[0]}")
            fix = f" (start fixing: pinset rebase {p.id} --onto {b.build})" if rebase and p.conflicts else ""
            message = f"pin {p.id} {what} on {b.build}{fix}"
            title = f"pinset: {p.id} on {b.build}"
            annotate(level, message, file=pinset.path, line=spec.line if spec else None, title=title)
            printed += 1
            if spec is not None and p.conflicts:
                patch, line = patch_line(spec, list(p.files), p)
                if patch is not None:
                    annotate(level, message, file=patch, line=line, title=title)
                    printed += 1
    return printed


def verify_annotations(pinset, result) -> int:
    """A red gate per build as an error (on pins.yaml: the pin set is what failed; a feature check at its own
    line). result: the VerifyResult. Returns how many were printed."""
    if not under_actions():
        return 0
    # here: sim and every other verb import this module, verify's model is 20 ms
    from pinset.verify.model import FAILED, PIN_SET

    checks = {(p.id, c.describe()): c.line for p in pinset.pins for c in p.checks}
    checks.update({(PIN_SET, c.describe()): c.line for c in getattr(pinset, "checks", ())})
    printed = 0
    for b in result.builds:
        for g in b.gates:
            if g.status != FAILED or printed >= MAX_ANNOTATIONS:
                continue
            failed = [c for c in g.checks or [] if c.status == FAILED]
            for c in failed:
                annotate(ERROR, f"feature check {c.check} of " + ("the pin set" if c.pin == PIN_SET else f"pin {c.pin}")
                         + f" failed on {b.build}"
                         + (f": {c.detail}" if c.detail else ""),
                         file=pinset.path, line=checks.get((c.pin, c.check)), title=f"pinset verify: {b.build}")
                printed += 1
            if not failed:
                annotate(ERROR, f"gate {g.name} failed on {b.build}" + (f": {g.detail}" if g.detail else ""),
                         file=pinset.path, title=f"pinset verify: {b.build}")
                printed += 1
    return printed
