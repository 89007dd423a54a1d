"""The HTTP connections `agent serve` takes, as uvicorn's httptools protocol with four bounds it lacks: a
request's headers must arrive within a deadline (uvicorn times out only the idle time between requests, so a
connection that sent nothing, or half its headers, stayed open), they may take at most MAX_HEADER_BYTES, a client
that stops reading its answer for as long is cut off (the answer, and a relayed upstream stream, waited on it),
and a connection beyond ``max_connections`` is answered 503 and closed at once (uvicorn's ``limit_concurrency``
answers 503 only once a request's headers are in, and counts the connection asking: give it one more)."""
from __future__ import annotations

import asyncio
import json

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

MAX_HEADER_BYTES = 64 * 1024  # of one request's line and headers


class BoundedHttp(HttpToolsProtocol):
    """uvicorn's HttpToolsProtocol, given ``header_timeout`` (seconds) and ``max_connections`` by
    ``functools.partial``, as uvicorn's ``http`` setting."""

    def __init__(self, *args, header_timeout: float, max_connections: int, **kwargs):
        super().__init__(*args, **kwargs)
        self.header_timeout, self.max_connections = header_timeout, max_connections
        self.header_timer: asyncio.TimerHandle | None = None
        self.header_bytes: int | None = None  # of the request whose headers are arriving; None between requests
        self.write_timer: asyncio.TimerHandle | None = None  # while the client reads nothing of what is sent

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]  # as uvicorn's
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:
            self.refuse(503, f"agent serve has {self.max_connections} connections open, the most it takes; try "
                             "again in a moment")
            return
        self.await_headers()

    def data_received(self, data: bytes) -> None:
        if self.header_bytes is not None:
            self.header_bytes += len(data)
        super().data_received(data)
        if self.header_bytes is not None and self.header_bytes > MAX_HEADER_BYTES:
            self.refuse(431, f"the request's headers are over {MAX_HEADER_BYTES:,} bytes")

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.await_headers()

    def on_headers_complete(self) -> None:
        self.stop_waiting()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self.stop_waiting()
        if self.write_timer is not None:
            self.write_timer.cancel()
        super().connection_lost(exc)

    def pause_writing(self) -> None:
        super().pause_writing()
        if self.write_timer is None:
            self.write_timer = self.loop.call_later(self.header_timeout, self.transport.abort)

    def resume_writing(self) -> None:
        if self.write_timer is not None:
            self.write_timer.cancel()
            self.write_timer = None
        super().resume_writing()

    def await_headers(self) -> None:
        if self.header_timer is None:
            self.header_bytes = 0
            self.header_timer = self.loop.call_later(self.header_timeout, self.headers_late)

    def stop_waiting(self) -> None:
        if self.header_timer is not None:
            self.header_timer.cancel()
        self.header_timer, self.header_bytes = None, None

    def headers_late(self) -> None:
        self.header_timer = None
        self.refuse(408, f"no complete request headers within {self.header_timeout:g} s; send them at once")

    def refuse(self, status: int, message: str) -> None:
        """Answer ``status`` with an OpenAI-style error, and close the connection."""
        self.stop_waiting()
        if self.transport.is_closing():
            return
        body = json.dumps({"error": {"message": message, "type": "invalid_request_error", "param": None,
                                     "code": status}}).encode()
        reason = {408: "Request Timeout", 431: "Request Header Fields Too Large", 503: "Service Unavailable"}[status]
        self.transport.write(f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: "
                             f"{len(body)}\r\nconnection: close\r\n\r\n".encode() + body)
        self.transport.close()
