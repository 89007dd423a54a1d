"""The conversations of the latest responses, for a Responses request's ``previous_response_id``: kept in memory
(lost when serve stops), at most a number of them and a total size, the oldest dropped first."""
from __future__ import annotations

import json
import threading
from collections import OrderedDict

MAX_RESPONSES = 1000  # responses kept
MAX_CHARS = 32_000_000  # their conversations' size together, as JSON


class Stored:
    """Conversations by response id, as chat messages (kept as JSON text: what is given out is a fresh copy)."""

    def __init__(self, most: int = MAX_RESPONSES, chars: int = MAX_CHARS):
        self.most, self.chars = most, chars
        self._kept: OrderedDict[str, str] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def put(self, response_id: str, messages: list[dict]) -> None:
        text = json.dumps(messages, ensure_ascii=False)
        if len(text) > self.chars:
            return  # larger than all that is kept: its id will be answered as not kept
        with self._lock:
            self._kept[response_id] = text
            self._size += len(text)
            while len(self._kept) > self.most or self._size > self.chars:
                _, dropped = self._kept.popitem(last=False)
                self._size -= len(dropped)

    def get(self, response_id: str) -> list[dict] | None:
        with self._lock:
            text = self._kept.get(response_id)
            if text is not None:
                self._kept.move_to_end(response_id)
        return None if text is None else json.loads(text)
