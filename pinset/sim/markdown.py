"""Markdown grid of a sim result (builds x pins); pure, also used by `pinset report`."""

from __future__ import annotations

from pinset.markdown_table import table

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


def sim_markdown(sim: dict, conflicts: bool = False) -> str:
    """The grid and the contract problems; with `conflicts`, why each conflict happened (the
    report lists causes itself, so it leaves them out)."""
    builds = sim["builds"]
    if not builds:
        return "_no builds_\n"
    # by pin id, every pin any build has (a result without a pin shows "no result", never a shifted column)
    first: dict[str, dict] = {}
    for b in builds:
        for p in b["pins"]:
            first.setdefault(p["id"], p)
    pins = list(first.values())
    by_build = [{p["id"]: p for p in b["pins"]} for b in builds]
    rows = [[f"`{pin['id']}`" + ("" if pin.get("required", True) else " (optional)"),
             *(cell(have[pin["id"]]) if pin["id"] in have else "— no result" for have in by_build)] for pin in pins]
    lines = table(["pin", *(f"{b['build']} (`{b['commit'][:9]}`)" for b in builds)], rows)
    problems = [f"- **{b['build']}** `{p['id']}`: {prob}" for b in builds for p in b["pins"]
                for prob in p["contract"]["problems"]]
    if problems:
        lines += ["", "Problems:", *problems]
    causes = [item for b in builds for p in b["pins"] if p["status"] == "conflict"
              for item in _conflict_cause(b["build"], p)] if conflicts else []
    if causes:
        lines += ["", "Conflicts:", *causes]
    return "\n".join(lines) + "\n"


def _conflict_cause(build: str, pin: dict) -> list[str]:
    """A list item with git's reason, and the hunk that failed as an indented diff block."""
    item = [f"- **{build}** `{pin['id']}`: {pin.get('detail') or 'does not apply'}"]
    if pin.get("hunk"):
        fence = "````" if any("```" in line for line in pin["hunk"]) else "```"
        item += [f"  {fence}diff", *(f"  {line}" for line in pin["hunk"]), f"  {fence}"]
    return item
