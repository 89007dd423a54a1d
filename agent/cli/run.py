"""`agent TASK`: one run of the agent, its answer on stdout and its progress on stderr."""
from __future__ import annotations

import argparse
import json
import os
import stat
import sys
from contextlib import contextmanager
from dataclasses import asdict
from functools import partial
from typing import TYPE_CHECKING, Callable, Iterator

from agent.cli import EXIT_CODES
from agent.cli.approval import approver
from agent.cli.options import (PROTOCOLS, Parser, add_model_options, add_tool_options, check_output_file, environment,
                               logs_dir, resolve, toolbox)
from agent.cli.servers import add_mcp_options, builtin_names, config_approval, offer, open_servers
from agent.cli.sessions import model_label, open_session
from agent.config import DEFAULT_BASE_URL, ConfigError, Environment
from agent.text import NOT_REPORTED, for_terminal, plural, scrub, unreported

if TYPE_CHECKING:  # imported when the run starts: `agent --help` stays quick
    from agent.cli.options import Setup, Toolbox
    from agent.loop import Agent, RunResult
    from agent.sessions import Session, Sessions
    from agent.tools import Memory
    from agent.trace import Trace


MAX_STDIN_CHARS = 200_000  # piped input beyond this is refused: it would not fit any model's context anyway


def run_parser() -> Parser:
    parser = Parser(
        prog="agent", description="Run an agent on TASK with any OpenAI-compatible chat model.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="commands:\n"
               "  agent chat              talk with the agent, turn after turn (agent chat --help)\n"
               "  agent sessions [rm N]   the saved conversations (--session NAME)\n"
               "  agent tools [--json]    the tools and their parameters\n"
               "  agent eval [SUITE]      compare the protocols on a task suite (agent eval --help)\n"
               "  agent models            the models the endpoint serves\n"
               "  agent logs [show ID]    the runs logged so far, or one with its events (agent logs --help)\n"
               "  agent probe             what the endpoint supports, and the protocol to use\n"
               "  agent serve             an OpenAI-compatible endpoint giving the model tool calling\n"
               "  agent help              this help\n\n"
               "A task that is exactly a command's name goes after --: agent -- tools\n"
               "With no TASK, the task is read from piped input; with both, the input is added to the task:\n"
               "  cat error.log | agent \"Summarise the errors\"")
    parser.add_argument("task", nargs="*", help="what the agent should do (words are joined; quoting is safest)")
    parser.add_argument("--version", action="version", version=f"agent {version()}")
    add_run_options(parser)
    parser.add_argument("--output-schema", type=schema_file, metavar="FILE",
                        help="a JSON Schema file: the answer is a JSON value valid against it (checked, and re-asked "
                             "when it is not), printed as JSON")
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--quiet", action="store_true", help="print only the answer (and errors)")
    output.add_argument("--json", action="store_true", help="print the whole result as JSON")
    add_tool_options(parser)
    add_mcp_options(parser)
    add_model_options(parser)
    return parser


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


def version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("prompt-protocol-agent")
    except PackageNotFoundError:
        return "unknown (not installed)"


def read_task(words: list[str], stdin) -> str:
    """The task: the words, piped input when there are none, or both (the input added as context); a bare
    `-` stands for the piped input too."""
    task = " ".join(w for w in words if w != "-")
    text = ""
    if "-" in words or piped(stdin):
        text = stdin.read(MAX_STDIN_CHARS + 1)
        if len(text) > MAX_STDIN_CHARS:
            raise ConfigError(f"the piped input is longer than {MAX_STDIN_CHARS:,} characters; pass a shorter "
                              "part of it (head, tail or grep first)")
    if not task.strip() and not text.strip():
        raise ConfigError('no task; say what the agent should do: agent "TASK" (or pipe it in: echo TASK | agent)')
    if not task.strip():
        return text.strip()
    return f"{task}\n\nInput:\n{text.rstrip()}" if text.strip() else task


def piped(stdin) -> bool:
    """Whether standard input is a pipe or a file (`cat log | agent ...`, `agent ... < file`); a terminal,
    /dev/null or no input at all is not read."""
    try:
        mode = os.fstat(stdin.fileno()).st_mode
    except (OSError, ValueError, AttributeError):  # no file behind it (a test's stand-in, a closed stream)
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISREG(mode)


MAX_SCHEMA_BYTES = 1_000_000  # of an --output-schema file


def schema_file(path: str) -> dict:
    """The JSON Schema in the file ``path`` (--output-schema), its $refs inlined and its size bounded as serve
    bounds a request's; what is wrong with it is a usage error."""
    from agent.parsing import ParseError, load_json
    from agent.serve.translate import RequestError, output_schema

    try:
        with open(path, "rb") as file:
            data = file.read(MAX_SCHEMA_BYTES + 1)
    except OSError as error:
        raise argparse.ArgumentTypeError(f"cannot read {path!r} ({error.strerror or error})") from None
    if len(data) > MAX_SCHEMA_BYTES:
        raise argparse.ArgumentTypeError(f"{path!r} is over {MAX_SCHEMA_BYTES:,} bytes; pass a smaller JSON Schema")
    try:
        schema = load_json(data.decode("utf-8"))
    except (UnicodeDecodeError, ParseError) as error:
        reason = error.message if isinstance(error, ParseError) else "not UTF-8 text"
        raise argparse.ArgumentTypeError(f"{path!r} is not JSON: {' '.join(reason.split())}") from None
    if not isinstance(schema, dict):
        raise argparse.ArgumentTypeError(f"{path!r} must hold a JSON Schema object, like "
                                         '{"type": "object", "properties": {...}}')
    try:
        return output_schema(schema, path)
    except RequestError as error:
        raise argparse.ArgumentTypeError(error.message) from None


def folder(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("must name a folder, like . for the current one")
    return text


def run_command(argv: list[str]) -> int:
    args = run_parser().parse_args(argv)
    if args.stream and args.json:
        raise ConfigError("--stream prints the answer as it comes and --json prints it whole at the end; drop one")
    task = read_task(args.task, sys.stdin)
    if args.trace is not None:
        check_output_file(args.trace, "--trace", "trace file", force=args.force)
    env = environment()
    endpoint = settle_auto(args, env)
    sessions, session = open_session(args.session, env, args.protocol)
    with sessions:  # a session is held until its turn is saved
        return run_task(args, task, env, sessions, session, endpoint)


def settle_auto(args, env: Environment):
    """``--protocol auto`` replaced by the protocol it means here; the endpoint chosen for it, else False."""
    if args.protocol != "auto":
        return False
    from agent.cli.probe import settle_auto as settle

    return settle(args, env)


def run_task(args, task: str, env: Environment, sessions: Sessions, session: Session, endpoint=False) -> int:
    """The run `agent TASK` asks for, as the next turn of ``session`` (saved after it, if it has a name), with
    the MCP servers it names started for it; ``endpoint``: one already chosen (``--protocol auto``), else False."""
    with equipped(args, env, endpoint, quiet=args.quiet or args.json) as (tools, setup):
        return run_turn(args, task, env, sessions, session, tools, setup)


@contextmanager
def equipped(args, env: Environment, endpoint, quiet: bool) -> Iterator[tuple[Toolbox, Setup]]:
    """The tools and the setup of a run or a chat: the tools `--tools` chooses, and those of the MCP servers
    the command names, started for the block and stopped after it."""
    tools = toolbox(args, approver(args.read_only, args.yes))
    setup = resolve(args, env, [args.protocol], endpoint=endpoint)
    with open_servers(args, env, builtin_names(tools), config_approval(args.yes), quiet=quiet) as servers:
        offer(tools, servers, args.read_only)
        yield tools, setup


def run_turn(args, task: str, env: Environment, sessions: Sessions, session: Session, tools: Toolbox,
             setup: Setup) -> int:
    display = AnswerStream() if args.stream else None
    agent = build_agent(args, setup, tools, progress=not (args.quiet or args.json), display=display)
    close_records = record(agent, args, env, setup, lambda: session.name)
    try:
        result = agent.run(task, history=session.messages)
    finally:
        close_records()
    unsaved = None
    if session.name and result.status == "interrupted":
        print(f"agent: session {session.name} left as it was before this run (interrupted)", file=sys.stderr)
    elif session.name:
        session.add_turn(result.messages, model=model_label(setup, args.local_model or env.get("AGENT_LOCAL_MODEL")),
                         protocol=args.protocol)
        unsaved = keep(sessions, session)
    report(result, args, display)
    if unsaved:
        print(f"agent: {unsaved}", file=sys.stderr)
        return EXIT_CODES["error"]
    if result.status == "model_error" and setup.endpoint and setup.endpoint.chosen_by:
        print(f"agent: the endpoint was chosen because {setup.endpoint.chosen_by} is set; "
              "pass --local to use the embedded model instead", file=sys.stderr)
    return EXIT_CODES[result.status]


def build_agent(args, setup: Setup, tools: Toolbox, *, progress: bool, display: AnswerStream | None = None) -> Agent:
    """The agent the options describe; with ``progress``, showing its tool calls and re-asks on stderr (and
    the wait for the model, on a terminal); with a ``display``, showing each answer as it streams in. Its
    ``emit`` hears the plan's changes too."""
    from agent.loop import Agent, ignore
    from agent.streaming import Streamed

    model = Heartbeat(setup.model) if progress and sys.stderr.isatty() else setup.model
    [make_protocol] = setup.protocols.values()
    schema = getattr(args, "output_schema", None)  # the answer's; a helper (spawn_agent) answers in text
    protocol = make_protocol(tools.registry, **({"output_schema": schema} if schema is not None else {}))
    agent = Agent(Streamed(model, protocol.answer_reader, display) if display else model, tools.registry, protocol,
                  setup.settings, instructions=args.system,
                  context=partial(memory_notes, tools.memory, args.memory) if tools.memory else None)
    agent.emit = Progress() if progress else ignore
    tools.plan.on_change = lambda todos: agent.emit("plan", todos=todos)
    tools.subagents.attach(model, tools.registry, make_protocol, setup.settings, instructions=args.system,
                           emit=lambda event, **data: agent.emit(event, **data))  # a helper's answer is not shown
    return agent


def record(agent: Agent, args, env: Environment, setup: Setup, session: Callable[[], str]) -> Callable[[], None]:
    """Send the agent's events to the run log (unless --no-log) and the --trace file too, with what the loop
    does not know of the run (the model, the endpoint, the session ``session()`` names) in each run_start;
    returns what closes them."""
    from agent.trace import describing, fan_out

    trace = open_trace(args.trace) if args.trace else None
    log = None
    if not args.no_log:
        from agent.runlog import LOG_FILE, RunLog

        log = RunLog(logs_dir(env) / LOG_FILE, lambda message: print(f"agent: warning: {message}", file=sys.stderr))
    local_model = args.local_model or env.get("AGENT_LOCAL_MODEL")

    def info() -> dict:
        return {"model": model_label(setup, local_model),
                "base_url": without_secrets(setup.endpoint.base_url or DEFAULT_BASE_URL) if setup.endpoint else None,
                "temperature": args.temperature, "constrained": setup.constrain and args.protocol == "prompt",
                "session": session() or None}

    # the log first: a trace that fails ends the run, and the log still hears how it ended
    agent.emit = describing(fan_out(*[r for r in (log, trace) if r], agent.emit), info)

    def close() -> None:
        for records in (trace, log):
            if records:
                records.close()

    return close


def without_secrets(url: str) -> str:
    """``url`` without what may hold a key: a user and password, a query string."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2], query="", fragment=""))


def keep(sessions: Sessions, session: Session) -> str | None:
    """Save the session; what went wrong, if it could not be saved."""
    from agent.sessions import SessionError

    try:
        sessions.save(session)
    except SessionError as error:
        return str(error)
    return None


def memory_notes(memory: Memory, path: str) -> str:
    """The memory file's notes for the system prompt, as data."""
    from agent import prompts
    from agent.tools import ToolError

    try:
        notes = memory.read() or "(none yet)"
    except ToolError as error:
        notes = f"(none: {error})"
    return prompts.render("memory", path=path, notes=notes)


def open_trace(path: str) -> Trace:
    from agent.trace import Trace

    try:
        return Trace(path)
    except OSError as error:
        raise ConfigError(f"cannot write the trace file {path!r} ({error.strerror}); pass --trace FILE "
                          "in a folder that exists") from error


def report(result: RunResult, args, display: AnswerStream | None = None) -> None:
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


class Heartbeat:
    """The model, with the seconds spent waiting for it shown on the terminal (stderr) while it thinks, until
    its answer starts to stream in."""

    def __init__(self, model, stream=None, every: float = 1.0):
        self.model, self.out, self.every = model, stream or sys.stderr, every

    def complete(self, messages, **options):
        with self._ticking():
            return self.model.complete(messages, **options)

    def stream(self, messages, on_text, **options):
        """As the model's own ``stream`` (its ``complete`` if it has none), the ticking stopped by the first text."""
        stream = getattr(self.model, "stream", None)
        with self._ticking() as stop:
            if stream is None:
                return self.model.complete(messages, **options)

            def first(text: str) -> None:
                stop()
                on_text(text)

            return stream(messages, first, **options)

    @contextmanager
    def _ticking(self):
        """Ticks until the block ends or calls the function it is given; then erases the line it wrote."""
        import threading
        import time

        done, started = threading.Event(), time.monotonic()

        def tick() -> None:
            while not done.wait(self.every):
                self.out.write(f"\r  waiting for the model… {time.monotonic() - started:.0f}s")
                self.out.flush()

        def stop() -> None:
            if done.is_set():
                return
            done.set()
            ticker.join()
            if time.monotonic() - started >= self.every:
                self.out.write("\r\033[K")  # erase the line before the next output
                self.out.flush()

        ticker = threading.Thread(target=tick, daemon=True)
        ticker.start()
        try:
            yield stop
        finally:
            stop()


class AnswerStream:
    """Shows each reply's answer on stdout as the model writes it (escaped as the answer would be, on a
    terminal), and ends the line of a reply that showed some."""

    def __init__(self, out=None):
        self.out = out or sys.stdout
        self.shown: list[str] = []  # what the latest reply showed

    def start(self) -> None:
        self.shown = []

    def show(self, text: str) -> None:
        if text:
            self.out.write(for_terminal(text) if self.out.isatty() else scrub(text))
            self.out.flush()
            self.shown.append(text)

    def end(self) -> None:
        if self.shown:
            self.out.write("\n")
            self.out.flush()

    def showed(self, answer: str) -> bool:
        """Whether the latest reply showed exactly ``answer``: then it needs no printing."""
        return bool(self.shown) and scrub("".join(self.shown)) == scrub(answer)


class Progress:
    """Prints one line per tool call, re-ask and compaction on stderr; a call that wrote the plan, with the plan
    below it; a helper's (spawn_agent's) lines under the line that starts it. Lines from calls run at once
    never mix."""

    def __init__(self):
        import threading

        self.plan: list[str] = []  # the plan todo_write has just written, shown with its call's line
        self.lock = threading.Lock()

    def __call__(self, event: str, indent: str = "  ", **data) -> None:
        if event == "subagent":
            inner = dict(data["inner"])
            if inner["event"] == "run_start":
                self.say(f"{indent}spawn_agent [{data['agent']}]: {short(inner['task'], 70)}")
            elif inner["event"] in ("tool_result", "parse_error", "compaction"):
                self(inner.pop("event"), indent=f"{indent}  ↳ [{data['agent']}] ", **inner)
        elif event == "plan":
            from agent.tools.plan import checklist

            self.plan = checklist(data["todos"]).splitlines()
        elif event == "tool_result":
            args = ", ".join(f"{k}={short(v, 40)}" for k, v in data["arguments"].items())
            lines = [data["result"]]
            if data["tool"] == "todo_write" and data["ok"] and self.plan:
                lines, self.plan = self.plan, []
            self.say(f"{indent}{data['tool']}({args}) → {short(lines[0], 70)}",
                     *(f"    {for_terminal(line)}" for line in lines[1:]))
        elif event == "parse_error":
            self.say(f"{indent}re-ask ({data['kind']}): {short(data['message'], 70)}")
        elif event == "compaction":
            requests = data.get("requests", 1)
            how = f"in {plural(requests, 'request')}" if requests else "without a request (all were short)"
            self.say(f"{indent}compacted: {plural(data['summarised'], 'older message')} summarised {how} "
                     f"(about {data['tokens_before']:,} → {data['tokens_after']:,} tokens)")
        elif event == "compaction_failed":
            self.say(f"{indent}not compacted: {data['reason']}")

    def say(self, *lines: str) -> None:
        with self.lock:
            sys.stderr.write("".join(f"{line}\n" for line in lines))
            sys.stderr.flush()


def short(value, width: int) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = for_terminal(" ".join(text.split()))
    return text if len(text) <= width else text[: width - 1] + "…"
