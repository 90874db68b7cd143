"""The verify JSON as a short markdown report (gates, op counts, feature checks, provenance)."""

from __future__ import annotations

from pinset.markdown_table import table
from pinset.verify.model import NOT_RUN


def _seconds(value: float) -> str:
    return f"{value / 60:.1f} min" if value >= 120 else f"{value:.0f} s"


def verify_markdown(doc: dict) -> str:
    m = doc.get("machine") or {}
    gpu = m.get("gpu")
    lines = [f"# pinset verify: {'ok' if doc['ok'] else 'RED'}: {doc['summary']}", ""]
    lines.append(f"- pin set `{doc['pinset']}`, {'with' if doc.get('cuda') else 'without'} `--cuda`")
    where = f"{gpu['name']} (driver {gpu['driver']}, compute capability {gpu['compute_capability']}, " \
            f"{gpu['memory_mib']} MiB)" if gpu else "no GPU"
    lines.append(f"- machine `{m.get('hostname')}`: {where}; CUDA {m.get('cuda_version') or '-'}; "
                 f"{m.get('compiler') or 'compiler ?'}; CMake {m.get('cmake') or '?'}; ninja {m.get('ninja') or '?'}; "
                 f"ccache {'yes' if m.get('ccache') else 'no'}")
    for b in doc["builds"]:
        lines += ["", f"## {b['build']} ({b['commit'][:12]}): {'passed' if b['ok'] else 'FAILED'}", ""]
        lines += table(["gate", "status", "time", "detail"],
                       [[g["name"], g["status"], _seconds(g["seconds"]) if g["status"] != NOT_RUN else "-",
                         g.get("detail") or ""] for g in b["gates"]])
        for g in b["gates"]:
            if g.get("ops"):
                lines += ["", f"{g['name']} ({g['ops'][0]['backend']}"
                          + (f", {g['device']}" if g.get("device") else "") + "):", ""]
                if g.get("scope"):   # which ops the CPU gate ran, and the rule that chose them (plan.cpu_gate_scope)
                    lines += [f"Ops chosen by: {g['scope']}", ""]
                for op in g["ops"]:
                    text = f"- {op['op']} {op['passed']}/{op['total']}"
                    if op.get("params"):
                        text += f" (`-p {op['params']}`)"
                    if op["not_supported"]:
                        text += f", {op['not_supported']} not supported"
                    if op["failures"]:
                        text += f"; failing: {', '.join(op['failures'][:5])}" + (" ..." if len(op["failures"]) > 5 else "")
                    lines.append(text)
            if g.get("checks"):
                lines += ["", f"Feature checks ({g.get('where', '?')}):", ""]
                for c in g["checks"]:
                    lines.append(f"- {c['pin']}: {c['check']}: **{c['status']}**, {c['cases']} cases"
                                 + (f" ({c['detail']})" if c.get("detail") else ""))
        lines += ["", "Pins: " + (", ".join(f"{p['id']} {p['status']} `{p['ref'][:12]}`" for p in b["pins"]) or "none")]
        if b.get("cmake_flags"):
            lines.append("CMake flags: `" + " ".join(b["cmake_flags"]) + "`"
                         + (f"; CUDA architectures {b['cuda_architectures']}" if b.get("cuda_architectures") else ""))
        if b.get("not_tested"):
            lines += ["", "Not tested:", ""] + [f"- {n['what']}: {n['why']}" for n in b["not_tested"]]
    return "\n".join(lines) + "\n"
