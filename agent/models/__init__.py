"""The model interface every backend implements, and a scripted model for tests and demos."""
from __future__ import annotations

import json
from collections import deque
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, runtime_checkable


@dataclass
class Reply:
    """One model reply, in the shape of an OpenAI chat completion choice.

    ``tool_calls`` holds OpenAI-format dicts:
    ``{"id": "call_1", "type": "function", "function": {"name": ..., "arguments": "<json text>"}}``.
    ``usage`` is ``{"prompt_tokens": int, "completion_tokens": int}`` or None when the
    backend did not report it.
    """

    content: str | None = None
    tool_calls: list[dict] = field(default_factory=list)
    finish_reason: str | None = "stop"
    usage: dict | None = None


def tool_call(id: str, name: str, arguments) -> dict:
    """One tool call in OpenAI format; arguments that are not JSON text yet are encoded."""
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    return {"id": id, "type": "function", "function": {"name": name, "arguments": arguments}}


class ModelError(Exception):
    """The model backend failed for good (after its own retries); ends the run. ``status`` is the HTTP status
    the endpoint answered with, when it answered with an error status."""

    def __init__(self, message: str = "", status: int | None = None):
        super().__init__(message)
        self.status = status


class RequestRejected(ModelError):
    """The endpoint refused the request as it was made (HTTP 400, 422, ...): a parameter it does not support."""

    def __init__(self, message: str, reason: str = ""):
        super().__init__(message)
        self.reason = reason  # the server's own words


class Model(Protocol):
    def complete(self, messages: list[dict], **options: Any) -> Reply: ...


class StreamingModel(Model, Protocol):
    def stream(self, messages: list[dict], on_text: Callable[[str], None], **options: Any) -> Reply:
        """As ``complete``, the same Reply, calling ``on_text`` with each piece of its content as it arrives."""
        ...


@runtime_checkable
class RelayingModel(Model, Protocol):
    def relay(self, request: dict) -> tuple[str, Generator[bytes, None, None]]:
        """A chat completions request passed on as it is (`agent serve`'s requests without tools): the answer's
        content type, and its body piece by piece."""
        ...


class ScriptedModel:
    """Replays queued replies in order and records every call; for tests and offline demos.

    A queued item may be a ``Reply``, a plain string (the reply's content) or an
    exception instance (raised instead of replying).
    """

    def __init__(self, replies=()):
        self.replies = deque(replies)
        self.calls: list[dict] = []

    def complete(self, messages: list[dict], **options: Any) -> Reply:
        self.calls.append({"messages": list(messages), "options": options})  # the loop never edits a sent message
        if not self.replies:
            raise ModelError("scripted model: no replies left")
        item = self.replies.popleft()
        if isinstance(item, BaseException):
            raise item
        if isinstance(item, str):
            return Reply(content=item)
        return item

    def stream(self, messages: list[dict], on_text: Callable[[str], None], **options: Any) -> Reply:
        """As ``complete``, giving the reply's content to ``on_text`` a few characters at a time first."""
        reply = self.complete(messages, **options)
        content = reply.content or ""
        for start in range(0, len(content), 3):
            on_text(content[start:start + 3])
        return reply
