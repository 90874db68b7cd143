"""Markdown of pick and blame results; pure functions over their JSON, so `pinset report` can reuse them."""

from __future__ import annotations

from pinset.markdown_table import table


def _commit(ref: dict | None) -> str:
    if not ref:
        return "—"
    text = f"`{ref['commit'][:12]}`"
    if ref.get("pr"):
        text += f" (#{ref['pr']})"
    if ref.get("merge"):
        text += f" merge of {ref.get('merged_commits')} commits"
    return text


def blame_markdown(doc: dict) -> str:
    good, bad = doc["good"], doc["bad"]
    lines = [f"Blame from **{good['build']}** (`{good['commit'][:12]}`) to **{bad['build']}** "
             f"(`{bad['commit'][:12]}`): {doc['commits']} first-parent commits, {doc['probes']} probed.", "",
             *table(["pin", "status", "last good", "first bad", "subject", "files / problems", "steps"],
                    [[f"`{p['id']}`", p["summary"], _commit(p["last_good"]), _commit(p["first_bad"]),
                      (p["first_bad"] or {}).get("subject", ""),
                      ", ".join([f"`{f}`" for f in p["files"]] + list(p["problems"])), p["steps"]]
                     for p in doc["pins"]])]
    return "\n".join(lines) + "\n"


def pick_markdown(doc: dict) -> str:
    picked = doc["picked"]
    lines = [f"Base: picked **{picked}**." if picked else "Base: **no build is green**.", "",
             *table(["build", "commit", "verdict", "why"],
                    [[b["build"], f"`{(b['commit'] or '')[:12]}`", b["verdict"],
                      "; ".join(r["summary"] for r in b["reasons"])] for b in doc["builds"]])]
    return "\n".join(lines) + "\n"
