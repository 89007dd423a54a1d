"""A JSONL trace of a run: one event per line, written and flushed as it happens."""
from __future__ import annotations

import json
import time
from typing import Callable

from agent.text import scrub


class TraceError(Exception):
    """The trace file could not be written; ends the run, since it would no longer be recorded."""


class Trace:
    def __init__(self, path):
        self.path = path
        self.file = open(path, "w", encoding="utf-8")
        self.failed: OSError | None = None

    def __call__(self, event: str, **data) -> None:
        if self.failed:
            return
        record = {"event": event, "time": round(time.time(), 3), **data}
        try:
            self.file.write(json.dumps(scrub(record), ensure_ascii=False, default=str) + "\n")
            self.file.flush()
        except OSError as error:
            self.failed = error
            raise TraceError(f"cannot write the trace file {self.path} ({error.strerror or error}); "
                             "free some space or pass --trace FILE elsewhere") from error

    def close(self) -> None:
        try:
            self.file.close()
        except OSError as error:  # flushing what was buffered failed: the write already said so, or say it now
            self.failed = self.failed or error

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def fan_out(*listeners: Callable[..., None]) -> Callable[..., None]:
    """One ``emit`` that passes every event to each listener in turn."""

    def emit(event: str, **data) -> None:
        for listener in listeners:
            listener(event, **data)

    return emit
