"""`agent serve` started as a child process for the tests, in front of a scripted upstream."""
from __future__ import annotations

import asyncio
import json
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.openai_server import ScriptedServer
from tests.support import child_env, stop

LISTENING = re.compile(r"listening on (http://\S+/v1)")


@contextmanager
def serving(*args: str, env: dict | None = None):
    """`agent serve ARGS --port 0`, until the block ends; yields (base URL, the process, its stderr so far)."""
    with tempfile.TemporaryFile("w+") as stderr:
        child = subprocess.Popen([sys.executable, "-m", "agent", "serve", "--port", "0", *args],
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
                                 env=child_env(**(env or {})), text=True)
        try:
            url, deadline = None, time.monotonic() + 30
            while url is None:
                stderr.seek(0)
                found = LISTENING.search(stderr.read())
                if found:
                    url = found.group(1)
                elif child.poll() is not None or time.monotonic() > deadline:
                    stderr.seek(0)
                    raise RuntimeError(f"agent serve did not start: {stderr.read()}")
                else:
                    time.sleep(0.05)

            def said() -> str:
                stderr.seek(0)
                return stderr.read()

            yield url, child, said
        finally:
            stop(child)


def serve_fixtures(*args: str):
    """The fixtures of a test file of `agent serve`: ``upstream`` (a scripted server) and ``served`` (serve in front
    of it, started with ``args``; its base URL and stderr), both for the module; ``up``, the upstream with nothing
    queued or recorded (and every queued reply used by the test's end); ``client``, an openai SDK client of serve.
    Assign them to the same names in the test file."""

    @pytest.fixture(scope="module")
    def upstream():
        with ScriptedServer() as scripted:
            yield scripted

    @pytest.fixture(scope="module")
    def served(upstream):
        with serving("--upstream-url", upstream.url, "--model", "up-model", *args) as (url, _, said):
            yield url, said

    @pytest.fixture
    def up(upstream):
        upstream._steps.clear()
        upstream.requests.clear()
        yield upstream
        assert not upstream.pending, "a queued upstream reply was not used"

    @pytest.fixture
    def client(served):
        import openai

        return openai.OpenAI(base_url=served[0], api_key="unused", max_retries=0, timeout=20)

    return upstream, served, up, client


def canned(body: dict, answer: str | dict) -> tuple[str, bytes]:
    """A chat completion answering ``body`` (its content type and bytes): ``answer`` as the content, or, as a dict
    (``{"name", "arguments"}``), as a tool call. JSON, or with ``"stream": true`` server-sent events as OpenAI
    sends them, a few characters an event (a token or so each), then the usage and [DONE]."""
    head = {"id": "chatcmpl-canned", "created": 0, "model": body.get("model", "m")}
    text = answer if isinstance(answer, str) else json.dumps(answer["arguments"])
    usage = {"prompt_tokens": 10, "completion_tokens": len(text) // 4 + 1, "total_tokens": 11 + len(text) // 4}
    call = {"id": "call_canned", "type": "function", "function": {"name": answer["name"], "arguments": text}} \
        if isinstance(answer, dict) else None
    finish = "tool_calls" if call else "stop"
    if body.get("stream") is not True:
        message = {"role": "assistant", "content": None, "tool_calls": [call]} if call else \
            {"role": "assistant", "content": text}
        return "application/json", json.dumps({**head, "object": "chat.completion", "choices": [{
            "index": 0, "message": message, "finish_reason": finish}], "usage": usage}).encode()

    def chunk(delta: dict, finish: str | None = None) -> str:
        return "data: " + json.dumps({**head, "object": "chat.completion.chunk", "choices": [
            {"index": 0, "delta": delta, "finish_reason": finish}]}) + "\n\n"

    events = [chunk({"role": "assistant", "content": None if call else ""})]
    if call:
        events.append(chunk({"tool_calls": [{"index": 0, "id": call["id"], "type": "function",
                                             "function": {"name": answer["name"], "arguments": ""}}]}))
    events += [chunk({"tool_calls": [{"index": 0, "function": {"arguments": text[at:at + 4]}}]} if call else
                     {"content": text[at:at + 4]}) for at in range(0, len(text), 4)]
    events.append(chunk({}, finish))
    if (body.get("stream_options") or {}).get("include_usage"):
        events.append("data: " + json.dumps({**head, "object": "chat.completion.chunk", "choices": [],
                                             "usage": usage}) + "\n\n")
    return "text/event-stream", "".join(events + ["data: [DONE]\n\n"]).encode()


class InstantUpstream:
    """An upstream that answers every chat completions request at once, each answer in one write on a connection
    kept open (asyncio, in a thread): what serve's own cost is measured against. ``answer(body)`` gives the
    content for a request's decoded body. A context manager; ``url`` is its base URL."""

    def __init__(self, answer, answers_per_connection: int | None = None, close_at_once: bool = False):
        """``answers_per_connection``: after so many answers, a connection's next request closes it unanswered (as
        a server whose keep-alive time ran out as it came), or with ``close_at_once`` the last answer does (on Linux,
        the close sent with the answer)."""
        self.answer, self.url, self.most, self.close_at_once = answer, "", answers_per_connection, close_at_once
        self.connections = 0  # made to it so far
        self.loop = asyncio.new_event_loop()

    def __enter__(self) -> InstantUpstream:
        server = self.loop.run_until_complete(self.loop.create_server(lambda: _Instant(self), "127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()


class _Instant(asyncio.Protocol):
    answers: dict = {}  # the bytes of each answer made, by what it answers: made once

    def __init__(self, upstream: InstantUpstream):
        self.upstream, self.answer, self.pending, self.answered = upstream, upstream.answer, b"", 0

    def connection_made(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        self.upstream.connections += 1

    def data_received(self, data: bytes) -> None:
        self.pending += data
        while (end := self.pending.find(b"\r\n\r\n")) >= 0:
            length = re.search(rb"(?im)^content-length:\s*(\d+)", self.pending[:end])
            start, stop = end + 4, end + 4 + (int(length.group(1)) if length else 0)
            if len(self.pending) < stop:
                return
            body, self.pending = json.loads(self.pending[start:stop] or b"{}"), self.pending[stop:]
            if self.answered == self.upstream.most:
                self.transport.close()
                return
            self.answered += 1
            answer = self.answer(body)
            key = (json.dumps(answer), body.get("model"), body.get("stream"), json.dumps(body.get("stream_options")))
            if key not in self.answers:
                content_type, data = canned(body, answer)
                self.answers[key] = f"HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ncontent-length: " \
                                    f"{len(data)}\r\n\r\n".encode() + data
            closing = self.answered == self.upstream.most and self.upstream.close_at_once
            if closing and hasattr(socket, "TCP_CORK"):  # the answer and the close go out together, so that the
                # client sees the connection closed when it has the answer (else its next request may be first)
                self.transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
            self.transport.write(self.answers[key])
            if closing:
                self.transport.close()


class SplitUpstream:
    """An upstream as Python's http.server answers: on a connection kept open, the headers in one write and the
    body in another (a stream's events each in its own), with Nagle's algorithm on, so that the body waits for
    the client to acknowledge the headers (a client that delays its acknowledgements stalls for 40 ms or so).
    ``answer`` as InstantUpstream's."""

    def __init__(self, answer):
        self.answer, self.url = answer, ""

    def __enter__(self) -> SplitUpstream:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _split_handler(self.answer))
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _split_handler(answer):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # connections are kept open

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            content_type, data = canned(body, answer(body))
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()  # a write of its own
            for event in data.split(b"\n\n")[:-1] if content_type == "text/event-stream" else [data]:
                self.wfile.write(event + b"\n\n" if content_type == "text/event-stream" else event)

        def log_message(self, format, *args):
            pass

    return Handler
