"""`agent eval`: run a task suite in one or more protocols on the same model and compare them side by side."""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Callable

from agent.cli import (ConfigError, add_model_options, build_model, check_output_file, choose_endpoint, constrained,
                       environment, plural, positive_int, settings_from)
from agent.config import DEFAULT_BASE_URL, Endpoint
from agent.loop import Agent, RunResult, Settings
from agent.protocols import NativeProtocol, PromptProtocol
from agent.scripted_tools import scripted_registry
from agent.suite import BUILTIN, Task, check_run, load_suite, write_files
from agent.tools import builtin_registry
from agent.tools.files import atomic_write

PROTOCOLS = ("prompt", "native")
FAILED_STATUSES = ("step_limit", "format_errors", "loop", "model_error", "error")
ALL_MODEL_ERRORS = 3
MAX_REPEAT = 1000
MAX_WORKERS = 64
INTERRUPTED = 130
UNCATEGORISED = "(no category)"


@dataclass
class Evaluation:
    runs: list[dict]  # finished runs, in task order
    planned: int
    interrupted: bool = False


def run_task(task: Task, make_protocol: Callable, model, settings: Settings, label: str, repeat: int = 0) -> dict:
    """One run of one task in a fresh workspace, with its checks; never raises."""
    record, started = {"task": task.id, "category": task.category, "repeat": repeat}, time.monotonic()
    try:
        with tempfile.TemporaryDirectory(prefix="agent-eval-") as folder:
            workspace = Path(folder)
            write_files(workspace, task)
            registry = scripted_registry(task.tools, task.results) if task.tools else builtin_registry(str(workspace))
            result = Agent(model, registry, make_protocol(registry), settings).run(task.task)
            checks = check_run(task.checks, result.answer, result.tool_calls, workspace)
    except Exception as error:
        result, checks = RunResult(status="error", error=f"{type(error).__name__}: {error}"), []
        result.seconds = round(time.monotonic() - started, 3)
    passed = result.status == "final" and all(c["ok"] for c in checks)
    return {**record, **result.summary(), "protocol": label, "checks": checks, "passed": passed}


class _Gate:
    """Passes calls on to the model until stopped; then every run ends at its next model call."""

    def __init__(self, model):
        self.model, self.stopped = model, threading.Event()

    def complete(self, messages, **options):
        if self.stopped.is_set():
            raise KeyboardInterrupt
        return self.model.complete(messages, **options)


def run_eval(tasks: list[Task], protocols: dict[str, Callable], model, settings: Settings | None = None, *,
             repeat: int = 1, workers: int = 1, on_done: Callable[[dict, int, int], None] | None = None) -> Evaluation:
    """Every task in every protocol, ``repeat`` times, on ``workers`` threads sharing one model.

    ``protocols`` maps a label to a factory ``make(registry) -> protocol``. ``on_done(record, done, total)``
    is called in this thread as runs finish; Ctrl-C stops the eval and keeps the runs that finished.
    """
    jobs = [(task, label, r) for r in range(repeat) for task in tasks for label in protocols]
    gate, finished, interrupted = _Gate(model), [], False
    pool = ThreadPoolExecutor(max_workers=workers)
    try:
        futures = {pool.submit(run_task, task, protocols[label], gate, settings or Settings(), label, r): i
                   for i, (task, label, r) in enumerate(jobs)}
        for future in as_completed(futures):
            finished.append((futures[future], future.result()))
            if on_done:
                on_done(finished[-1][1], len(finished), len(jobs))
    except KeyboardInterrupt:
        gate.stopped.set()
        interrupted = True
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    runs = [record for _, record in sorted(finished, key=lambda pair: pair[0])]
    if interrupted:
        runs = [record for record in runs if record["status"] != "interrupted"]
    return Evaluation(runs, len(jobs), interrupted)


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
    missing = stats["usage_missing"]
    if missing and missing == stats["model_calls"]:
        return "n/a (not reported)"
    return f"{stats[key]} ({plural(missing, 'call')} unreported)" if missing else str(stats[key])


def render_table(rows: list[list[str]], markdown: bool = False) -> str:
    width = len(rows[0])
    if markdown:
        lines = [f"| {' | '.join(rows[0])} |", "|---" + "|---:" * (width - 1) + "|"]
        lines += [f"| {' | '.join(c.strip() for c in row)} |" if len(row) > 1 else
                  f"| **{row[0].strip()}** |{' |' * (width - 1)}" for row in rows[1:]]
        return "\n".join(lines)
    widths = [max(len(row[i]) for row in rows if len(row) > 1) for i in range(width)]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows)


def progress_line(record: dict, done: int, total: int, label_width: int, id_width: int) -> str:
    failed = [c["check"] for c in record["checks"] if not c["ok"]]
    why = "" if record["passed"] else record["status"] if record["status"] != "final" else ", ".join(failed)
    return (f"[{done}/{total}] {record['protocol']:<{label_width}}  {record['task']:<{id_width}}  "
            f"{'pass' if record['passed'] else 'FAIL'}  {plural(record['steps'], 'step')} {record['seconds']:.1f}s"
            f"{'  ' + why if why else ''}")


def eval_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agent eval", description="Run a task suite in each protocol on the same model and compare them.")
    parser.add_argument("suite", nargs="?", help="a JSONL task suite; default: the built-in one")
    parser.add_argument("--protocol", action="append", choices=PROTOCOLS,
                        help="a protocol to run; repeat to compare; default: both")
    parser.add_argument("--repeat", type=at_most(MAX_REPEAT), default=1, metavar="N",
                        help=f"runs per task, default 1, at most {MAX_REPEAT}")
    parser.add_argument("--workers", type=at_most(MAX_WORKERS), metavar="K",
                        help=f"runs at once, at most {MAX_WORKERS}; default 4 for an endpoint, 1 for the local model "
                             "(it runs one call at a time, and reuses the prompt it has just read)")
    parser.add_argument("--limit", type=positive_int, metavar="N", help="only the first N tasks")
    parser.add_argument("--tasks", metavar="ID,ID", help="only these tasks")
    parser.add_argument("--out", metavar="FILE", help="write every run and the summary as JSON")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    add_model_options(parser)
    return parser


def eval_command(argv: list[str]) -> int:
    args = eval_parser().parse_args(argv)
    env = environment()
    if args.out is not None:
        check_output_file(args.out, "--out", "results file")
    tasks = select(load_suite(args.suite, set(builtin_registry(".").names)), args.tasks, args.limit)
    names = list(dict.fromkeys(args.protocol or PROTOCOLS))
    if args.constrain and "prompt" not in names:
        raise ConfigError("--constrain applies to the prompt protocol only; add --protocol prompt or drop it")
    endpoint = choose_endpoint(args, env)
    constrain = constrained(args, local=endpoint is None)
    args.workers = args.workers or (1 if endpoint is None else 4)
    protocols = protocol_factories(names, constrain)
    model, settings, started = build_model(args, endpoint, env), settings_from(args, endpoint is None), now()
    total = len(tasks) * len(protocols) * args.repeat
    if not args.quiet:
        print(f"agent eval: {plural(len(tasks), 'task')} × {plural(len(protocols), 'protocol')} × "
              f"{plural(args.repeat, 'repeat')} = {plural(total, 'run')}, {plural(args.workers, 'worker')}",
              file=sys.stderr)
    widths = (max(map(len, protocols)), max(len(t.id) for t in tasks))

    def show(record: dict, done: int, planned: int) -> None:
        print(progress_line(record, done, planned, *widths), file=sys.stderr)

    evaluation = run_eval(tasks, protocols, model, settings, repeat=args.repeat, workers=args.workers,
                          on_done=None if args.quiet else show)
    summary = summarize(evaluation.runs, list(protocols))
    if evaluation.interrupted:
        print(f"agent eval: interrupted; {len(evaluation.runs)} of {total} runs finished", file=sys.stderr)
    print(render_table(table_rows(summary), args.markdown))
    if args.out:
        write_json(args.out, {
            "suite": args.suite or BUILTIN, "model": describe_model(args, endpoint, env), "started": started, "finished": now(),
            "settings": {**asdict(settings), "constrain": constrain, "repeat": args.repeat, "workers": args.workers,
                         "protocols": list(protocols)},
            "interrupted": evaluation.interrupted, "runs": evaluation.runs, "summary": summary})
    if evaluation.interrupted:
        return INTERRUPTED
    if evaluation.runs and all(r["status"] == "model_error" for r in evaluation.runs):
        print("agent eval: every run failed with a model error; is the endpoint up? "
              f"First error: {evaluation.runs[0]['error']}", file=sys.stderr)
        return ALL_MODEL_ERRORS
    return 0


def at_most(limit: int) -> Callable[[str], int]:
    def count(text: str) -> int:
        value = positive_int(text)
        if value > limit:
            raise argparse.ArgumentTypeError(f"must be at most {limit}, got {value}")
        return value

    return count


def select(tasks: list[Task], ids: str | None, limit: int | None) -> list[Task]:
    if ids is not None:
        wanted = [i.strip() for i in ids.split(",") if i.strip()]
        if not wanted:
            raise ConfigError(f"--tasks {ids!r} names no task; pass task ids separated by commas")
        unknown = sorted(set(wanted) - {t.id for t in tasks})
        if unknown:
            raise ConfigError(f"--tasks: no task {', '.join(unknown)} in the suite")
        tasks = [t for t in tasks if t.id in wanted]
    return tasks[:limit] if limit else tasks


def protocol_factories(names: list[str], constrain: bool) -> dict[str, Callable]:
    """Label → factory; the prompt protocol is labelled "prompt+constrained" when its replies are constrained."""
    factories = {}
    for name in names:
        if name == "native":
            factories["native"] = NativeProtocol
        elif constrain:
            factories["prompt+constrained"] = partial(PromptProtocol, constrain=True)
        else:
            factories["prompt"] = PromptProtocol
    return factories


def describe_model(args, endpoint: Endpoint | None, env) -> dict:
    """What we know about the model, never the key."""
    if endpoint is None:
        return {"backend": "local", "model_path": args.model_path or env.get("AGENT_MODEL_PATH")}
    return {"backend": "openai-compatible", "base_url": endpoint.base_url or DEFAULT_BASE_URL,
            "model": endpoint.model}


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def write_json(path: str, data: dict) -> None:
    """Written atomically, so a reader never sees half a file."""
    atomic_write(Path(path), json.dumps(data, ensure_ascii=False, indent=2) + "\n")
