"""`agent chat`: a conversation with the agent, turn after turn, on the same loop and options as `agent TASK`.
Answers go to stdout, everything else to stderr; Ctrl-C stops the turn being run, not the chat."""
from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from agent.cli import signals
from agent.cli.arguments import Parser, check_output_file
from agent.cli.environment import data_dir, environment
from agent.cli.servers import add_mcp_options
from agent.cli.sessions import open_session
from agent.cli.setup import add_model_options
from agent.cli.toolbox import Toolbox, add_tool_options
from agent.cli.turns import add_run_options, equipped, keep, report, settle_auto
from agent.config import Endpoint, Environment
from agent.text import plural

if TYPE_CHECKING:
    from agent.cli.display import AnswerStream
    from agent.loop import Agent
    from agent.sessions import Session, Sessions

HELP = """commands:
  /help         this help
  /tools        the tools the model is offered
  /reset        forget the conversation and start a new one (a session is saved empty)
  /save NAME    save the conversation as session NAME, and keep saving it there after every turn
  /exit         leave (Ctrl-D too)
Ctrl-C stops the turn being run; the conversation stays as it was before that turn."""
PROMPT = "> "
HISTORY_LINES = 1000  # typed lines kept between chats (with readline)


def chat_parser() -> Parser:
    parser = Parser(prog="agent chat", formatter_class=argparse.RawDescriptionHelpFormatter,
                    description="Talk with the agent: each line you type is a task, answered with the conversation "
                                "so far in mind.", epilog=HELP)
    add_run_options(parser)
    parser.add_argument("--quiet", action="store_true", help="print only the answers (and errors)")
    parser.set_defaults(json=False)
    add_tool_options(parser)
    add_mcp_options(parser)
    add_model_options(parser)
    return parser


def chat_command(argv: list[str]) -> int:
    args = chat_parser().parse_args(argv)
    if args.trace is not None:
        check_output_file(args.trace, "--trace", "trace file", force=args.force)
    env = environment()
    endpoint = settle_auto(args, env)
    sessions, session = open_session(args.session, env, args.protocol)
    with sessions:  # a session is held while the chat goes on
        return chat(args, env, sessions, session, endpoint)


def chat(args: argparse.Namespace, env: Environment, sessions: Sessions, session: Session,
         endpoint: Endpoint | None | Literal[False] = False) -> int:
    """The chat, with the MCP servers it names started once for all its turns (each a run of its own, logged as
    one, under the session's name as it is then)."""
    stream = sys.stdout.isatty() if args.stream is None else args.stream
    with equipped(args, env, endpoint, session, quiet=args.quiet, stream=stream) as kit:
        label = kit.setup.label
        talk = Chat(kit.agent, kit.tools, sessions, session, args, model=label, display=kit.display)
        if not args.quiet:
            resumed = f"; session {session.name}, {plural(session.turns, 'turn')} so far" if session.name else ""
            print(f"agent chat with {label} ({args.protocol} protocol){resumed}; /help for commands", file=sys.stderr)
        save_history = line_editing(data_dir(env.process) / "chat_history")
        try:
            talk.run(read_line)
        finally:
            save_history()
    return 0


class Chat:
    """The conversation (kept in a Session, saved after every turn when it has a name) and what a line does."""

    def __init__(self, agent: Agent, tools: Toolbox, sessions: Sessions, session: Session, args: argparse.Namespace, *,
                 model: str, display: AnswerStream | None = None):
        self.agent, self.tools, self.sessions, self.session, self.args = agent, tools, sessions, session, args
        self.model, self.display = model, display

    def run(self, read: Callable[[str], str]) -> None:
        """Read and act on lines until /exit or the end of the input."""
        while True:
            try:
                line = read(PROMPT).strip()
            except EOFError:
                return
            except KeyboardInterrupt:  # at the prompt: a fresh prompt, as in a shell
                signals.raise_if_terminated()
                print(file=sys.stderr)
                continue
            try:
                if line.startswith("/") and not self.command(line):
                    return
                if line and not line.startswith("/"):
                    self.turn(line)
            except KeyboardInterrupt:  # after the turn ran (while it was shown or saved): the chat goes on
                signals.raise_if_terminated()
                print("agent: interrupted", file=sys.stderr)
            signals.raise_if_terminated()  # a turn that was stopped by SIGTERM

    def turn(self, task: str) -> None:
        result = self.agent.run(task, history=self.session.messages)
        if result.status == "interrupted":
            print("agent: interrupted; the conversation is as it was before this turn", file=sys.stderr)
            return
        self.session.add_turn(result.messages, model=self.model, protocol=self.args.protocol)
        unsaved = keep(self.sessions, self.session) if self.session.name else None
        report(result, self.args, self.display)
        sys.stdout.flush()
        if unsaved:
            print(f"agent: {unsaved}", file=sys.stderr)

    def command(self, line: str) -> bool:
        """Act on a /command; False when it ends the chat."""
        from agent.sessions import SessionError

        word, _, rest = line.partition(" ")
        rest = rest.strip()
        if word in ("/exit", "/quit"):
            return False
        if word == "/help":
            print(HELP, file=sys.stderr)
        elif word == "/tools":
            print(f"on: {', '.join(self.tools.registry.names) or 'none'}", file=sys.stderr)
            if self.tools.off:
                print(f"off: {', '.join(f'{n} ({why})' for n, why in self.tools.off.items())}", file=sys.stderr)
        elif word == "/reset":
            self.session.messages, self.session.turns = [], 0
            unsaved = keep(self.sessions, self.session) if self.session.name else None
            saved = f" (session {self.session.name} is saved empty)" if self.session.name else ""
            print(f"agent: {unsaved}" if unsaved else f"agent: a new conversation{saved}", file=sys.stderr)
        elif word == "/save" and rest:
            try:
                self.sessions.path(rest)  # the name is checked before anything is changed
                if rest != self.session.name and self.sessions.exists(rest):
                    raise SessionError(f"a session named {rest!r} exists already; choose another name, or remove "
                                       f"it first (agent sessions rm {rest})")
                self.sessions.claim(rest)
            except SessionError as error:
                print(f"agent: {error}", file=sys.stderr)
                return True
            if rest != self.session.name:
                self.sessions.release(self.session.name)
                self.session.name, self.session.created = rest, ""
            unsaved = keep(self.sessions, self.session)
            print(f"agent: {unsaved}" if unsaved else f"agent: saved as session {rest} "
                  f"({plural(self.session.turns, 'turn')}); every turn from now on is saved there too", file=sys.stderr)
        else:
            print(f"agent: {'/save needs a NAME' if word == '/save' else f'unknown command {word}'}; "
                  "/help lists the commands", file=sys.stderr)
        return True


def read_line(prompt: str) -> str:
    """A line typed at the prompt (readline's line editing when the terminal is stdin and stdout); the prompt
    goes to stderr when stdout is not the terminal, and is not shown when the input is not one."""
    if sys.stdin.isatty() and sys.stdout.isatty():
        return input(prompt)
    if sys.stdin.isatty():
        sys.stderr.write(prompt)
        sys.stderr.flush()
    return input()


def line_editing(history_file: Path) -> Callable[[], None]:
    """Readline's line editing, with the lines typed in earlier chats, when readline is there and the input is a
    terminal; returns what saves the lines (for the user only) at the end."""
    try:
        import readline
    except ImportError:  # no readline (Windows): plain input
        return lambda: None
    if not sys.stdin.isatty():
        return lambda: None
    try:
        readline.read_history_file(history_file)
    except OSError:
        pass
    readline.set_history_length(HISTORY_LINES)

    def save() -> None:
        try:
            history_file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            readline.write_history_file(history_file)
            os.chmod(history_file, 0o600)
        except OSError:
            pass

    return save
