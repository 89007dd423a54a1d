"""`agent TASK`: one run of the agent, its answer on stdout and its progress on stderr."""
from __future__ import annotations

import argparse
import os
import stat
import sys
from typing import TYPE_CHECKING, Literal, TextIO

from agent.cli import EXIT_CODES
from agent.cli.arguments import Parser, check_output_file
from agent.cli.environment import environment
from agent.cli.servers import add_mcp_options
from agent.cli.sessions import open_session
from agent.cli.setup import add_model_options
from agent.cli.toolbox import add_tool_options
from agent.cli.turns import add_run_options, equipped, keep, report, settle_auto
from agent.config import ConfigError, Endpoint, Environment

if TYPE_CHECKING:  # imported when the run starts: `agent --help` stays quick
    from agent.sessions import Session, Sessions


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


def version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("prompt-protocol-agent")
    except PackageNotFoundError:
        return "unknown (not installed)"


def read_task(words: list[str], stdin: TextIO) -> str:
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


def piped(stdin: TextIO) -> bool:
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


def run_task(args: argparse.Namespace, task: str, env: Environment, sessions: Sessions, session: Session,
             endpoint: Endpoint | None | Literal[False] = False) -> int:
    """The run `agent TASK` asks for, as the next turn of ``session`` (saved after it, if it has a name), with
    the MCP servers it names started for it; ``endpoint``: one already chosen (``--protocol auto``), else False."""
    with equipped(args, env, endpoint, session, quiet=args.quiet or args.json, stream=bool(args.stream)) as kit:
        result = kit.agent.run(task, history=session.messages)
        unsaved = None
        if session.name and result.status == "interrupted":
            print(f"agent: session {session.name} left as it was before this run (interrupted)", file=sys.stderr)
        elif session.name:
            session.add_turn(result.messages, model=kit.setup.label, protocol=args.protocol)
            unsaved = keep(sessions, session)
        report(result, args, kit.display)
    if unsaved:
        print(f"agent: {unsaved}", file=sys.stderr)
        return EXIT_CODES["error"]
    endpoint = kit.setup.endpoint
    if result.status == "model_error" and endpoint and endpoint.chosen_by:
        print(f"agent: the endpoint was chosen because {endpoint.chosen_by} is set; "
              "pass --local to use the embedded model instead", file=sys.stderr)
    return EXIT_CODES[result.status]
