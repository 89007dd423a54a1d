"""Getting one usable reply: the model call (counted), the protocol's reading of it, and the re-asks of a reply it
cannot use, within their own budget. The loop gets each of its turns here, and `agent serve` each completion."""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass

from agent.models import Model, Reply
from agent.protocols import ActionProtocol, Final, Reask, Step
from agent.streaming import Display, Streamed
from agent.trace import Emit, ignore

COUNTS = ("model_calls", "reasks", "prompt_tokens", "completion_tokens", "usage_missing")  # what a run spends


class Stop(Exception):
    """Ends the run with a status."""

    def __init__(self, status: str, error: str | None = None):
        super().__init__(error or status)
        self.status, self.error = status, error


@dataclass(frozen=True)
class Sent:
    """The latest request: the history it held (the very list; the re-asks sent after it are not part of it), how
    many of its messages, and the prompt tokens the endpoint counted."""

    history: list[dict]
    messages: int
    tokens: int


def counted(reply: Reply, spent: Counter) -> Reply:
    """``reply``, its call and its tokens added to ``spent`` (model_calls, prompt_tokens, completion_tokens, and
    usage_missing for a call whose response reported no usage)."""
    spent["model_calls"] += 1
    if reply.usage:
        spent["prompt_tokens"] += reply.usage.get("prompt_tokens") or 0
        spent["completion_tokens"] += reply.usage.get("completion_tokens") or 0
    else:
        spent["usage_missing"] += 1
    return reply


class Replies:
    """Gets the next reply the loop can act on: calls the model, and re-asks a malformed reply until one is usable
    or too many in a row were not. The failed attempts and their re-asks are sent only until then: they never
    enter the history (the trace keeps them). Calls, tokens and re-asks are added to ``spent``, malformed replies
    to ``errors`` by kind; with a ``display``, each reply's answer is shown as the model writes it."""

    def __init__(self, model: Model, protocol: ActionProtocol, max_reasks: int, emit: Emit = ignore,
                 errors: Counter | None = None, spent: Counter | None = None, display: Display | None = None):
        self.model = Streamed(model, protocol.answer_reader, display) if display else model
        self.protocol, self.max_reasks, self.emit = protocol, max_reasks, emit
        self.errors = Counter() if errors is None else errors
        self.spent = Counter() if spent is None else spent
        self.attempts: list[dict] = []  # the unusable replies since the last usable one, with their re-asks
        self.unusable = 0  # how many replies in a row could not be used
        self.sent: Sent | None = None  # the latest request whose response reported its usage

    def next(self, history: list[dict]) -> Final | Step:
        while True:
            turn = self.protocol.parse(self._complete(history))
            if not isinstance(turn, Reask):
                self.attempts, self.unusable = [], 0
                if turn.repairs:
                    self.emit("repaired", repairs=turn.repairs)
                return turn
            self._reask(turn)

    @property
    def reasks(self) -> int:
        return self.spent["reasks"]

    def counts(self) -> dict[str, int]:
        """The model calls, re-asks and tokens so far, as RunResult counts them."""
        return {kind: self.spent[kind] for kind in COUNTS}

    def _complete(self, history: list[dict]) -> Reply:
        started = time.monotonic()
        messages = history + self.attempts if self.attempts else history
        reply = counted(self.model.complete(messages, **self.protocol.options), self.spent)
        if reply.usage:
            self.sent = Sent(history, len(history), reply.usage.get("prompt_tokens") or 0)
        self.emit("model_call", seconds=round(time.monotonic() - started, 3), usage=reply.usage,
                  content=reply.content, tool_calls=reply.tool_calls, finish_reason=reply.finish_reason)
        return reply

    def _reask(self, turn: Reask) -> None:
        self.errors[turn.kind] += 1
        self.emit("parse_error", kind=turn.kind, message=turn.problem)
        if self.unusable >= self.max_reasks:
            raise Stop("format_errors",
                       f"{self.unusable + 1} unusable replies in a row; the last one: {turn.kind}: {turn.problem}")
        self.spent["reasks"] += 1
        self.attempts += turn.messages
        self.unusable += 1
