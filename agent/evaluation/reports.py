"""What an evaluation's runs add up to: totals and rates per arm, the paired comparisons of the arms, and the
tables that show them."""
from __future__ import annotations

from collections import Counter
from functools import partial
from itertools import combinations

from agent.evaluation.statistics import arm_interval, compare, format_p
from agent.loop import STATUSES
from agent.text import NOT_REPORTED, unreported

FAILED_STATUSES = tuple(status for status in STATUSES if status not in ("final", "interrupted"))
UNCATEGORISED = "(no category)"


def summarize(runs: list[dict], labels: list[str]) -> dict[str, dict]:
    """Totals and means per protocol label, pass rates by task category, and what went wrong, by type."""
    summary = {}
    for label in labels:
        mine = [r for r in runs if r["protocol"] == label]
        count = len(mine) or 1
        errors: Counter[str] = Counter()
        statuses: Counter[str] = Counter()
        checks: Counter[str] = Counter()
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
        fractions = task_fractions(mine)
        repeats = max((len(r) for r in _by_task(mine).values()), default=1)
        low, high = arm_interval(list(fractions.values()), repeats)
        summary[label] = {
            "runs": len(mine), "passed": total("passed"), "pass_rate": round(total("passed") / count, 4),
            "interval": [round(low, 4), round(high, 4)], "task_pass_fractions": fractions,
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


def _by_task(runs: list[dict]) -> dict[str, list[dict]]:
    tasks: dict[str, list[dict]] = {}
    for run in runs:
        tasks.setdefault(run["task"], []).append(run)
    return tasks


def task_fractions(runs: list[dict]) -> dict[str, float]:
    """Each task's share of passed runs (0 or 1 without --repeat)."""
    return {task: round(sum(r["passed"] for r in these) / len(these), 4) for task, these in _by_task(runs).items()}


def comparisons(runs: list[dict], labels: list[str]) -> list[dict]:
    """Every pair of arms compared on the runs both made (paired by task and repeat), overall and per category:
    won, lost, the exact McNemar p-value, the difference in pass rate with its bootstrap 95% interval, a verdict."""
    outcomes: dict[tuple, dict[str, bool]] = {}
    category = {}
    for run in runs:
        outcomes.setdefault((run["task"], run.get("repeat", 0)), {})[run["protocol"]] = run["passed"]
        category[run["task"]] = run["category"] or UNCATEGORISED
    found, cats = [], list(dict.fromkeys(category.values()))
    for a, b in combinations(labels, 2):
        result = compare(a, b, outcomes).as_dict()
        if cats and cats != [UNCATEGORISED]:
            result["categories"] = {c: compare(a, b, {k: o for k, o in outcomes.items() if category[k[0]] == c})
                                    .as_dict() for c in cats}
        found.append(result)
    return found


def comparison_rows(found: list[dict]) -> list[list[str]]:
    """The paired comparisons as rows of cells, a category's rows indented under their pair."""
    rows = [["paired comparison", "won", "lost", "p", "difference [95% CI]", "verdict"]]
    for pair in found:
        rows.append(_comparison_row(f"{pair['a']} vs {pair['b']}", pair))
        rows += [_comparison_row(f"  {category}", c) for category, c in pair.get("categories", {}).items()]
    return rows


def _comparison_row(name: str, c: dict) -> list[str]:
    low, high = c["interval"]
    return [name, str(c["won"]), str(c["lost"]), format_p(c["p_value"]).removeprefix("p=").removeprefix("p"),
            f"{c['difference']:+.1%} [{low:+.1%}, {high:+.1%}]", c["verdict"]]


def _total(runs: list[dict], key: str):
    return sum(r[key] for r in runs)


def table_rows(summary: dict[str, dict]) -> list[list[str]]:
    """The comparison table as rows of cells; a row of one cell is a section title."""
    stats = list(summary.values())
    rows = [[""] + list(summary)]
    rows += [[name] + [cell(s) for s in stats] for name, cell in (
        ("runs", lambda s: str(s["runs"])),
        ("passed", lambda s: f"{s['passed']} ({s['pass_rate']:.1%})"),
        ("pass rate 95% CI", lambda s: f"{s['interval'][0]:.1%} to {s['interval'][1]:.1%}"),
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
