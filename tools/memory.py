"""remember: notes kept in a file between runs, one dated line each, the oldest dropped past a size cap."""

from __future__ import annotations

import os
import stat
import threading
from datetime import date
from pathlib import Path
from typing import Callable

from .files import atomic_write
from .registry import Tool, ToolError, tool

MAX_CHARS = 4_000  # of the file: the oldest lines are dropped past it, and no more of it goes into a prompt
MAX_NOTE = 500  # characters of one note


class Memory:
    """A memory file: ``read()`` gives its newest notes, up to the cap; the ``remember`` tool adds one."""

    def __init__(self, path: str | os.PathLike, max_chars: int = MAX_CHARS, today: Callable[[], date] = date.today):
        self.path, self.max_chars, self.today = Path(path), max_chars, today
        self._lock = threading.Lock()  # calls of one batch run at once
        self.tool: Tool = tool(
            self.remember, name="remember", writes=True,
            description="Keep a short note for later runs (a fact, a preference, where something is); it is "
                        "added, dated, to the memory file, which the next run is shown.",
            hint="Use remember only for what a later run will need; the notes of earlier runs are shown above.")

    def read(self) -> str:
        """The newest whole lines of the file that fit the cap; empty when there is no file yet. Only a regular
        file is read (a FIFO would wait for a writer, /dev/zero never ends), and only its last bytes."""
        most = 4 * self.max_chars  # UTF-8 takes at most 4 bytes a character
        try:
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)
                raise ToolError(f"the memory file {str(self.path)!r} is not a regular file (a device, a FIFO or a "
                                "folder); use a file, like memory.md")
            with os.fdopen(fd, "rb") as file:
                size = file.seek(0, os.SEEK_END)
                file.seek(max(0, size - most))
                lines = file.read(most).decode("utf-8", errors="replace").splitlines()
        except FileNotFoundError:
            return ""
        except OSError as error:
            raise ToolError(f"cannot read the memory file: {error.strerror or error}") from None
        return _newest(lines[1:] if size > most else lines, self.max_chars)

    def remember(self, note: str) -> str:
        note = " ".join(note.split())
        if not note:
            raise ToolError("the note is empty; say what to remember")
        if len(note) > MAX_NOTE:
            raise ToolError(f"the note is {len(note):,} characters long (the limit is {MAX_NOTE}); keep it short")
        line = f"- {self.today().isoformat()}: {note}"
        with self._lock:
            kept = self.read()
            text = _newest([*kept.splitlines(), line], self.max_chars) + "\n"
            try:
                atomic_write(self.path, text)
            except OSError as error:
                raise ToolError(f"cannot write the memory file: {error.strerror or error}") from None
        dropped = len(kept.splitlines()) + 1 - len(text.splitlines())
        if dropped:
            return f"remembered: {note} ({dropped} of the oldest notes dropped to keep the file small)"
        return f"remembered: {note}"


def _newest(lines: list[str], limit: int) -> str:
    """The last lines whose total, with their newlines, fits ``limit``."""
    kept, size = [], 0
    for line in reversed(lines):
        size += len(line) + 1
        if size > limit:
            break
        kept.append(line)
    return "\n".join(reversed(kept))
