"""`agent eval`: run a task suite in one or more arms (prompt, prompt-constrained, native) on the same model,
interleaved, and compare them side by side, with paired statistics; `--out` JSON, `--html` a report."""
from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from agent.cli import EXIT_CODES
from agent.cli.arguments import Parser, check_output_file, positive_int
from agent.cli.environment import environment
from agent.cli.eval_progress import Bar, Lines
from agent.cli.setup import ARMS, PROTOCOLS, add_model_options, choose_endpoint, resolve
from agent.cli.servers import add_mcp_options, config_approval, open_servers
from agent.config import ConfigError
from agent.evaluation.reports import comparison_rows, comparisons, render_table, summarize, table_rows
from agent.evaluation.runner import run_eval
from agent.evaluation.bfcl import INSTALL, PREFIX
from agent.evaluation.suites import BUILTIN, Task, load_suite, sample
from agent.text import plural
from agent.tools import builtin_registry
from agent.tools.files import atomic_write

ALL_MODEL_ERRORS = 3
BELOW_MIN_PASS = 4  # like a run without the answer asked for
MAX_REPEAT = 1000
MAX_WORKERS = 64


def eval_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="agent eval", description="Run a task suite in each arm on the same model, interleaved, and compare "
                                       "them with paired statistics.")
    parser.add_argument("suite", nargs="?", help="a JSONL task suite, or bfcl:CATEGORY,... for the Berkeley Function "
                                              "Calling Leaderboard's items (docs/bfcl.md); default: the built-in one")
    parser.add_argument("--arm", action="append", choices=ARMS,
                        help="an arm to run: prompt (JSON actions in the text), prompt-constrained (the same, "
                             "replies constrained by the action schema), native (the API's tool calls); repeat "
                             "to compare")
    parser.add_argument("--protocol", action="append", choices=(*PROTOCOLS, "auto"),
                        help="the older spelling: prompt (prompt-constrained with --constrain, and for the local "
                             "model), native, or auto (what `agent probe` recommends); default, with no --arm "
                             "either: prompt and native")
    parser.add_argument("--reprobe", action="store_true", help="with --protocol auto: probe the endpoint again")
    parser.add_argument("--repeat", type=at_most(MAX_REPEAT), default=1, metavar="N",
                        help=f"runs per task, default 1, at most {MAX_REPEAT}")
    parser.add_argument("--workers", type=at_most(MAX_WORKERS), metavar="K",
                        help=f"runs at once, at most {MAX_WORKERS}; default 4 for an endpoint, 1 for the local model "
                             "(it runs one call at a time, and reuses the prompt it has just read)")
    parser.add_argument("--limit", type=positive_int, metavar="N", help="only the first N tasks")
    parser.add_argument("--tasks", metavar="ID,ID", help="only these tasks")
    parser.add_argument("--sample", type=positive_int, metavar="N",
                        help="N tasks of each category (all of a smaller one), chosen by --seed: the same seed picks "
                             "the same tasks, and a larger N keeps them; before --tasks and --limit")
    parser.add_argument("--seed", type=int, default=0, metavar="S", help="the seed of --sample, default 0")
    parser.add_argument("--bfcl-data", metavar="PATH",
                        help="with a bfcl: suite, BFCL's data from a bfcl-eval wheel or folder; default: the "
                             f"installed package ({INSTALL})")
    parser.add_argument("--release-test-set", action="store_true",
                        help="with a bfcl: suite, allow BFCL's live categories: the project's release test set, for "
                             "the checks before a release, never for work on the prompt")
    parser.add_argument("--out", metavar="FILE", help="write every run and the summary as JSON (an existing file "
                                                      "only with --force)")
    parser.add_argument("--force", action="store_true", help="let --out and --html overwrite files that exist")
    parser.add_argument("--html", metavar="FILE", help="write a report page: the tables, a chart of pass rates by "
                                                       "arm and category, every run with its transcript")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    parser.add_argument("--quiet", action="store_true",
                        help="no progress on stderr (a bar on a terminal, a line per run otherwise)")
    parser.add_argument("--list", action="store_true", help="list the suite's tasks (id, category, task) and stop")
    parser.add_argument("--min-pass", type=percentage, metavar="PERCENT",
                        help="exit 4 when an arm passes fewer than this share of its runs (for CI)")
    add_mcp_options(parser)
    add_model_options(parser)
    return parser


def percentage(text: str) -> float:
    value = float(text.rstrip("%"))
    if not 0 <= value <= 100:
        raise argparse.ArgumentTypeError(f"must be a percentage from 0 to 100, got {text}")
    return value


def at_most(limit: int) -> Callable[[str], int]:
    def count(text: str) -> int:
        value = positive_int(text)
        if value > limit:
            raise argparse.ArgumentTypeError(f"must be at most {limit}, got {value}")
        return value

    return count


def eval_command(argv: list[str]) -> int:
    args = eval_parser().parse_args(argv)
    if args.suite and os.path.exists(args.suite) and not os.path.isfile(args.suite):
        raise ConfigError(f"suite {args.suite!r} is not a regular file (a folder, a device or a FIFO); pass a JSONL "
                          "file")
    env = environment()
    for flag, path in (("--out", args.out), ("--html", args.html)):
        if path is not None:
            check_output_file(path, flag, "results file" if flag == "--out" else "report", force=args.force)
    builtin = set(builtin_registry(".").names)
    with open_servers(args, env, builtin, config_approval(False), quiet=args.quiet) as servers:
        return evaluate(args, env, builtin, servers)


def evaluate(args, env, builtin: set[str], servers) -> int:
    """The eval, its tasks checked against the built-in tools and the MCP servers' (offered besides them)."""
    tasks, source = suite_tasks(args, builtin | {t.name for t in servers.tools})
    tasks = select(tasks, args.tasks, args.limit)
    if args.list:
        for task in tasks:
            print(f"{task.id}\t{task.category or '-'}\t{' '.join(task.task.split())}")
        return 0
    protocols = list(dict.fromkeys(args.protocol or ([] if args.arm else PROTOCOLS)))
    endpoint = choose_endpoint(args, env)
    arms = [auto_arm(args, env, endpoint)] if "auto" in protocols else []
    arms += args.arm or []
    args.workers = args.workers or (1 if endpoint is None else 4)
    setup = resolve(args, env, [p for p in protocols if p != "auto"], list(dict.fromkeys(arms)), endpoint=endpoint)
    labels, workers, started = list(setup.protocols), args.workers, now()
    total = len(tasks) * len(labels) * args.repeat
    if not args.quiet:
        notes = [source] if source != (args.suite or BUILTIN) else []
        notes += [f"{args.sample} per category, seed {args.seed}"] if args.sample else []
        drawn = f" ({'; '.join(notes)})" if notes else ""
        print(f"agent eval: {plural(len(tasks), 'task')}{drawn} × {plural(len(labels), 'arm')} ({', '.join(labels)}) × "
              f"{plural(args.repeat, 'repeat')} = {plural(total, 'run')}, {plural(workers, 'worker')}",
              file=sys.stderr)
    progress = None if args.quiet else Bar(sys.stderr, labels) if sys.stderr.isatty() else Lines(
        sys.stderr, labels, [t.id for t in tasks])
    try:
        evaluation = run_eval(tasks, setup.protocols, setup.model, setup.settings, repeat=args.repeat,
                              workers=workers, on_done=progress, extra_tools=servers.tools)
    finally:
        if progress:
            progress.close()
    summary = summarize(evaluation.runs, labels)
    paired = comparisons(evaluation.runs, labels)
    if evaluation.interrupted:
        print(f"agent eval: interrupted; {len(evaluation.runs)} of {total} runs finished", file=sys.stderr)
    print(render_table(table_rows(summary), args.markdown))
    if paired:
        print()
        print(render_table(comparison_rows(paired), args.markdown))
    results = {
        "suite": args.suite or BUILTIN, "source": source, "model": setup.describe(), "started": started,
        "finished": now(),
        "settings": {**asdict(setup.settings), "constrain": setup.constrain, "repeat": args.repeat,
                     "sample": args.sample, "seed": args.seed if args.sample else None,
                     "workers": workers, "protocols": labels, "arms": labels,
                     "mcp": {s.spec.name: [s.spec.command, *s.spec.args] for s in servers.servers}},
        "interrupted": evaluation.interrupted, "runs": evaluation.runs, "summary": summary, "comparisons": paired}
    if args.out:
        write_json(args.out, results)
    if args.html:
        from agent.evaluation.html_report import render_html

        atomic_write(Path(args.html), render_html(results, {t.id: t.task for t in tasks}))
    if evaluation.interrupted:
        return EXIT_CODES["interrupted"]
    if evaluation.runs and all(r["status"] == "model_error" for r in evaluation.runs):
        print("agent eval: every run failed with a model error; is the endpoint up? "
              f"First error: {evaluation.runs[0]['error']}", file=sys.stderr)
        return ALL_MODEL_ERRORS
    below = [f"{label} passed {100 * s['passed'] / s['runs']:.1f}%" for label, s in summary.items()
             if args.min_pass is not None and s["runs"] and 100 * s["passed"] / s["runs"] < args.min_pass]
    if below:
        print(f"agent eval: below --min-pass {args.min_pass:g}%: {'; '.join(below)}", file=sys.stderr)
        return BELOW_MIN_PASS
    return 0


def suite_tasks(args, tool_names: set[str]) -> tuple[list[Task], str]:
    """The suite's tasks (--sample of them, if given) and where they came from: a file, the built-in suite, or
    BFCL's data (the installed bfcl-eval, a wheel or a folder)."""
    if args.suite and args.suite.startswith(PREFIX):
        from agent.evaluation.bfcl import load_bfcl

        benchmark = load_bfcl(args.suite[len(PREFIX):], args.bfcl_data, args.release_test_set, args.sample, args.seed)
        if benchmark.left_out and not args.quiet:
            left = ", ".join(f"{n} of {category}" for category, n in benchmark.left_out.items())
            print(f"agent eval: left out the BFCL items that offer no function ({left})", file=sys.stderr)
        return benchmark.tasks, benchmark.source
    for flag, given in (("--bfcl-data", args.bfcl_data), ("--release-test-set", args.release_test_set)):
        if given:
            raise ConfigError(f"{flag} goes with a {PREFIX} suite, e.g. `agent eval {PREFIX}simple_python {flag}"
                              f"{' PATH' if flag == '--bfcl-data' else ''}`")
    tasks = load_suite(args.suite, tool_names)
    return (sample(tasks, args.sample, args.seed) if args.sample else tasks), args.suite or BUILTIN


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


def auto_arm(args, env, endpoint) -> str:
    from agent.cli.probe import auto_arm as recommended

    return recommended(args, env, endpoint)


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def write_json(path: str, data: dict) -> None:
    """Written atomically, so a reader never sees half a file."""
    atomic_write(Path(path), json.dumps(data, ensure_ascii=False, indent=2) + "\n")
