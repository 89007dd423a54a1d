"""`agent TASK`: one run of the agent, its answer on stdout and its progress on stderr."""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from typing import TYPE_CHECKING

from agent.cli import EXIT_CODES
from agent.cli.options import PROTOCOLS, add_model_options, builtin_tools, check_output_file, environment, resolve
from agent.config import ConfigError
from agent.text import NOT_REPORTED, for_terminal, plural, scrub, unreported

if TYPE_CHECKING:  # imported when the run starts: `agent --help` stays quick
    from agent.loop import RunResult
    from agent.trace import Trace


def run_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agent", description="Run an agent on TASK with any OpenAI-compatible chat model.",
        epilog="Other commands: `agent tools` lists the tools; `agent eval --help` compares protocols.")
    parser.add_argument("task", help="what the agent should do")
    parser.add_argument("--protocol", choices=PROTOCOLS, default="prompt",
                        help="prompt: JSON actions in the text (default); native: the API's tool calls")
    parser.add_argument("--workspace", type=folder, default=".", metavar="DIR",
                        help="folder the file tools may use, default .")
    parser.add_argument("--trace", metavar="FILE", help="write every event of the run as JSON lines")
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--quiet", action="store_true", help="print only the answer (and errors)")
    output.add_argument("--json", action="store_true", help="print the whole result as JSON")
    add_model_options(parser)
    return parser


def folder(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("must name a folder, like . for the current one")
    return text


def run_command(argv: list[str]) -> int:
    args = run_parser().parse_args(argv)
    if not args.task.strip():
        raise ConfigError("the task is empty; say what the agent should do: agent \"TASK\"")
    if args.trace is not None:
        check_output_file(args.trace, "--trace", "trace file")
    env = environment()
    registry = builtin_tools(args.workspace)
    setup = resolve(args, env, [args.protocol])
    [make_protocol] = setup.protocols.values()
    from agent.loop import Agent
    from agent.trace import fan_out

    agent = Agent(setup.model, registry, make_protocol(registry), setup.settings)
    listeners = [] if args.quiet or args.json else [Progress()]
    trace = open_trace(args.trace) if args.trace else None
    agent.emit = fan_out(*([trace] if trace else []), *listeners)
    try:
        result = agent.run(args.task)
    finally:
        if trace:
            trace.close()
    report(result, args)
    return EXIT_CODES[result.status]


def open_trace(path: str) -> Trace:
    from agent.trace import Trace

    try:
        return Trace(path)
    except OSError as error:
        raise ConfigError(f"cannot write the trace file {path!r} ({error.strerror}); pass --trace FILE "
                          "in a folder that exists") from error


def report(result: RunResult, args) -> None:
    if args.json:
        print(json.dumps(scrub(asdict(result)), ensure_ascii=False, indent=2))
    elif result.answer is not None:  # also when the run failed after answering (its trace could not be written)
        print(for_terminal(result.answer) if sys.stdout.isatty() else scrub(result.answer))
    if result.status != "final":
        print(f"agent: {result.status}: {for_terminal(result.error or 'no reason recorded')}", file=sys.stderr)
    if not (args.quiet or args.json):
        print(summary_line(result), file=sys.stderr)


def summary_line(r: RunResult) -> str:
    tokens, missing = (f"{r.prompt_tokens} prompt + {r.completion_tokens} completion tokens",
                       unreported(r.usage_missing, r.model_calls))
    if missing:
        tokens = f"tokens {missing}" if missing == NOT_REPORTED else f"{tokens} ({missing})"
    return (f"{r.status} · {plural(r.steps, 'step')} · {plural(r.model_calls, 'model call')} · "
            f"{plural(r.reasks, 're-ask')} · {tokens} · {r.seconds:.1f}s")


class Progress:
    """Prints one line per tool call and per re-ask on stderr."""

    def __call__(self, event: str, **data) -> None:
        if event == "tool_result":
            args = ", ".join(f"{k}={short(v, 40)}" for k, v in data["arguments"].items())
            print(f"  {data['tool']}({args}) → {short(data['result'], 70)}", file=sys.stderr)
        elif event == "parse_error":
            print(f"  re-ask ({data['kind']}): {short(data['message'], 70)}", file=sys.stderr)


def short(value, width: int) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = for_terminal(" ".join(text.split()))
    return text if len(text) <= width else text[: width - 1] + "…"
