"""`agent logs`: the runs kept in the run log, newest first; `agent logs show ID`: one run with its transcript."""
from __future__ import annotations

import json
import sys
from collections import Counter

from agent.cli.arguments import Parser, positive_int
from agent.cli.environment import environment, logs_dir
from agent.config import ConfigError
from agent.runlog import KEEP_RUNS, LOG_FILE, LogError, one, recent
from agent.text import for_terminal, plural, scrub
from agent.tools.text import shorten

LIST_LIMIT = 20
TASK_WIDTH = 60
MAX_ID = 2**63 - 1


def logs_parser() -> Parser:
    parser = Parser(prog="agent logs", description="List the runs logged so far, newest first, or show one "
                                                   "(show ID) with its transcript.",
                    epilog="Every `agent TASK` run and every `agent chat` turn is logged, unless --no-log, in "
                           "AGENT_LOGS_DIR (default: the logs folder under your data folder); the newest "
                           f"{KEEP_RUNS} runs are kept.")
    parser.add_argument("words", nargs="*", metavar="show ID", help="show the run ID with its events")
    parser.add_argument("-n", "--limit", type=positive_int, default=LIST_LIMIT, metavar="N",
                        help=f"list the newest N runs, default {LIST_LIMIT}")
    parser.add_argument("--json", action="store_true", help="print the list, or the run and its events, as JSON")
    return parser


def logs_command(argv: list[str]) -> int:
    parser = logs_parser()
    args = parser.parse_args(argv)
    run_id = None
    if args.words:
        if len(args.words) != 2 or args.words[0] != "show" or not args.words[1].isdigit():
            parser.error(f"unknown words {' '.join(args.words)!r}; use `agent logs` or `agent logs show ID` "
                         "(ID a number from the list)")
        run_id = int(args.words[1])
        if run_id > MAX_ID:  # more than SQLite can hold: no such run
            raise ConfigError(f"no run {run_id} in the run log; `agent logs` lists the runs it keeps")
    path = logs_dir(environment()) / LOG_FILE
    try:
        run = one(path, run_id) if run_id is not None else None
        runs = recent(path, args.limit) if run_id is None else []
    except LogError as error:
        raise ConfigError(str(error)) from error
    if run_id is not None:
        if run is None:
            raise ConfigError(f"no run {run_id} in the run log {path}; `agent logs` lists the runs it keeps")
        print(json.dumps(run, ensure_ascii=False, indent=2) if args.json else "\n".join(show_run(run)))
    elif args.json:
        print(json.dumps(runs, ensure_ascii=False, indent=2))
    elif runs:
        print("\n".join(table(runs)))
    else:
        print(f"agent: no runs logged yet in {path}; every `agent TASK` and `agent chat` turn is logged there "
              "(unless --no-log)", file=sys.stderr)
    return 0


def table(runs: list[dict]) -> list[str]:
    rows = [("ID", "STARTED (UTC)", "STATUS", "STEPS", "TOKENS", "SECONDS", "MODEL", "TASK")]
    rows += [(str(r["id"]), r["started"][:19].replace("T", " "), r["status"], count(r["steps"]),
              "-" if r["prompt_tokens"] is None else f"{r['prompt_tokens']}+{r['completion_tokens']}",
              "-" if r["seconds"] is None else f"{r['seconds']:.1f}", shown(r["model"] or "-"),
              one_line(r["task"] or "", TASK_WIDTH)) for r in runs]
    widths = [max(len(row[i]) for row in rows) for i in range(7)]
    right = {0, 3, 4, 5}
    return ["  ".join(cell.rjust(w) if i in right else cell.ljust(w) for i, (cell, w) in enumerate(zip(row, widths)))
            + "  " + row[7] for row in rows]


def count(value) -> str:
    return "-" if value is None else str(value)


def show_run(run: dict) -> list[str]:
    """The run as text: what it was, how it ended, then its transcript, one event after another."""
    settings = [f"{run['protocol'] or '?'} protocol",
                "temperature not set" if run["temperature"] is None else f"temperature {run['temperature']:g}",
                "constrained" if run["constrained"] else "not constrained"]
    where = f" at {run['base_url']}" if run["base_url"] else ""
    lines = [f"run {run['id']} · {run['status']} · started {run['started']}"
             + (f" · {run['seconds']:.1f}s" if run["seconds"] is not None else ""),
             f"model: {shown(run['model'] or '?')}{where} ({', '.join(settings)})"]
    if run["session"]:
        lines.append(f"session: {shown(run['session'])}")
    lines.append(f"task: {indented(run['task'] or '')}")
    if run["answer"] is not None:
        lines.append(f"answer: {indented(run['answer'])}")
    if run["error"]:
        lines.append(f"error: {indented(run['error'])}")
    if run["model_calls"] is not None:
        lines.append(f"{plural(run['steps'], 'step')} · {plural(run['model_calls'], 'model call')} · "
                     f"{plural(run['reasks'], 're-ask')} · {run['prompt_tokens']} prompt + "
                     f"{run['completion_tokens']} completion tokens")
    lines += ["", "transcript:"]
    results = Counter(key(e) for e in run["events"] if innermost(e)["event"] == "tool_result")
    for event in run["events"]:
        if innermost(event)["event"] == "tool_call" and results[key(event)]:  # its result says it all
            results[key(event)] -= 1
            continue
        head, body = describe(event)
        lines.append(f"  {event['time'][11:23]}  {shown(head)}")
        lines += [f"      {line}" for line in shown(body).splitlines()] if body else []
    return lines


def innermost(event: dict) -> dict:
    """The event itself, or the helper's event a `subagent` event carries (a helper's helper's, ...)."""
    while event.get("event") == "subagent" and isinstance(event.get("inner"), dict):
        event = event["inner"]
    return event


def key(event: dict) -> str:
    """Which call of which agent a tool_call or tool_result event is about."""
    helpers = []
    while event.get("event") == "subagent" and isinstance(event.get("inner"), dict):
        helpers.append(event.get("agent"))
        event = event["inner"]
    return json.dumps([helpers, event.get("tool"), event.get("arguments")], sort_keys=True, default=str)


def describe(event: dict, prefix: str = "") -> tuple[str, str]:
    """One event as a heading and a body (maybe empty) for the transcript."""
    kind, data = event["event"], {k: v for k, v in event.items() if k not in ("event", "time")}
    if kind == "model_call":
        usage = data.get("usage") or {}
        tokens = f", {usage.get('prompt_tokens')} + {usage.get('completion_tokens')} tokens" if usage else ""
        body = data.get("content") or ""
        if data.get("tool_calls"):
            body += ("\n" if body else "") + json.dumps(data["tool_calls"], ensure_ascii=False)
        return f"{prefix}model replied ({data.get('seconds', 0):.1f}s{tokens}, {data.get('finish_reason')})", body
    if kind == "tool_call":
        return f"{prefix}calls {call(data)}", ""
    if kind == "tool_result":
        return f"{prefix}{call(data)} → {'ok' if data.get('ok') else 'error'}", str(data.get("result", ""))
    if kind == "parse_error":
        return f"{prefix}re-ask ({data.get('kind')})", str(data.get("message", ""))
    if kind == "second_look":
        return f"{prefix}second look at the answer", str(data.get("note", ""))
    if kind == "final":
        return f"{prefix}final answer", str(data.get("answer", ""))
    if kind == "run_end":
        return f"{prefix}run ended: {data.get('status')}", str(data.get("error") or "")
    if kind == "run_start":
        return f"{prefix}run started: {one_line(str(data.get('task', '')), TASK_WIDTH)}", ""
    if kind == "plan":
        from agent.tools.plan import checklist

        return f"{prefix}plan", checklist(data.get("todos") or [])
    if kind == "subagent" and isinstance(data.get("inner"), dict):
        return describe(data["inner"], f"{prefix}[helper {data.get('agent')}] ")
    return f"{prefix}{kind}: {one_line(json.dumps(data, ensure_ascii=False), 100)}", ""


def call(data: dict) -> str:
    arguments = data["arguments"] if isinstance(data.get("arguments"), dict) else {}
    return f"{data.get('tool')}({', '.join(f'{k}={json.dumps(v, ensure_ascii=False)}' for k, v in arguments.items())})"


def shown(text: str) -> str:
    """As `agent` prints an answer: escapes instead of control sequences on a terminal."""
    return for_terminal(text) if sys.stdout.isatty() else scrub(text)


def indented(text: str) -> str:
    return shown(text).replace("\n", "\n  ")


def one_line(text: str, width: int) -> str:
    return shorten(shown(" ".join(text.split())), width)
