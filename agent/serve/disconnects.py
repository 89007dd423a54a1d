"""A client that leaves before its answer: noticed (the ASGI ``http.disconnect`` message), and the upstream work
for it stopped at the upstream's next piece of answer. The upstream's response is then closed, which it sees as
its own client leaving (a server that watches its clients stops generating); no call or re-ask starts after."""
from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Generator
from contextlib import closing
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from agent.models import Model, ModelError, Reply

T = TypeVar("T")


class ClientGone(Exception):
    """The client disconnected: raised in the worker thread doing its upstream work, to stop it."""


class Cancellable:
    """A model whose calls stop once ``gone`` is set: each is made as a stream (when the model can stream), so
    that it can be dropped at its next piece, and none starts after."""

    def __init__(self, model: Model, gone: threading.Event):
        self.model, self.gone = model, gone

    def complete(self, messages: list[dict], **options: Any) -> Reply:
        self.check()
        if not hasattr(self.model, "stream"):
            return self.model.complete(messages, **options)
        return self.model.stream(messages, lambda text: self.check(), **options)

    def check(self) -> None:
        if self.gone.is_set():
            raise ClientGone()


async def while_connected(receive: Callable, work: Callable[..., T], *args: Any) -> T:
    """``work(*args, gone)`` in a worker thread, while the client's messages are watched: ``gone`` (an Event) is set
    when it disconnects, for ``work`` to stop at its next check (raising ClientGone). Call once the body is read."""
    gone = threading.Event()

    async def watch() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        gone.set()

    watching = asyncio.ensure_future(watch())  # a task of its own, not a task group: 4 us against 75 us a request
    try:
        return await anyio.to_thread.run_sync(work, *args, gone)  # type: ignore[arg-type]  # gone comes last
    finally:
        watching.cancel()


def gathered(pieces: Generator[bytes, None, None], gone: threading.Event) -> bytes:
    """A relayed answer's pieces joined; once ``gone`` is set, the upstream's response is closed instead."""
    body = bytearray()
    with closing(pieces):
        for piece in pieces:
            if gone.is_set():
                raise ClientGone()
            body += piece
    return bytes(body)


async def relayed(first: bytes, pieces: Generator[bytes, None, None],
                  failed: Callable[[ModelError], bytes]) -> AsyncIterator[bytes]:
    """A relayed stream's pieces as they come (each read in a worker thread); when the client leaves (the response
    is cancelled, or its sending fails), the upstream's response is closed at once after the piece being read. A
    failure of the upstream once the answer has begun ends it with ``failed(error)``."""
    with closing(pieces):
        yield first
        while True:
            try:
                piece = await anyio.to_thread.run_sync(next, pieces, None)
            except ModelError as error:
                yield failed(error)
                return
            if piece is None:
                return
            yield piece
