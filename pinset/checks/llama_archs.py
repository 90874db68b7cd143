"""test-llama-archs output -> its rows per (architecture, device, config), and the verdict of an `arch` check.

test-llama-archs (llama.cpp tests/test-llama-archs.cpp, in the trees llama-cpp-python 0.3.36 vendors, 0c1e57098)
builds a synthetic model of each architecture, decodes 128 tokens on each device and compares the logits with
the CPU's (NMSE <= 1e-4), then saves and reloads the model (the roundtrip). It prints a table on stdout:

    |     Model arch.|  Device|Config|   NMSE vs. CPU|Roundtrip|
    |----------------|--------|------|---------------|---------|
    |           llama|     CPU| Dense|     OK (0.00e+00)|          OK|

The config part (`|arch|device|config|`) is printed and flushed before the case runs, the result part
(`%15s %10s|%20s|`: the NMSE status, its value in parentheses, the roundtrip status; ANSI coloured) after, so a
crash leaves a row cut after its config. A status is OK, FAIL, `FAIL (toggle)` or SKIP. Its last line is
"Summary: no tests executed", "Summary: all N test(s) passed" or "Summary: N test(s) executed, M failed".

The guards exist because the program passes falsely: an architecture it does not support prints SKIP rows and
"no tests executed" and exits 0 (Unsloth's feature-checks.json `_doc`: "a probe that exits 0 having run nothing
is a failure"); a name that is no architecture of the tree is taken as a regex and may match nothing (exit 0) or
other architectures. The verdict needs at least one row of exactly the architecture asked for that ran, every
row of it complete and OK, the Summary line, its count agreeing with the rows, and a clean exit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pinset.checks.text import last_lines, strip_ansi

# "|  arch|  device|Dense|" then the result part; the device is the backend device's description
ROW_RE = re.compile(r"^\|(?P<arch>[^|]*)\|(?P<device>[^|]*)\|\s*(?P<config>Dense|MoE)\|(?P<rest>.*)$")
NMSE_STATUSES = ("OK", "FAIL", "FAIL (toggle)", "SKIP")
ROUNDTRIP_STATUSES = ("OK", "FAIL", "SKIP")
HEADER_RE = re.compile(r"^\|\s*Model arch\.\|")
SUMMARY_RE = re.compile(r"^Summary: (?:(?P<none>no tests executed)|all (?P<passed>\d+) test\(s\) passed|"
                        r"(?P<executed>\d+) test\(s\) executed, (?P<failed>\d+) failed)\s*$")


@dataclass
class ArchRow:
    arch: str
    device: str
    config: str               # Dense | MoE
    nmse: str | None = None   # OK | FAIL | FAIL (toggle) | SKIP; None: the row was cut short
    value: str | None = None  # the NMSE printed ("1.23e-07"), when it ran
    roundtrip: str | None = None

    @property
    def complete(self) -> bool:
        return self.nmse is not None

    @property
    def ran(self) -> bool:
        """As the program counts a test: the comparison or the roundtrip ran (test_executed)."""
        return self.complete and (self.nmse != "SKIP" or self.roundtrip != "SKIP")

    @property
    def failed(self) -> bool:
        return bool(self.nmse and self.nmse.startswith("FAIL")) or self.roundtrip == "FAIL"

    def short(self) -> str:
        if not self.complete:
            return f"{self.device} {self.config}: cut short"
        return f"{self.device} {self.config}: NMSE {self.nmse}" + (f" ({self.value})" if self.value else "") + \
            f", roundtrip {self.roundtrip}"


@dataclass
class ArchsOutput:
    header: bool = False
    rows: list[ArchRow] = field(default_factory=list)
    summary: tuple[int, int] | None = None   # (tests executed, failed) from the Summary line
    anomalies: list[str] = field(default_factory=list)


def parse_llama_archs(text: str) -> ArchsOutput:
    out = ArchsOutput()
    for raw in strip_ansi(text).splitlines():
        line = raw.rstrip()
        if HEADER_RE.match(line):
            out.header = True
            continue
        summary = SUMMARY_RE.match(line)
        if summary:
            if out.summary is not None:
                out.anomalies.append("two Summary lines")
            out.summary = (0, 0) if summary["none"] else (int(summary["passed"]), 0) if summary["passed"] else \
                (int(summary["executed"]), int(summary["failed"]))
            continue
        row = ROW_RE.match(line)
        if not row:
            continue
        item = ArchRow(row["arch"].strip(), row["device"].strip(), row["config"])
        result = _result(row["rest"])
        if result:
            item.nmse, item.value, item.roundtrip = result
        elif row["rest"].strip():
            out.anomalies.append(f"unreadable result for {item.arch} {item.device} {item.config}: {row['rest'].strip()!r}")
        out.rows.append(item)
    return out


def _result(rest: str) -> tuple[str, str | None, str] | None:
    """(NMSE status, its value or None, roundtrip status) of a row's result part `  OK (1.2e-07)|   OK|`; None
    when it is not one. Split by hand, not by a regex whose blanks around an optional group backtrack."""
    parts = rest.split("|")
    if len(parts) != 3 or parts[2].strip():
        return None
    nmse, roundtrip = parts[0].strip(), parts[1].strip()
    value = None
    if nmse not in NMSE_STATUSES and nmse.endswith(")") and "(" in nmse:
        cut = nmse.rindex("(")
        nmse, value = nmse[:cut].strip(), nmse[cut + 1:-1].strip()
    if nmse not in NMSE_STATUSES or roundtrip not in ROUNDTRIP_STATUSES or (value is None) != (nmse == "SKIP"):
        return None
    return nmse, value, roundtrip


@dataclass
class ArchVerdict:
    ok: bool
    rows: list[ArchRow]      # the rows of the architecture asked for
    problems: list[str]
    ran: int                 # rows that ran (as the program counts tests)
    passed: int

    @property
    def detail(self) -> str:
        if self.problems:
            return "; ".join(self.problems)
        devices = sorted({r.device for r in self.rows if r.ran})
        return f"{self.passed}/{self.ran} decoded and matched the CPU on {', '.join(devices)}"


def judge_llama_archs(output: ArchsOutput, arch: str, *, returncode: int | None, timed_out: bool = False,
                      signal_name: str | None = None, raw_text: str = "") -> ArchVerdict:
    """Red unless a row of exactly `arch` ran, every row of it is complete and OK, the Summary agrees, exit 0."""
    rows = [r for r in output.rows if r.arch == arch]
    foreign = sorted({r.arch for r in output.rows if r.arch != arch})
    ran = [r for r in rows if r.ran]
    passed = [r for r in ran if not r.failed]
    problems = list(output.anomalies)
    stopped = timed_out or bool(signal_name)
    if timed_out:
        problems.append("timed out")
    elif signal_name:
        problems.append(f"killed by {signal_name}")
    if foreign:
        problems.append(f"rows of other architectures ({', '.join(foreign[:3])}): not the run asked for")
    if not output.header and not stopped:
        problems.append("no table printed (not test-llama-archs' output?)")
    if not rows:
        problems.append(f"no row for architecture {arch!r}: it is not an architecture of this tree's test-llama-archs")
    elif not ran and all(r.complete for r in rows):
        problems.append(f"ran nothing: every {arch} row is SKIP (the harness does not test it)")
    cut = [r for r in rows if not r.complete]
    if cut and not stopped:
        problems.append(f"{cut[0].device} {cut[0].config} row cut short (crashed mid-case)")
    for r in ran:
        if r.failed:
            problems.append(r.short())
    if not stopped:
        if output.summary is None:
            problems.append("no Summary line (cut short)")
        elif output.summary[0] != len([r for r in output.rows if r.ran]) or \
                output.summary[1] != len([r for r in output.rows if r.ran and r.failed]):
            problems.append(f"the Summary ({output.summary[0]} run, {output.summary[1]} failed) disagrees with the "
                            f"rows ({len(ran)} run, {len(ran) - len(passed)} failed)")
    if returncode not in (0, None) and not signal_name and not problems:
        problems.append(f"exit {returncode}")
    if stopped and raw_text:
        problems.append("last output: " + " | ".join(last_lines(raw_text, 4).splitlines()))
    return ArchVerdict(not problems, rows, problems, len(ran), len(passed))


# llama.cpp's logger (common/log.cpp) writes from a thread that is never joined at exit (on purpose:
# ggml-org/llama.cpp#22142), so a run that exits 0 may lose its last lines: the last row's result and the Summary
# (a quarter of the runs of `-a '^llama$' -b CPU` here). Such a run proves nothing and is run again.
LOST_TAIL_ATTEMPTS = 5
LOST_TAIL_WHY = "llama.cpp's logger drops its last lines at exit, ggml-org/llama.cpp#22142"


def lost_tail(output: ArchsOutput, returncode: int | None) -> bool:
    """A clean exit without the Summary line: the logger's lost tail, not a crash (which exits otherwise)."""
    return returncode == 0 and output.summary is None


def arch_filter(arch: str) -> str:
    """test-llama-archs -a: exactly this architecture (a name it does not know is a regex search, which would
    also match every architecture containing it)."""
    return "^" + re.sub(r"([.+])", r"\\\1", arch) + "$"
