"""What an evaluation's runs add up to: totals and rates per protocol, and the table that compares them."""
from __future__ import annotations

from collections import Counter
from functools import partial

from agent.loop import STATUSES
from agent.text import NOT_REPORTED, unreported

FAILED_STATUSES = tuple(status for status in STATUSES if status not in ("final", "interrupted"))
UNCATEGORISED = "(no category)"


def summarize(runs: list[dict], labels: list[str]) -> dict[str, dict]:
    """Totals and means per protocol label, pass rates by task category, and what went wrong, by type."""
    summary = {}
    for label in labels:
        mine = [r for r in runs if r["protocol"] == label]
        count, errors, statuses, checks = len(mine) or 1, Counter(), Counter(), Counter()
        for r in mine:
            errors.update(r["errors"])
            if r["status"] != "final":
                statuses[r["status"]] += 1
            else:
                checks.update(c["check"] for c in r["checks"] if not c["ok"])
        total = partial(_total, mine)
        categories = {}
        for category in dict.fromkeys(r["category"] or UNCATEGORISED for r in mine):
            these = [r for r in mine if (r["category"] or UNCATEGORISED) == category]
            passed = _total(these, "passed")
            categories[category] = {"runs": len(these), "passed": passed, "pass_rate": round(passed / len(these), 4)}
        unusable = total("reasks") + statuses["format_errors"]
        summary[label] = {
            "runs": len(mine), "passed": total("passed"), "pass_rate": round(total("passed") / count, 4),
            "mean_steps": round(total("steps") / count, 2), "mean_model_calls": round(total("model_calls") / count, 2),
            "reasks": total("reasks"), "argument_errors": errors["bad_arguments"], "model_calls": total("model_calls"),
            "unusable_replies": unusable, "unusable_rate": round(unusable / (total("model_calls") or 1), 4),
            "prompt_tokens": total("prompt_tokens"), "completion_tokens": total("completion_tokens"),
            "usage_missing": total("usage_missing"), "seconds": round(total("seconds"), 2),
            "mean_seconds": round(total("seconds") / count, 2),
            "statuses": dict(statuses), "failed_checks": dict(checks), "errors": dict(errors),
            "categories": categories,
        }
    return summary


def _total(runs: list[dict], key: str):
    return sum(r[key] for r in runs)


def table_rows(summary: dict[str, dict]) -> list[list[str]]:
    """The comparison table as rows of cells; a row of one cell is a section title."""
    stats = list(summary.values())
    rows = [[""] + list(summary)]
    rows += [[name] + [cell(s) for s in stats] for name, cell in (
        ("runs", lambda s: str(s["runs"])),
        ("passed", lambda s: f"{s['passed']} ({s['pass_rate']:.1%})"),
        ("mean steps", lambda s: f"{s['mean_steps']:.1f}"),
        ("mean model calls", lambda s: f"{s['mean_model_calls']:.1f}"),
        ("re-asks", lambda s: str(s["reasks"])),
        ("unusable replies", lambda s: f"{s['unusable_replies']} ({s['unusable_rate']:.1%} of replies)"),
        ("argument errors", lambda s: str(s["argument_errors"])),
        ("prompt tokens", lambda s: _tokens(s, "prompt_tokens")),
        ("completion tokens", lambda s: _tokens(s, "completion_tokens")),
        ("wall seconds", lambda s: f"{s['seconds']:.1f} (mean {s['mean_seconds']:.1f})"),
    )]
    categories = list(dict.fromkeys(c for s in stats for c in s["categories"]))
    if categories != [UNCATEGORISED]:
        rows.append(["passed, by category"])
        rows += [[f"  {category}"] + [_category_cell(s["categories"].get(category)) for s in stats]
                 for category in categories]
        rows.append(["  all"] + [_category_cell(s) for s in stats])
    rows.append(["failed runs, by cause"])
    rows += [[f"  ended {status}"] + [str(s["statuses"].get(status, 0)) for s in stats] for status in FAILED_STATUSES]
    for check in sorted({c for s in stats for c in s["failed_checks"]}):
        rows.append([f"  failed {check}"] + [str(s["failed_checks"].get(check, 0)) for s in stats])
    kinds = sorted({k for s in stats for k in s["errors"]})
    rows.append(["malformed replies and calls, by kind"])
    kind_rows = [[f"  {kind}"] + [str(s["errors"].get(kind, 0)) for s in stats] for kind in kinds]
    rows += kind_rows or [["  (none)"] + [""] * len(stats)]
    return rows


def _category_cell(stats: dict | None) -> str:
    return f"{stats['passed']}/{stats['runs']} ({stats['pass_rate']:.1%})" if stats else "-"


def _tokens(stats: dict, key: str) -> str:
    missing = unreported(stats["usage_missing"], stats["model_calls"])
    if missing == NOT_REPORTED:
        return f"n/a ({NOT_REPORTED})"
    return f"{stats[key]} ({missing})" if missing else str(stats[key])


def render_table(rows: list[list[str]], markdown: bool = False) -> str:
    width = len(rows[0])
    if markdown:
        lines = [f"| {' | '.join(rows[0])} |", "|---" + "|---:" * (width - 1) + "|"]
        lines += [f"| {' | '.join(c.strip() for c in row)} |" if len(row) > 1 else
                  f"| **{row[0].strip()}** |{' |' * (width - 1)}" for row in rows[1:]]
        return "\n".join(lines)
    widths = [max(len(row[i]) for row in rows if len(row) > 1) for i in range(width)]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows)
