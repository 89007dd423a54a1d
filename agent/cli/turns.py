"""A turn of `agent TASK` and of `agent chat`: the options of a run, the agent equipped for them (its events' sink
made first, then the tools, the helpers and the agent, each given it once), the session saved after the turn,
and the result reported."""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from functools import partial
from typing import TYPE_CHECKING, Literal

from agent.cli.approval import approver
from agent.cli.arguments import folder
from agent.cli.environment import logs_dir
from agent.cli.servers import config_approval, open_servers
from agent.cli.setup import PROTOCOLS, resolve, url_without_secrets
from agent.cli.toolbox import builtin_names, memory_notes, toolbox
from agent.config import DEFAULT_BASE_URL, ConfigError, Endpoint, Environment
from agent.text import NOT_REPORTED, for_terminal, plural, scrub, unreported
from agent.trace import Emit

if TYPE_CHECKING:  # imported when the run starts: `agent --help` stays quick
    from agent.cli.display import AnswerStream
    from agent.cli.setup import Setup
    from agent.cli.toolbox import Toolbox
    from agent.loop import Agent, RunResult
    from agent.sessions import Session, Sessions
    from agent.trace import Trace


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """The options of a run that are neither the model's nor the tools', shared by `agent` and `agent chat`."""
    parser.add_argument("-s", "--system", default="", metavar="TEXT",
                        help="your own instructions, added to the system prompt after the protocol's")
    parser.add_argument("--protocol", choices=(*PROTOCOLS, "auto"), default="prompt",
                        help="prompt: JSON actions in the text (default); native: the API's tool calls; auto: what "
                             "`agent probe` recommends for the endpoint (probed once, then kept in the cache folder)")
    parser.add_argument("--reprobe", action="store_true", help="with --protocol auto: probe the endpoint again")
    parser.add_argument("--workspace", type=folder, default=".", metavar="DIR",
                        help="folder the file tools and run_shell work in, default .")
    parser.add_argument("--trace", metavar="FILE", help="write every event of the run as JSON lines (an existing "
                                                        "file only with --force)")
    parser.add_argument("--force", action="store_true", help="let --trace overwrite a file that exists")
    parser.add_argument("--no-log", action="store_true",
                        help="keep this run out of the run log (`agent logs`; AGENT_LOGS_DIR, default: the logs "
                             "folder under your data folder)")
    parser.add_argument("--stream", action=argparse.BooleanOptionalAction,
                        help="print the answer as the model writes it (default: off for `agent`, on for `agent chat` "
                             "on a terminal)")
    parser.add_argument("--session", metavar="NAME",
                        help="continue the conversation saved as NAME (a new one if there is none), and save it "
                             "after the turn; `agent sessions` lists them")


def settle_auto(args: argparse.Namespace, env: Environment) -> Endpoint | None | Literal[False]:
    """``--protocol auto`` replaced by the protocol it means here; the endpoint chosen for it, else False."""
    if args.protocol != "auto":
        return False
    from agent.cli.probe import settle_auto as settle

    return settle(args, env)


@dataclass(frozen=True)
class Equipped:
    """What a run or a chat works with: the agent, the setup it was made from, its tools, and what shows its
    answers as they stream in (None: each is printed whole at the end)."""

    agent: Agent
    setup: Setup
    tools: Toolbox
    display: AnswerStream | None


@contextmanager
def equipped(args: argparse.Namespace, env: Environment, endpoint: Endpoint | None | Literal[False],
             session: Session, *, quiet: bool, stream: bool) -> Iterator[Equipped]:
    """The agent of a run or a chat, for the block: the tool options checked, the model loaded, the MCP servers
    the command names started, the records of its events (the run log, --trace, the progress on stderr unless
    ``quiet``) opened; then the tools, the helpers and the agent, each made once with them. ``endpoint``: one
    already chosen (``--protocol auto``), else False; ``session``: the conversation each run_start names."""
    from agent.cli.display import AnswerStream, Heartbeat
    from agent.loop import Agent
    from agent.subagents import SubAgents

    taken = builtin_names(args)  # what is wrong with the tool options is said before anything loads
    setup = resolve(args, env, [args.protocol], endpoint=endpoint)
    with open_servers(args, env, taken, config_approval(args.yes), quiet=quiet) as servers, \
            records(args, env, setup, session, progress=not quiet) as emit:
        model = Heartbeat(setup.model) if not quiet and sys.stderr.isatty() else setup.model
        [make_protocol] = setup.protocols.values()
        helpers = partial(SubAgents, model, make_protocol=make_protocol, settings=setup.settings,
                          instructions=args.system, emit=emit)  # a helper answers in text, and is not shown
        tools = toolbox(args, approver(args.read_only, args.yes), extra=servers.tools, emit=emit, helpers=helpers)
        schema = getattr(args, "output_schema", None)  # the answer's
        protocol = make_protocol(tools.registry, **({"output_schema": schema} if schema is not None else {}))
        display = AnswerStream() if stream else None
        agent = Agent(model, tools.registry, protocol, setup.settings, emit=emit, instructions=args.system,
                      context=partial(memory_notes, tools.memory, args.memory) if tools.memory else None,
                      display=display)
        yield Equipped(agent, setup, tools, display)


@contextmanager
def records(args: argparse.Namespace, env: Environment, setup: Setup, session: Session, *,
            progress: bool) -> Iterator[Emit]:
    """What hears a run's events, for the block: the run log (unless --no-log), the --trace file, and the progress
    on stderr (with ``progress``), with what the loop does not know of the run (the model, the endpoint, the
    session's name) added to each run_start."""
    from agent.cli.display import Progress
    from agent.trace import describing, fan_out, ignore

    trace = open_trace(args.trace) if args.trace else None
    log = None
    if not args.no_log:
        from agent.runlog import LOG_FILE, RunLog

        log = RunLog(logs_dir(env) / LOG_FILE, lambda message: print(f"agent: warning: {message}", file=sys.stderr))

    base_url = url_without_secrets(setup.endpoint.base_url or DEFAULT_BASE_URL) if setup.endpoint else None

    def info() -> dict:
        return {"model": setup.label, "base_url": base_url,
                "temperature": args.temperature, "constrained": setup.constrain and args.protocol == "prompt",
                "session": session.name or None}

    # the log first: a trace that fails ends the run, and the log still hears how it ended
    shown = Progress() if progress else ignore
    try:
        yield describing(fan_out(*[r for r in (log, trace) if r], shown), info)
    finally:
        for kept in (trace, log):
            if kept:
                kept.close()


def open_trace(path: str) -> Trace:
    from agent.trace import Trace

    try:
        return Trace(path)
    except OSError as error:
        raise ConfigError(f"cannot write the trace file {path!r} ({error.strerror}); pass --trace FILE "
                          "in a folder that exists") from error


def keep(sessions: Sessions, session: Session) -> str | None:
    """Save the session; what went wrong, if it could not be saved."""
    from agent.sessions import SessionError

    try:
        sessions.save(session)
    except SessionError as error:
        return str(error)
    return None


def report(result: RunResult, args: argparse.Namespace, display: AnswerStream | None = None) -> None:
    if args.json:
        print(json.dumps(scrub(asdict(result)), ensure_ascii=False, indent=2))
    elif display and result.answer is not None and display.showed(result.answer):
        pass  # already on stdout, as it streamed in
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
