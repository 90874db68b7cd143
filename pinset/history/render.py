"""The history as one self-contained HTML page (inline CSS, plots as inline PNG; no script, nothing fetched;
the grid scrolls sideways on a phone, pin names kept in view) and as markdown for an issue or a job summary
(the plots as PNG files beside it). matplotlib is imported when a plot is drawn."""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path

from pinset.history.model import NO_DATA, History, PinHistory

COLOURS = {"applied": "#2da44e", "upstream": "#0969da", "conflict": "#cf222e", "contract": "#e36209",
           "error": "#8250df", "skipped": "#6e7781", NO_DATA: "#eaeef2"}
EMOJI = {"applied": "🟢", "upstream": "🔵", "conflict": "🔴", "contract": "🟠", "error": "🟣", "skipped": "⚪",
         NO_DATA: "▫️"}
VERDICT_COLOURS = {"faster": "#2da44e", "slower": "#cf222e", "no change": "#6e7781", "too noisy": "#e36209",
                   "insufficient data": "#8250df"}
MARKDOWN_NIGHTS = 14   # the markdown grid's last nights (the page and the JSON have all)

CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:0 auto;max-width:1100px;padding:12px;
color:#1f2328;background:#fff;line-height:1.4}
h1{font-size:1.4em;margin:.2em 0}h2{font-size:1.15em;margin:1.2em 0 .4em;border-bottom:1px solid #d0d7de}
.sub{color:#59636e;font-size:.9em}
table{border-collapse:collapse;font-size:.85em}th,td{padding:3px 6px;text-align:left;vertical-align:top}
.list td,.list th{border-bottom:1px solid #d0d7de}
.scroll{overflow-x:auto;-webkit-overflow-scrolling:touch;max-width:100%;border:1px solid #d0d7de}
table.grid td,table.grid th{padding:0;border:1px solid #fff}
table.grid th.pin{position:sticky;left:0;background:#fff;padding:0 6px;white-space:nowrap;font-weight:600;z-index:1}
table.grid th.n{font-weight:400;font-size:.7em;writing-mode:vertical-rl;transform:rotate(180deg);height:6.5em;
padding:2px 0;color:#59636e}
td.c{width:14px;min-width:14px;height:18px;position:relative}
td.c .bs{display:flex;flex-direction:column;height:18px}
td.c .b{flex:1 1 0;display:block;min-height:2px}
td.c.ref{outline:2px solid #1f2328;outline-offset:-2px}
.s-applied{background:#2da44e}.s-upstream{background:#0969da}.s-conflict{background:#cf222e}
.s-contract{background:#e36209}.s-error{background:#8250df}.s-skipped{background:#6e7781}.s-none{background:#eaeef2}
.b.m{background-image:repeating-linear-gradient(45deg,transparent 0 2px,rgba(255,255,255,.55) 2px 4px)}
.key span.kw{white-space:nowrap}.key span.sw{display:inline-block;width:12px;height:12px;vertical-align:-2px;margin:0 3px 0 6px}
.red{color:#cf222e;font-weight:600}.ok{color:#1a7f37}
img{max-width:100%;height:auto}
"""


def state_class(state: str) -> str:
    return "s-" + (state or "none")


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def short(commit: str) -> str:
    return commit[:12]


def red_text(p: PinHistory, *, markdown: bool = False) -> str:
    """"red since NIGHT (BUILD), blamed on COMMIT (#PR)" or ""."""
    r = p.red_since
    if r is None:
        return ""
    text = f"{r['state']} since {r['night']} ({r['build']})"
    b = r.get("blamed")
    if b:
        commit = f"`{short(b['commit'])}`" if markdown else short(b["commit"])
        text += f", blamed on {commit}" + (f" (#{b['pr']})" if b.get("pr") else "") + f" by {b['by']}"
    return text


def now_text(p: PinHistory, last_night: str | None = None) -> str:
    """The pin's states on the builds of the last night it was simulated (that night named when it is not the
    last night of the history: a pin since removed from the set)."""
    cell = p.last
    if cell is None:
        return "not simulated"
    text = ", ".join(f"{b}: {s}" + (f" ({m})" if m and m != "exact" else "") for b, s, m in cell.builds)
    return text if p.last_night == last_night or last_night is None else f"{text} (on {p.last_night}; not since)"


# --- plots ---------------------------------------------------------------------------------------------------
def _figure():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _ticks(ax, names: list[str]) -> None:
    step = max(1, len(names) // 12)
    ax.set_xticks(range(0, len(names), step))
    ax.set_xticklabels(names[::step], rotation=30, ha="right", fontsize=7)


def bench_png(h: History) -> bytes | None:
    """head/base ratio per benchmark over the nights, each point coloured by its verdict, 1.0 marked."""
    if not h.bench:
        return None
    plt = _figure()
    names = h.night_names
    x_of = {n: i for i, n in enumerate(names)}
    fig, ax = plt.subplots(figsize=(8, 3.6), dpi=100)
    for name, by_night in h.bench.items():
        pts = [(x_of[n], v["ratio"], v["verdict"]) for n, v in by_night.items() if v["ratio"] is not None]
        if not pts:
            continue
        xs, ys, vs = zip(*pts)
        ax.plot(xs, ys, "-", lw=1, alpha=.6, label=name)
        ax.scatter(xs, ys, c=[VERDICT_COLOURS.get(v, "#000") for v in vs], s=14, zorder=3)
    ax.axhline(1.0, color="#59636e", lw=.8, ls="--")
    ax.set_ylabel("head / base speed")
    _ticks(ax, names)
    ax.legend(fontsize=7, loc="best")
    return _png(plt, fig)


def kld_png(h: History) -> bytes | None:
    """head - base mean KLD per study over the nights, with its standard error."""
    rows = [(name, by_night) for name, by_night in h.kld.items()
            if any(v["diff"] is not None for v in by_night.values())]
    if not rows:
        return None
    plt = _figure()
    names = h.night_names
    x_of = {n: i for i, n in enumerate(names)}
    fig, ax = plt.subplots(figsize=(8, 3), dpi=100)
    for name, by_night in rows:
        pts = [(x_of[n], v["diff"], v["sigma"] or 0.0) for n, v in by_night.items() if v["diff"] is not None]
        xs, ys, es = zip(*pts)
        ax.errorbar(xs, ys, yerr=es, fmt="o-", ms=3, lw=1, capsize=2, label=name)
    ax.axhline(0.0, color="#59636e", lw=.8, ls="--")
    ax.set_ylabel("head − base mean KLD")
    _ticks(ax, names)
    ax.legend(fontsize=7, loc="best")
    return _png(plt, fig)


def _png(plt, fig) -> bytes:
    out = io.BytesIO()
    fig.tight_layout()
    fig.savefig(out, format="png")
    plt.close(fig)
    return out.getvalue()


# --- HTML ----------------------------------------------------------------------------------------------------
def render_html(h: History, title: str = "pinset history", description: str | None = None) -> str:
    names = h.night_names
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           f"<title>{esc(title)}</title><style>{CSS}</style></head><body>",
           f"<h1>{esc(title)}</h1>"]
    if description:
        out.append(f'<p class="sub">{esc(description)}</p>')
    span = f"{names[0]} … {names[-1]}" if names else "no runs"
    out.append(f'<p class="sub">{len(names)} night{"s" if len(names) != 1 else ""} ({esc(span)}), '
               f'{len(h.pins)} pin{"s" if len(h.pins) != 1 else ""}'
               + (f', <span class="red">{len(h.skipped)} file{"s" if len(h.skipped) != 1 else ""} skipped</span>'
                  if h.skipped else "") + "</p>")
    out += _pins_html(h)
    out += _grid_html(h)
    out += _bench_html(h)
    out += _kld_html(h)
    out += _verify_html(h)
    out += _alarms_html(h)
    if h.skipped:
        out.append('<h2 id="skipped">Skipped files</h2><table class="list" id="skipped-files">')
        out += [f"<tr><td>{esc(s.where)}</td><td>{esc(s.why)}</td></tr>" for s in h.skipped]
        out.append("</table>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def _pins_html(h: History) -> list[str]:
    out = ['<h2 id="pins">Pins now</h2><table class="list" id="pins-now"><tr><th>pin</th><th>last night</th>'
           "<th>red</th><th>refreshed</th></tr>"]
    for p in h.pins:
        red = red_text(p)
        desc = f'<br><span class="sub">{esc(p.description)}</span>' if p.description else ""
        out.append(f'<tr data-pin="{esc(p.id)}"><td><b>{esc(p.id)}</b>{"" if p.required else " (optional)"}{desc}</td>'
                   f"<td>{esc(now_text(p, h.night_names[-1]))}</td>"
                   f'<td class="{"red" if red else "ok"}">{esc(red) if red else "green"}</td>'
                   f'<td>{len(p.refreshed_on)}×' + (f' <span class="sub">({esc(", ".join(p.refreshed_on))})</span>'
                                                    if p.refreshed_on else "") + "</td></tr>")
    out.append("</table>")
    return out


def _grid_html(h: History) -> list[str]:
    names = h.night_names
    out = ['<h2 id="grid">Pins × nights</h2>', '<p class="key sub">Each cell: one bar per build, the shipped build on '
           "top; a hatched bar applied only by offset, 3-way merge or a recorded resolution (refresh it); a framed "
           "cell the night the series changed (refreshed or replaced).<br>"
           + " ".join(f'<span class="kw"><span class="sw {state_class(s)}"></span>{esc(s or "not simulated")}</span>'
                      for s in COLOURS)
           + "</p>", '<div class="scroll"><table class="grid" id="pin-grid"><tr><th class="pin"></th>'
           + "".join(f'<th class="n">{esc(n)}</th>' for n in names) + "</tr>"]
    for p in h.pins:
        row = [f'<tr><th class="pin">{esc(p.id)}</th>']
        for n in names:
            cell = p.cells.get(n)
            if cell is None:
                row.append(f'<td class="c" data-pin="{esc(p.id)}" data-night="{esc(n)}" data-state="" '
                           f'title="{esc(p.id)} · {esc(n)}: not simulated"><span class="bs">'
                           '<span class="b s-none"></span></span></td>')
                continue
            tip = "; ".join(f"{b}: {s}" + (f" ({m})" if m and m != "exact" else "") for b, s, m in cell.builds)
            tip += " · series changed" if cell.refreshed else ""
            bars = "".join(f'<span class="b {state_class(s)}{" m" if m and m != "exact" else ""}" '
                           f'data-build="{esc(b)}" data-state="{esc(s)}"></span>' for b, s, m in cell.builds)
            row.append(f'<td class="c{" ref" if cell.refreshed else ""}" data-pin="{esc(p.id)}" data-night="{esc(n)}" '
                       f'data-state="{esc(cell.shipped)}"{" data-refreshed" if cell.refreshed else ""} '
                       f'title="{esc(p.id)} · {esc(n)}: {esc(tip)}"><span class="bs">{bars}</span></td>')
        out.append("".join(row) + "</tr>")
    out.append("</table></div>")
    return out


def _web(url: str) -> bool:
    """Only an http(s) URL from a result file becomes a link (never javascript: or data:)."""
    return url.lower().startswith(("https://", "http://"))


def _img(png: bytes | None, alt: str) -> str:
    if png is None:
        return ""
    return f'<img alt="{esc(alt)}" src="data:image/png;base64,{base64.b64encode(png).decode()}">'


def _bench_html(h: History) -> list[str]:
    if not h.bench:
        return []
    out = ['<h2 id="bench">Bench: head / base</h2>', _img(bench_png(h), "head/base speed ratio per benchmark over the nights"),
           '<table class="list" id="bench-table"><tr><th>benchmark</th><th>last night</th><th>ratio</th><th>95% CI</th>'
           "<th>verdict</th><th>nights</th></tr>"]
    for name, by_night in h.bench.items():
        night, v = next(reversed(by_night.items()))
        ci = "–".join(f"{x:.3f}" for x in v["ci95"]) if v["ci95"] else ""
        ratio = f"{v['ratio']:.3f}×" if v["ratio"] is not None else "–"
        out.append(f"<tr><td>{esc(name)}</td><td>{esc(night)}</td><td>{ratio}</td><td>{ci}</td>"
                   f'<td style="color:{VERDICT_COLOURS.get(v["verdict"], "#000")}">{esc(v["verdict"])}</td>'
                   f"<td>{len(by_night)}</td></tr>")
    out.append("</table>")
    return out


def _kld_html(h: History) -> list[str]:
    if not h.kld:
        return []
    out = ['<h2 id="kld">KLD: head against base</h2>', _img(kld_png(h), "head minus base mean KLD over the nights"),
           '<table class="list" id="kld-table"><tr><th>study</th><th>night</th><th>head − base</th><th>verdict</th></tr>']
    for name, by_night in h.kld.items():
        for night, v in by_night.items():
            diff = f"{v['diff']:+.6f} ± {v['sigma']:.6f}" if v["diff"] is not None and v["sigma"] is not None else "–"
            out.append(f"<tr><td>{esc(name)}</td><td>{esc(night)}</td><td>{diff}</td>"
                       f'<td class="{"red" if v["further"] else ""}">{esc(v["verdict"])}</td></tr>')
    out.append("</table>")
    return out


def _verify_html(h: History) -> list[str]:
    if not h.verify:
        return []
    out = ['<h2 id="verify">Verify gates</h2><table class="list" id="verify-table"><tr><th>night</th><th>passed</th>'
           "<th>failed</th><th>not run</th><th>failing</th></tr>"]
    for night, v in h.verify.items():
        out.append(f'<tr data-night="{esc(night)}"><td>{esc(night)}</td><td>{v["passed"]}</td>'
                   f'<td class="{"red" if v["failed"] else ""}">{v["failed"]}</td><td>{v["not_run"]}</td>'
                   f"<td>{esc(', '.join(v['failing']))}</td></tr>")
    out.append("</table>")
    return out


def _alarms_html(h: History) -> list[str]:
    if not h.alarms:
        return []
    out = ['<h2 id="forecast">Forecast alarms</h2><table class="list" id="alarms"><tr><th>PR</th><th>would break</th>'
           "<th>since</th><th>nights</th></tr>"]
    for a in h.alarms:
        number = f'<a href="{esc(a["url"])}">#{a["pr"]}</a>' if _web(a["url"]) else f"#{a['pr']}"
        out.append(f'<tr data-pr="{a["pr"]}" data-pin="{esc(a["pin"])}"><td>{number} '
                   f'{esc(a["title"])} <span class="sub">({esc(a["state"])})</span></td>'
                   f'<td>{esc(a["pin"])}{"" if a["required"] else " (optional)"}</td><td>{esc(a["since"])}</td>'
                   f'<td>{a["nights"]}</td></tr>')
    out.append("</table>")
    return out


# --- markdown ------------------------------------------------------------------------------------------------
def md_cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_markdown(h: History, images: dict[str, str] | None = None, title: str = "pinset history") -> str:
    """`images`: kind (bench, kld) -> the file name of its PNG beside the markdown."""
    names = h.night_names
    images = images or {}
    recent = names[-MARKDOWN_NIGHTS:]
    lines = [f"## {title}", ""]
    if not names:
        lines += ["No runs found.", ""]
    else:
        red = [p for p in h.pins if p.red_since]
        lines += [f"{len(names)} night{'s' if len(names) != 1 else ''} ({names[0]} … {names[-1]}), {len(h.pins)} pins: "
                  + (f"**{len(red)} red**" if red else "all green") + ".", ""]
    if h.pins:
        lines += ["| pin | last night | red | refreshed | last nights |", "|---|---|---|---|---|"]
        for p in h.pins:
            grid = "".join(EMOJI.get(h.grid.at[p.id, n], "?") for n in recent)
            lines.append(f"| {md_cell(p.id)}{'' if p.required else ' (optional)'} | {md_cell(now_text(p, names[-1]))} | "
                         f"{md_cell(red_text(p, markdown=True)) or 'green'} | {len(p.refreshed_on)}× | {grid} |")
        lines += ["", f"Last nights: {recent[0]} … {recent[-1]}, worst build each night: "
                  + ", ".join(f"{e} {s}" for s, e in EMOJI.items() if s) + ".", ""]
    if h.bench:
        lines += ["### Bench: head / base", "", "| benchmark | " + " | ".join(recent) + " |",
                  "|---|" + "---|" * len(recent)]
        for name, row in h.ratios[recent].iterrows():
            lines.append(f"| {md_cell(name)} | " + " | ".join(md_cell(text) for text in row) + " |")
        lines.append("")
        if "bench" in images:
            lines += [f"![head/base ratio over the nights]({images['bench']})", ""]
    if h.kld:
        lines += ["### KLD: head against base", "", "| study | night | head − base | verdict |", "|---|---|---|---|"]
        for name, by_night in h.kld.items():
            for n in [n for n in recent if n in by_night]:
                v = by_night[n]
                diff = f"{v['diff']:+.6f} ± {v['sigma']:.6f}" if v["diff"] is not None and v["sigma"] is not None else "–"
                lines.append(f"| {md_cell(name)} | {n} | {diff} | {md_cell(v['verdict'])} |")
        lines.append("")
        if "kld" in images:
            lines += [f"![head − base KLD over the nights]({images['kld']})", ""]
    if h.verify:
        lines += ["### Verify gates", "", "| night | passed | failed | not run | failing |", "|---|---|---|---|---|"]
        for n in [n for n in recent if n in h.verify]:
            v = h.verify[n]
            lines.append(f"| {n} | {v['passed']} | {v['failed']} | {v['not_run']} | {md_cell(', '.join(v['failing']))} |")
        lines.append("")
    if h.alarms:
        lines += ["### Forecast alarms", "", "| PR | would break | since | nights |", "|---|---|---|---|"]
        for a in h.alarms:
            number = f"[#{a['pr']}]({a['url']})" if _web(a["url"]) and ")" not in a["url"] else f"#{a['pr']}"
            lines.append(f"| {number} {md_cell(a['title'])} ({a['state']}) | {md_cell(a['pin'])}"
                         f"{'' if a['required'] else ' (optional)'} | {a['since']} | {a['nights']} |")
        lines.append("")
    if h.skipped:
        lines += ["### Skipped files", ""] + [f"- `{s.where}`: {md_cell(s.why)}" for s in h.skipped] + [""]
    return "\n".join(lines)


def write_pngs(h: History, markdown: Path) -> dict[str, bytes]:
    """The plots to write beside a markdown file: file name -> PNG bytes (none without data)."""
    out = {}
    for kind, draw in (("bench", bench_png), ("kld", kld_png)):
        png = draw(h)
        if png is not None:
            out[f"{markdown.stem}-{kind}.png"] = png
    return out
