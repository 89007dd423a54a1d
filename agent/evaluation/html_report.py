"""`agent eval --html`: one self-contained page (inline CSS, inline SVG, no script, nothing fetched): the summary
table, the paired comparisons, a bar chart of pass rates by arm and category, and each task's runs with their
transcripts folded under them. Every text from the runs is model output, and escaped."""
from __future__ import annotations

from html import escape

from agent.evaluation.reports import UNCATEGORISED, comparison_rows, table_rows

COLOURS = ("#3b6fb6", "#e08a2c", "#4a9a5b", "#a35bb5", "#b5475b", "#6b7b8c")
CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:24px auto;max-width:1260px;
color:#1d232a;padding:0 16px}
.row{display:flex;flex-wrap:wrap;gap:0 40px;align-items:flex-start}th.verdict{text-align:left}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px}.meta{color:#5b6670}
table{border-collapse:collapse;margin:6px 0}td,th{padding:3px 10px;border-bottom:1px solid #e3e7eb;text-align:right}
td:first-child,th:first-child{text-align:left}th{background:#f3f5f7}tr.section td{font-weight:600;background:#fafbfc}
td.verdict{text-align:left}.pass{color:#1f7a35;font-weight:600}.fail{color:#b3261e;font-weight:600}
details{margin:3px 0}details.task>summary{font-weight:600;cursor:pointer}details.run{margin-left:20px}
.badge{display:inline-block;border-radius:3px;padding:0 6px;margin-left:6px;font-size:12px;color:#fff}
.badge.pass{background:#2e8b47}.badge.fail{background:#c0392b}
.event{margin:4px 0 4px 24px;padding:4px 8px;border-left:3px solid #d5dbe1;white-space:pre-wrap;
font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,monospace;overflow-wrap:anywhere}
.event.reask{border-color:#c0392b;background:#fdf3f2}.event.tool{border-color:#3b6fb6;background:#f3f7fc}
.event.final{border-color:#2e8b47;background:#f2faf4}.task-text{margin:4px 0 4px 20px;color:#39434d}
.legend span{display:inline-block;margin-right:14px}
.legend i{display:inline-block;width:11px;height:11px;margin-right:4px}
"""


def render_html(results: dict, task_texts: dict[str, str]) -> str:
    """The report page for ``results`` (what `agent eval --out` writes); ``task_texts`` maps task ids to tasks."""
    labels = list(results["summary"])
    model = results.get("model") or {}
    described = ", ".join(f"{k} {v}" for k, v in model.items() if v)
    runs = results["runs"]
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>agent eval: {_e(results.get('suite', ''))}</title><style>{CSS}</style></head><body>",
        f"<h1>agent eval: {_e(results.get('suite', ''))}</h1>",
        f'<p class="meta">{_e(described)} &middot; {len(runs)} runs &middot; {_e(results.get("started", ""))}'
        f'{" &middot; interrupted" if results.get("interrupted") else ""}</p>',
    ]
    if results.get("comparisons"):
        parts += ["<h2>Paired comparison</h2>",
                  "<p class=\"meta\">Runs paired by task and repeat. won/lost: runs one arm passed and the other "
                  "failed; p: exact McNemar test; the interval: paired bootstrap over tasks, 95%.</p>",
                  _table(comparison_rows(results["comparisons"]), verdict=True)]
    parts += ['<div class="row"><div><h2>Summary</h2>', _table(table_rows(results["summary"])), "</div>",
              "<div><h2>Pass rate by arm and category</h2>", _chart(results["summary"], labels), "</div></div>",
              "<h2>Tasks</h2>", '<p class="meta">Click a task for its runs, a run for its transcript.</p>',
              _tasks(runs, labels, task_texts), "</body></html>"]
    return "\n".join(parts) + "\n"


def _e(text) -> str:
    return escape(str(text), quote=True)


def _table(rows: list[list[str]], verdict: bool = False) -> str:
    width = len(rows[0])
    heads = [f'<th class="verdict">{_e(c)}</th>' if verdict and i == width - 1 else f"<th>{_e(c)}</th>"
             for i, c in enumerate(rows[0])]
    html = ["<table>", "<tr>" + "".join(heads) + "</tr>"]
    for row in rows[1:]:
        if len(row) == 1:
            html.append(f'<tr class="section"><td colspan="{width}">{_e(row[0])}</td></tr>')
            continue
        cells = [f"<td>{_e(row[0]).replace('  ', '&nbsp;&nbsp;')}</td>"]
        cells += [f'<td class="verdict">{_e(c)}</td>' if verdict and i == len(row) - 1 else f"<td>{_e(c)}</td>"
                  for i, c in enumerate(row[1:], 1)]
        html.append("<tr>" + "".join(cells) + "</tr>")
    return "\n".join(html + ["</table>"])


def _chart(summary: dict, labels: list[str]) -> str:
    """Horizontal bars: for each category (and all), one bar per arm, its length the pass rate."""
    categories = list(dict.fromkeys(c for s in summary.values() for c in s["categories"]))
    groups = ([] if categories == [UNCATEGORISED] else categories) + ["all"]
    bar, gap, left, scale = 14, 10, 90, 280
    height = len(groups) * (len(labels) * bar + gap) + 24
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + scale + 100}" height="{height}" '
           f'role="img" aria-label="pass rate by arm and category" font-size="12" font-family="sans-serif">']
    for tick in range(0, 101, 25):
        x = left + scale * tick / 100
        svg.append(f'<line x1="{x}" y1="0" x2="{x}" y2="{height - 18}" stroke="#e3e7eb"/>'
                   f'<text x="{x}" y="{height - 4}" text-anchor="middle" fill="#5b6670">{tick}%</text>')
    y = 0
    for group in groups:
        svg.append(f'<text x="{left - 8}" y="{y + len(labels) * bar / 2 + 4}" text-anchor="end">{_e(group)}</text>')
        for index, label in enumerate(labels):
            stats = summary[label] if group == "all" else summary[label]["categories"].get(group)
            if stats:
                rate = stats["pass_rate"]
                svg.append(f'<rect x="{left}" y="{y + 1}" width="{scale * rate:.1f}" height="{bar - 2}" '
                           f'fill="{COLOURS[index % len(COLOURS)]}"><title>{_e(label)}: {stats["passed"]}/'
                           f'{stats["runs"]}</title></rect>'
                           f'<text x="{left + scale * rate + 4:.1f}" y="{y + bar - 3}" fill="#39434d">'
                           f'{rate:.0%} ({stats["passed"]}/{stats["runs"]})</text>')
            y += bar
        y += gap
    svg.append("</svg>")
    legend = "".join(f'<span><i style="background:{COLOURS[i % len(COLOURS)]}"></i>{_e(label)}</span>'
                     for i, label in enumerate(labels))
    return f'<div class="legend">{legend}</div>' + "".join(svg)


def _tasks(runs: list[dict], labels: list[str], task_texts: dict[str, str]) -> str:
    by_task: dict[str, list[dict]] = {}
    for run in runs:
        by_task.setdefault(run["task"], []).append(run)
    html = []
    for task, these in by_task.items():
        badges = "".join(f'<span class="badge {"pass" if r["passed"] else "fail"}">{_e(r["protocol"])}'
                         f'{" #" + str(r.get("repeat", 0) + 1) if len(these) > len(labels) else ""}</span>'
                         for r in these)
        category = these[0].get("category") or ""
        html.append(f'<details class="task"><summary>{_e(task)} <span class="meta">{_e(category)}</span>'
                    f'{badges}</summary><div class="task-text">{_e(task_texts.get(task, ""))}</div>')
        html += [_run(r) for r in these]
        html.append("</details>")
    return "\n".join(html)


def _run(run: dict) -> str:
    failed = [f'{c["check"]}: {c.get("detail", "")}' for c in run.get("checks", []) if not c["ok"]]
    why = "" if run["passed"] else run.get("error") or "; ".join(failed) or run["status"]
    verdict = '<span class="pass">pass</span>' if run["passed"] else '<span class="fail">FAIL</span>'
    summary = (f'{_e(run["protocol"])} (run {run.get("repeat", 0) + 1}): {verdict} &middot; {_e(run["status"])} '
               f'&middot; {run.get("steps", 0)} steps, {run.get("model_calls", 0)} model calls, '
               f'{run.get("seconds", 0):.1f}s{" &middot; " + _e(why) if why else ""}')
    events = [_event(e) for e in run.get("transcript", [])] or ['<div class="event">(no transcript)</div>']
    return f'<details class="run"><summary>{summary}</summary>' + "".join(events) + "</details>"


def _event(event: dict) -> str:
    kind = event.get("event")
    if kind == "reply":
        calls = "".join(f"\ntool call: {c['name']}({c['arguments']})" for c in event.get("tool_calls", []))
        return f'<div class="event reply"><b>reply</b>\n{_e((event.get("content") or "") + calls)}</div>'
    if kind == "reask":
        return f'<div class="event reask"><b>re-ask ({_e(event["kind"])})</b>\n{_e(event["message"])}</div>'
    if kind == "tool":
        state = "ok" if event.get("ok") else "error"
        return (f'<div class="event tool"><b>{_e(event["tool"])}({_e(event["arguments"])}) &rarr; {state}</b>\n'
                f'{_e(event["result"])}</div>')
    if kind == "second_look":
        return f'<div class="event reask"><b>second look</b>\n{_e(event["note"])}</div>'
    if kind == "final":
        return f'<div class="event final"><b>final answer</b>\n{_e(event["answer"])}</div>'
    return f'<div class="event">{_e(event)}</div>'
