"""Markdown grid of a sim result (builds x pins); pure, also used by `pinset report`."""

from __future__ import annotations

ICON = {"applied": "✅", "upstream": "⏫", "conflict": "❌", "skipped": "⏭️", "error": "⚠️"}


def cell(pin: dict) -> str:
    text = f"{ICON.get(pin['status'], '')} {pin['status']}"
    if pin.get("conflict_with"):
        text += f" with `{pin['conflict_with']}`"
    if pin.get("retire"):
        text += " (retire)"
    if pin["status"] == "applied" and not pin["contract"]["ok"]:
        text += " — contract broken"
    return text


def sim_markdown(sim: dict) -> str:
    builds = sim["builds"]
    if not builds:
        return "_no builds_\n"
    header = "| pin | " + " | ".join(f"{b['build']} (`{b['commit'][:9]}`)" for b in builds) + " |"
    lines = [header, "|---" * (len(builds) + 1) + "|"]
    for i, pin in enumerate(builds[0]["pins"]):
        name = f"`{pin['id']}`" + ("" if pin.get("required", True) else " (optional)")
        lines.append(f"| {name} | " + " | ".join(cell(b["pins"][i]) for b in builds) + " |")
    problems = [f"- **{b['build']}** `{p['id']}`: {prob}" for b in builds for p in b["pins"]
                for prob in p["contract"]["problems"]]
    if problems:
        lines += ["", "Problems:", *problems]
    return "\n".join(lines) + "\n"
