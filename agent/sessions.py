"""Saved conversations: one plain JSON file per session, the history in the OpenAI message format, written
atomically after every turn. A file that cannot be read, or that a newer version wrote, is never overwritten."""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from agent.config import ConfigError
from agent.text import scrub
from agent.tools.files import atomic_write

FORMAT = 1  # the version of the file's shape this code writes and reads
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class SessionError(ConfigError):
    """A session cannot be used as asked; the message says what to do."""


@dataclass
class Session:
    """One conversation: ``messages`` start with the system prompt of its latest turn."""

    name: str
    messages: list[dict] = field(default_factory=list)
    turns: int = 0
    model: str = ""
    protocol: str = ""
    created: str = ""
    updated: str = ""  # ISO 8601, when the latest turn was saved

    def add_turn(self, messages: list[dict], *, model: str, protocol: str) -> None:
        """The conversation as a finished turn left it."""
        self.messages, self.model, self.protocol = messages, model, protocol
        self.turns += 1

    def to_json(self) -> dict:
        return {"format": FORMAT, "name": self.name, "model": self.model, "protocol": self.protocol,
                "created": self.created, "updated": self.updated, "turns": self.turns, "messages": self.messages}


class Sessions:
    """The sessions folder (made, for the user only, when the first session is used); as a context manager,
    the sessions claimed in it are released at the end."""

    def __init__(self, folder: str | os.PathLike):
        self.folder = Path(folder)
        self.held: dict[str, int] = {}  # the sessions this process holds, and their lock files

    def path(self, name: str) -> Path:
        if not _NAME.fullmatch(name):
            raise SessionError(f"{name!r} is not a session name; use letters, digits, '.', '_' and '-' (up to 64, "
                               "starting with a letter or digit)")
        return self.folder / f"{name}.json"

    def claim(self, name: str) -> None:
        """Hold session ``name`` for this process, until ``release(name)`` or the process ends: two agents
        writing one session in turn would each lose the other's turns. Refused when another holds it. (An
        advisory lock on Unix; elsewhere, nothing is held.)"""
        path = self.path(name)
        try:
            import fcntl
        except ImportError:
            return
        if name in self.held:
            return
        try:
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            handle = os.open(path.with_name(f".{name}.lock"), os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as error:
            raise SessionError(f"cannot use the sessions folder {self.folder} ({error.strerror or error}); "
                               "set AGENT_SESSIONS_DIR to a folder you can write") from error
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(handle)
            raise SessionError(f"session {name!r} is in use by another agent; wait until it is done, or use "
                               "another name") from None
        self.held[name] = handle

    def release(self, name: str) -> None:
        handle = self.held.pop(name, None)
        if handle is not None:
            os.close(handle)

    def __enter__(self) -> Sessions:
        return self

    def __exit__(self, *exc) -> None:
        """Release every session held."""
        for name in list(self.held):
            self.release(name)

    def exists(self, name: str) -> bool:
        return self.path(name).is_file()

    def load(self, name: str) -> Session:
        """The session saved as ``name``; a new, empty one when there is none."""
        path = self.path(name)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return Session(name)
        except (OSError, UnicodeDecodeError) as error:
            raise SessionError(f"cannot read session {name!r} ({path}: {error}); fix or remove the file") from error
        return _parse(name, path, text)

    def save(self, session: Session) -> None:
        """Write the session as it now stands, stamped with the time."""
        now = datetime.now(timezone.utc).astimezone().isoformat(timespec="seconds")
        session.created, session.updated = session.created or now, now
        self.write(session)

    def write(self, session: Session) -> None:
        path = self.path(session.name)
        try:
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            text = json.dumps(scrub(session.to_json()), ensure_ascii=False, indent=1)
            atomic_write(path, text + "\n", mode=0o600)  # a conversation may hold anything the user typed
        except OSError as error:
            raise SessionError(f"cannot save session {session.name!r} to {path} "
                               f"({error.strerror or error}); free some space or set AGENT_SESSIONS_DIR") from error

    def remove(self, name: str) -> None:
        held = name in self.held
        if self.exists(name):
            self.claim(name)
        try:
            self.path(name).unlink()
        except FileNotFoundError:
            raise SessionError(f"no session named {name!r}; `agent sessions` lists them") from None
        except OSError as error:
            raise SessionError(f"cannot remove session {name!r} ({error.strerror or error})") from error
        finally:
            if not held:
                self.release(name)

    def all(self) -> list[tuple[str, Session | SessionError]]:
        """Every session in the folder by name, the latest used first; one that cannot be read, with its error."""
        found: list[tuple[str, Session | SessionError]] = []
        for path in self.folder.glob("*.json") if self.folder.is_dir() else []:
            if _NAME.fullmatch(path.stem):
                try:
                    found.append((path.stem, self.load(path.stem)))
                except SessionError as error:
                    found.append((path.stem, error))
        return sorted(found, key=lambda item: (getattr(item[1], "updated", ""), item[0]), reverse=True)


_MESSAGE = {"type": "object", "required": ["role"], "properties": {
    "role": {"enum": ["system", "user", "assistant", "tool"]}, "content": {"type": ["string", "null"]},
    "tool_calls": {"type": "array"}, "tool_call_id": {"type": "string"}}}
SCHEMA = {"type": "object", "required": ["format", "model", "protocol", "created", "updated", "turns", "messages"],
          "properties": {"format": {"type": "integer"}, "model": {"type": "string"}, "protocol": {"type": "string"},
                         "created": {"type": "string"}, "updated": {"type": "string"},
                         "turns": {"type": "integer", "minimum": 0}, "messages": {"type": "array", "items": _MESSAGE}}}


def _parse(name: str, path: Path, text: str) -> Session:
    import jsonschema

    def broken(why: str) -> SessionError:
        return SessionError(f"session {name!r} cannot be read: {why} ({path}); it is left as it is: fix or "
                            f"remove it (agent sessions rm {name})")

    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        raise broken("the file is not JSON") from None
    if not isinstance(data, dict) or not isinstance(data.get("format"), int):
        raise broken("it has no format version")
    if data["format"] > FORMAT:
        raise SessionError(f"session {name!r} was saved by a newer version of agent (format {data['format']}; "
                           f"this one reads format {FORMAT}); upgrade agent to resume it ({path})")
    fault = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(SCHEMA).iter_errors(data))
    if fault is not None:
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in fault.absolute_path).lstrip(".")
        raise broken(f"{where or 'the file'}: {fault.message[:120]}")
    return Session(name, data["messages"], data["turns"], data["model"], data["protocol"], data["created"],
                   data["updated"])
