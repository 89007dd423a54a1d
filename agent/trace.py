"""A run's events and where they go: the JSONL trace (one event per line, written and flushed as it happens), and
the small sinks a caller combines (``ignore``, ``fan_out``, ``describing``)."""
from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Callable

from agent.text import scrub

Emit = Callable[..., None]  # emit(event, **data): what hears a run's events


def ignore(event: str, **data) -> None:
    """An emit that hears nothing."""


def timestamp() -> str:
    """Now, in ISO 8601 (UTC, to the millisecond): how the trace and the run log write times."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


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
        record = {"event": event, "time": timestamp(), **data}
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


def fan_out(*listeners: Emit) -> Emit:
    """One ``emit`` that passes every event to each listener in turn."""

    def emit(event: str, **data) -> None:
        for listener in listeners:
            listener(event, **data)

    return emit


def describing(listener: Emit, info: Callable[[], dict]) -> Emit:
    """``listener``, with what ``info()`` says of the run (the model, its endpoint, ...) added to each
    ``run_start`` event: what the loop does not know, told by whoever built the model."""

    def emit(event: str, **data) -> None:
        listener(event, **({**data, **info()} if event == "run_start" else data))

    return emit
