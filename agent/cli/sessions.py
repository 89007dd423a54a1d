"""`agent sessions`: the saved conversations (name, turns, last used, model); `agent sessions rm NAME`. And
what `agent --session` and `agent chat` share: opening a session to resume, and the model's name to record."""
from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

from agent.cli.arguments import Parser
from agent.cli.environment import environment, sessions_dir
from agent.config import Environment

if TYPE_CHECKING:  # imported when a session is used: `agent --help` stays quick
    from agent.sessions import Session, Sessions


def sessions_parser() -> Parser:
    parser = Parser(prog="agent sessions", description="List the saved sessions, or remove one (rm NAME).",
                    epilog="A session is kept by `agent --session NAME` and `agent chat --session NAME`, in "
                           "AGENT_SESSIONS_DIR (default: the sessions folder under your data folder).")
    parser.add_argument("words", nargs="*", metavar="rm NAME", help="remove the session NAME")
    parser.add_argument("--json", action="store_true", help="print the list as JSON")
    return parser


def sessions_command(argv: list[str]) -> int:
    parser = sessions_parser()
    args = parser.parse_args(argv)
    from agent.sessions import Session, Sessions

    sessions = Sessions(sessions_dir(environment()))
    if args.words:
        if len(args.words) != 2 or args.words[0] != "rm":
            parser.error(f"unknown words {' '.join(args.words)!r}; use `agent sessions` or `agent sessions rm NAME`")
        sessions.remove(args.words[1])
        print(f"agent: removed session {args.words[1]}", file=sys.stderr)
        return 0
    found = sessions.all()
    if args.json:
        print(json.dumps([{"name": name, "turns": s.turns, "last_used": s.updated, "model": s.model,
                           "protocol": s.protocol} if isinstance(s, Session) else {"name": name, "error": str(s)}
                          for name, s in found], ensure_ascii=False, indent=2))
    elif found:
        rows = [("NAME", "TURNS", "LAST USED", "MODEL")]
        rows += [(name, str(s.turns), s.updated, s.model) if isinstance(s, Session) else
                 (name, "-", "unreadable", str(s).split(": ", 1)[-1]) for name, s in found]
        widths = [max(len(row[i]) for row in rows) for i in range(3)]
        for row in rows:
            print(f"{row[0]:<{widths[0]}}  {row[1]:>{widths[1]}}  {row[2]:<{widths[2]}}  {row[3]}")
    else:
        print(f"agent: no sessions in {sessions.folder} yet; `agent --session NAME TASK` or "
              "`agent chat --session NAME` starts one", file=sys.stderr)
    return 0


def open_session(name: str | None, env: Environment, protocol: str) -> tuple[Sessions, Session]:
    """The sessions folder and the session ``name`` to resume (a new one when it has none, or an unnamed one,
    which is never saved, for no name), held for this process, before any model is loaded."""
    from agent.sessions import Session, SessionError, Sessions

    sessions = Sessions(sessions_dir(env))
    if name is None:
        return sessions, Session("")
    sessions.claim(name)  # held until released (at the end of the command, or by agent chat's /save)
    try:
        session = sessions.load(name)
        if session.messages and session.protocol and session.protocol != protocol:
            raise SessionError(f"session {name!r} is held in the {session.protocol} protocol; resume it with "
                               f"--protocol {session.protocol}, or start another session")
    except SessionError:
        sessions.release(name)
        raise
    return sessions, session
