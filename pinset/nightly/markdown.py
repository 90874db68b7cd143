"""Markdown of pick and blame results; pure functions over their JSON, so `pinset report` can reuse them."""

from __future__ import annotations


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
             "| pin | status | last good | first bad | subject | files / problems | steps |", "|---|---|---|---|---|---|---|"]
    for p in doc["pins"]:
        subject = (p["first_bad"] or {}).get("subject", "").replace("|", "\\|")
        files = ", ".join([f"`{f}`" for f in p["files"]] + [q.replace("|", "\\|") for q in p["problems"]])
        lines.append(f"| `{p['id']}` | {p['summary'].replace('|', '/')} | {_commit(p['last_good'])} | "
                     f"{_commit(p['first_bad'])} | {subject} | {files} | {p['steps']} |")
    return "\n".join(lines) + "\n"


def pick_markdown(doc: dict) -> str:
    picked = doc["picked"]
    lines = [f"Base: picked **{picked}**." if picked else "Base: **no build is green**.", "",
             "| build | commit | verdict | why |", "|---|---|---|---|"]
    for b in doc["builds"]:
        why = "; ".join(r["summary"] for r in b["reasons"]).replace("|", "\\|")
        lines.append(f"| {b['build']} | `{(b['commit'] or '')[:12]}` | {b['verdict']} | {why} |")
    return "\n".join(lines) + "\n"
