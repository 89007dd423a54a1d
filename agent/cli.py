"""The command line: the one place that reads the environment and puts the pieces together."""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
from dataclasses import asdict
from pathlib import Path

from typing import TYPE_CHECKING

from agent.config import ConfigError, Endpoint, Environment, resolve_endpoint
from agent.text import for_terminal, scrub

if TYPE_CHECKING:  # the rest is imported when a command runs, so Ctrl-C at start-up is handled like any other
    from agent.loop import RunResult, Settings
    from agent.trace import Trace

EXIT_CODES = {"final": 0, "model_error": 3, "step_limit": 4, "format_errors": 4, "loop": 4, "error": 4,
              "interrupted": 130}
USAGE_ERROR = 2
LOCAL_HISTORY_CHARS = 18_000  # about 6,000 tokens: leaves room in the local model's 8,192 for the reply


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    for stream in (sys.stdout, sys.stderr):  # text that cannot be encoded is shown replaced, not a crash
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="replace")
    try:
        if argv[:1] == ["tools"]:
            return tools_command(argv[1:])
        if argv[:1] == ["eval"]:
            from agent.evaluation import eval_command
            return eval_command(argv[1:])
        return run_command(argv)
    except ConfigError as error:
        print(f"agent: {error}", file=sys.stderr)
        return USAGE_ERROR
    except KeyboardInterrupt:
        print("agent: interrupted", file=sys.stderr)
        return EXIT_CODES["interrupted"]


def add_model_options(parser: argparse.ArgumentParser) -> None:
    """Options that choose and tune the model and the protocol, shared by `agent` and `agent eval`."""
    group = parser.add_argument_group("model")
    group.add_argument("--base-url", help="OpenAI-compatible endpoint (env AGENT_BASE_URL, OPENAI_BASE_URL)")
    group.add_argument("--api-key", help="API key (env AGENT_API_KEY, OPENAI_API_KEY); not needed for local servers")
    group.add_argument("--model", help="model name (env AGENT_MODEL)")
    group.add_argument("--timeout", type=positive_float, default=60.0, metavar="SECONDS",
                       help="for a whole request, default 60")
    group.add_argument("--temperature", type=temperature, help="sent only when given")
    group.add_argument("--local", action="store_true",
                       help="use the embedded local model (the `local` extra); implied by --local-model and --model-path")
    group.add_argument("--model-path", help="a GGUF file for the local model (env AGENT_MODEL_PATH)")
    from agent.models.local_files import BUILT_IN
    group.add_argument("--local-model", choices=BUILT_IN,
                       help="the built-in local model: coder-1.5b (default; the `local` extra, 1.1 GB) or small "
                            "(the `local-small` extra, 491 MB) (env AGENT_LOCAL_MODEL); --model-path overrides it")
    group.add_argument("--constrain", action=argparse.BooleanOptionalAction,
                       help="constrain replies to the action schema (prompt protocol): sent as response_format "
                            "to servers, a grammar for the local model; default: on for the local model only")
    limits = parser.add_argument_group("limits")
    limits.add_argument("--max-steps", type=positive_int, default=15, metavar="N", help="tool steps, default 15")
    limits.add_argument("--max-reasks", type=positive_int, default=3, metavar="N",
                        help="malformed replies in a row before giving up, default 3")
    limits.add_argument("--max-output", type=positive_int, default=4000, metavar="CHARS",
                        help="tool output kept per call, default 4000")
    limits.add_argument("--max-history", type=positive_int, metavar="CHARS",
                        help="drop the oldest tool results beyond this many characters of conversation; "
                             f"default: {LOCAL_HISTORY_CHARS} for the local model, no limit for endpoints")


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def positive_float(text: str) -> float:
    value = float(text)
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a number of seconds more than 0, got {text}")
    return value


def temperature(text: str) -> float:
    value = float(text)
    if not (0 <= value <= 2):
        raise argparse.ArgumentTypeError(f"must be a number from 0 to 2, got {text}")
    return value


def folder(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("must name a folder, like . for the current one")
    return text


def run_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agent", description="Run an agent on TASK with any OpenAI-compatible chat model.",
        epilog="Other commands: `agent tools` lists the tools; `agent eval --help` compares protocols.")
    parser.add_argument("task", help="what the agent should do")
    parser.add_argument("--protocol", choices=["prompt", "native"], default="prompt",
                        help="prompt: JSON actions in the text (default); native: the API's tool calls")
    parser.add_argument("--workspace", type=folder, default=".", metavar="DIR",
                        help="folder the file tools may use, default .")
    parser.add_argument("--trace", metavar="FILE", help="write every event of the run as JSON lines")
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--quiet", action="store_true", help="print only the answer (and errors)")
    output.add_argument("--json", action="store_true", help="print the whole result as JSON")
    add_model_options(parser)
    return parser


def run_command(argv: list[str]) -> int:
    args = run_parser().parse_args(argv)
    if not args.task.strip():
        raise ConfigError("the task is empty; say what the agent should do: agent \"TASK\"")
    if args.trace is not None:
        check_output_file(args.trace, "--trace", "trace file")
    env = environment()
    registry = builtin_tools(args.workspace)
    endpoint = choose_endpoint(args, env)
    local = endpoint is None
    from agent.loop import Agent
    from agent.trace import fan_out

    agent = Agent(build_model(args, endpoint, env), registry,
                  build_protocol(args.protocol, registry, args, local), settings_from(args, local))
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


def check_output_file(path: str, flag: str, what: str) -> None:
    """Before anything is loaded or run: an output flag (--trace, eval --out) names a file in a folder that exists."""
    target = Path(path)
    if not path.strip():
        raise ConfigError(f"{flag} is empty, which is not a file name; pass {flag} FILE")
    if target.is_dir() or path.endswith(("/", "\\")):
        raise ConfigError(f"{flag} {path!r} is not a file name: it is a folder; pass {flag} FILE")
    if not target.resolve().parent.is_dir():
        raise ConfigError(f"cannot write the {what} {path!r}: the folder {str(target.parent)!r} does not exist; "
                          f"pass {flag} FILE in a folder that exists")


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
    tokens = (f"{r.prompt_tokens} prompt + {r.completion_tokens} completion tokens"
              if r.usage_missing == 0 else
              "tokens not reported" if r.usage_missing == r.model_calls else
              f"{r.prompt_tokens} prompt + {r.completion_tokens} completion tokens "
              f"({r.usage_missing} calls unreported)")
    return (f"{r.status} · {plural(r.steps, 'step')} · {plural(r.model_calls, 'model call')} · "
            f"{plural(r.reasks, 're-ask')} · {tokens} · {r.seconds:.1f}s")


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


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


def tools_command(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="agent tools", description="List the tools and their parameters.")
    parser.add_argument("--json", action="store_true", help="print the native tool specs as JSON")
    args = parser.parse_args(argv)
    registry = builtin_tools(".")
    print(json.dumps(registry.openai_tools(), indent=2) if args.json else registry.describe())
    return 0


def environment() -> Environment:
    """The process environment, and ./.env beneath it (read, never loaded into the process)."""
    from dotenv import dotenv_values

    path = Path.cwd() / ".env"
    try:
        values = dotenv_values(path) if path.is_file() else {}
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"cannot read {path} ({error}); fix or remove the file") from error
    return Environment(os.environ, values)


def builtin_tools(workspace: str):
    from agent.tools import builtin_registry

    if not Path(workspace).is_dir():
        raise ConfigError(f"workspace {workspace!r} is not a folder; pass --workspace DIR")
    return builtin_registry(workspace)


def settings_from(args, local: bool) -> Settings:
    from agent.loop import Settings

    history = args.max_history or (LOCAL_HISTORY_CHARS if local else None)
    return Settings(max_steps=args.max_steps, max_reasks=args.max_reasks, max_output_chars=args.max_output,
                    max_history_chars=history)


def constrained(args, local: bool) -> bool:
    """--constrain or --no-constrain as given; by default on for the local model only."""
    return args.constrain if args.constrain is not None else local


def build_protocol(name: str, registry, args, local: bool):
    from agent.protocols import NativeProtocol, PromptProtocol

    if name == "native":
        if args.constrain:
            raise ConfigError("--constrain applies to the prompt protocol only; drop it or use --protocol prompt")
        return NativeProtocol(registry)
    return PromptProtocol(registry, constrain=constrained(args, local))


def choose_endpoint(args, env) -> Endpoint | None:
    """The endpoint the flags and the environment name; None means the embedded local model."""
    if args.local or args.local_model or args.model_path:  # naming a local model is asking for one
        return None
    endpoint = resolve_endpoint(env, args.base_url, args.api_key, args.model)
    if endpoint and endpoint.note:
        print(f"agent: note: {endpoint.note}", file=sys.stderr)
    return endpoint


def build_model(args, endpoint: Endpoint | None, env):
    """The OpenAI-compatible model for ``endpoint``; the embedded local model when there is none."""
    if endpoint is None:
        from agent.models.local import load_local_model
        from agent.models.local_files import cache_dir

        return load_local_model(args.model_path or env.get("AGENT_MODEL_PATH"), temperature=args.temperature,
                                local_model=args.local_model or env.get("AGENT_LOCAL_MODEL"), cache=cache_dir(env))
    from agent.models.openai_compatible import OpenAIModel

    return OpenAIModel(endpoint.model, base_url=endpoint.base_url, api_key=endpoint.api_key,
                       timeout=args.timeout, temperature=args.temperature)
