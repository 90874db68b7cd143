"""A verify result as a short markdown report (gates, op counts, feature checks, provenance)."""

from __future__ import annotations

from pinset.markdown_table import table
from pinset.verify.model import NOT_RUN, BuildVerification, GateResult, VerifyResult


def _seconds(value: float) -> str:
    return f"{value / 60:.1f} min" if value >= 120 else f"{value:.0f} s"


def verify_markdown(result: VerifyResult | dict) -> str:
    if isinstance(result, dict):   # a verify JSON document (tests, older callers): read through the model
        from pinset.results import Doc

        result = VerifyResult.from_json(Doc(result, "verify", "verify"))
    m = result.machine
    gpu = m.gpu
    lines = [f"# pinset verify: {'ok' if result.ok else 'RED'}: {result.summary()}", ""]
    lines.append(f"- pin set `{result.pinset_digest}`, {'with' if result.cuda else 'without'} `--cuda`")
    where = f"{gpu.name} (driver {gpu.driver}, compute capability {gpu.compute_capability}, " \
            f"{gpu.memory_mib} MiB)" if gpu else "no GPU"
    lines.append(f"- machine `{m.hostname}`: {where}; CUDA {m.cuda_version or '-'}; "
                 f"{m.compiler or 'compiler ?'}; CMake {m.cmake or '?'}; ninja {m.ninja or '?'}; "
                 f"ccache {'yes' if m.ccache else 'no'}")
    for b in result.builds:
        lines += _build_lines(b)
    return "\n".join(lines) + "\n"


def _build_lines(b: BuildVerification) -> list[str]:
    lines = ["", f"## {b.build} ({b.commit[:12]}): {'passed' if b.ok else 'FAILED'}", ""]
    lines += table(["gate", "status", "time", "detail"],
                   [[g.name, g.status, _seconds(g.shown_seconds) if g.status != NOT_RUN else "-", g.detail or ""]
                    for g in b.gates])
    for g in b.gates:
        lines += _gate_lines(g)
    lines += ["", "Pins: " + (", ".join(f"{p.id} {p.status} `{p.ref[:12]}`" for p in b.pins) or "none")]
    if b.cmake_flags:
        lines.append("CMake flags: `" + " ".join(b.cmake_flags) + "`"
                     + (f"; CUDA architectures {b.cuda_architectures}" if b.cuda_architectures else ""))
    if b.not_tested:
        lines += ["", "Not tested:", ""] + [f"- {n.line()}" for n in b.not_tested]
    return lines


def _gate_lines(g: GateResult) -> list[str]:
    """A gate's op counts (test-backend-ops) and feature checks."""
    lines: list[str] = []
    if g.ops:
        lines += ["", f"{g.name} ({g.ops[0].backend}" + (f", {g.device}" if g.device else "") + "):", ""]
        if g.scope:   # which ops the CPU gate ran, and the rule that chose them (plan.cpu_gate_scope)
            lines += [f"Ops chosen by: {g.scope}", ""]
        for op in g.ops:
            text = f"- {op.op} {op.passed}/{op.total}"
            if op.params:
                text += f" (`-p {op.params}`)"
            if op.not_supported:
                text += f", {op.not_supported} not supported"
            if op.failures:
                text += f"; failing: {', '.join(op.failures[:5])}" + (" ..." if len(op.failures) > 5 else "")
            lines.append(text)
    if g.checks:
        lines += ["", f"Feature checks ({g.where}):", ""]
        for c in g.checks:
            lines.append(f"- {c.pin}: {c.check}: **{c.status}**, {c.cases} cases" + (f" ({c.detail})" if c.detail else ""))
    return lines
