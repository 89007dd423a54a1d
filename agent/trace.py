"""A JSONL trace of a run: one event per line, written and flushed as it happens."""
from __future__ import annotations

import json
import time
from typing import Callable


class Trace:
    def __init__(self, path):
        self.file = open(path, "w", encoding="utf-8")

    def __call__(self, event: str, **data) -> None:
        record = {"event": event, "time": round(time.time(), 3), **data}
        self.file.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
        self.file.flush()

    def close(self) -> None:
        self.file.close()

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
