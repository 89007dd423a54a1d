"""A real local HTTP server speaking the OpenAI chat completions API, scripted per test."""
from __future__ import annotations

import itertools
import json
import select
import socket
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("authentication_error", "invalid_api_key"),
    403: ("permission_error", None),
    404: ("not_found_error", "model_not_found"),
    429: ("rate_limit_error", "rate_limit_exceeded"),
}


class ScriptedServer:
    """Answers each POST /v1/chat/completions with the next queued step and records every request. A request
    that asks for a stream (``"stream": true``) gets a queued reply as server-sent events, a few characters a chunk.

    Use as a context manager; ``url`` is the base URL to give an OpenAI client.
    """

    def __init__(self):
        self.requests: list[dict] = []
        self._steps: deque[dict] = deque()
        self._rules: list[tuple] = []  # (predicate, step): requests the predicate picks get the step, the queue waits
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._call_ids = 0
        self._httpd: ThreadingHTTPServer | None = None
        self.url = ""
        self.in_flight = 0  # chat requests being answered now
        self.most_in_flight = 0  # the most at any one time
        self._gathered = threading.Condition(self._lock)
        self._gather = (0, 0.0)  # (count, deadline): see gather()

    def __enter__(self) -> ScriptedServer:
        self._httpd = _QuietServer(("127.0.0.1", 0), _handler_for(self))
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def reply(self, content=None, *, tool_calls=None, finish_reason=None, usage=True, delay=0.0, pause=0.0,
              first=0.0) -> None:
        """Queue one 200 chat.completion; ``usage=True`` derives token counts, a dict is sent as is. Streamed,
        ``pause`` is the seconds between chunks and ``first`` before the first one (after the headers, as a
        server thinking). A request whose client goes away before its answer is complete is marked
        ``"left": True`` among the ``requests``."""
        calls = [self._tool_call(call) for call in tool_calls or []]
        message = {"role": "assistant", "content": content}
        if calls:
            message["tool_calls"] = calls
        reason = finish_reason or ("tool_calls" if calls else "stop")
        self._steps.append({"status": 200, "message": message, "finish_reason": reason,
                            "usage": usage, "headers": {}, "delay": delay, "pause": pause, "first": first})

    def answer_when(self, predicate, content: str, delay: float = 0.0, gate: threading.Event | None = None,
                    pause: float = 0.0, first: float = 0.0) -> None:
        """Answer every request whose JSON body ``predicate`` picks with ``content`` (after ``delay`` seconds, and
        once ``gate`` is set, if given; streamed, as ``reply`` does), before the queue is looked at (and without
        using it up)."""
        self._rules.append((predicate, {"status": 200, "message": {"role": "assistant", "content": content},
                                        "finish_reason": "stop", "usage": True, "headers": {}, "delay": delay,
                                        "pause": pause, "first": first, "gate": gate}))

    def gather(self, count: int, timeout: float) -> None:
        """Hold every chat request until ``count`` are in flight at once (or ``timeout`` seconds from now have
        passed): how many clients can have requests open together, whatever the load on the machine."""
        self._gather = (count, time.monotonic() + timeout)

    def refuse(self, field: str, status: int = 400, message: str | None = None) -> None:
        """Answer every request that has ``field`` (``tools``, ``response_format``) with HTTP ``status``, as a
        server that does not support it does (llama-cpp-python's answers 500 to a response_format it does not
        know)."""
        self.refuse_when(lambda body: field in body, status, message or f"Unrecognized request argument supplied: "
                                                                        f"{field}")

    def refuse_when(self, predicate, status: int, message: str) -> None:
        """Answer every request whose body ``predicate`` holds for with HTTP ``status`` and ``message``."""
        self._rules.append((predicate, {"status": status, "body": _error_body(status, message), "headers": {},
                                        "delay": 0.0}))

    def replies(self, *contents) -> None:
        for content in contents:
            self.reply(content)

    def error(self, status: int, *, body=None, headers=None, delay=0.0) -> None:
        """Queue an HTTP error; ``body`` is the error message (str) or the whole JSON body (dict)."""
        if not isinstance(body, dict):
            body = _error_body(status, body or f"scripted error {status}")
        self.respond(status, body, headers=headers, delay=delay)

    def respond(self, status: int, body: dict | str, *, headers=None, delay=0.0, trickle=0.0) -> None:
        """Queue any response as given: a dict is sent as JSON, a str verbatim (e.g. an HTML page).

        ``trickle`` sends the headers at once, then the body one byte every ``trickle`` seconds.
        """
        self._steps.append({"status": status, "body": body, "headers": headers or {}, "delay": delay,
                            "trickle": trickle})

    def endless(self, chunk: str = " ", *, interval=0.0, headers=None) -> None:
        """Queue a 200 whose body never ends: ``chunk`` again and again, every ``interval`` seconds,
        until the client goes away or the server stops."""
        self._steps.append({"status": 200, "endless": chunk.encode(), "interval": interval,
                            "headers": headers or {}, "delay": 0.0})

    @property
    def pending(self) -> int:
        return len(self._steps)

    def _tool_call(self, call: dict) -> dict:
        with self._lock:
            self._call_ids += 1
            number = self._call_ids
        arguments = call.get("arguments", {})
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments)
        return {"id": call.get("id") or f"call_{number}", "type": "function",
                "function": {"name": call["name"], "arguments": arguments}}

    def _next(self, request: dict) -> dict:
        with self._lock:
            self.requests.append(request)
            number = len(self.requests)
            for predicate, step in self._rules:
                if isinstance(request["body"], dict) and predicate(request["body"]):
                    return step
            if self._steps:
                return self._steps.popleft()
        message = f"scripted server: no reply left for request {number}"
        return {"status": 500, "body": _error_body(500, message), "headers": {}, "delay": 0.0}

    def _completion(self, step: dict, request_body: dict) -> dict:
        body = {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request_body.get("model", "scripted"),
            "choices": [{"index": 0, "message": step["message"], "finish_reason": step["finish_reason"]}],
        }
        usage = step["usage"]
        if usage is True:
            prompt_chars = sum(len(str(m.get("content") or "")) for m in request_body.get("messages", []))
            completion = len(step["message"]["content"] or "") // 4 + 1
            usage = {"prompt_tokens": prompt_chars // 4, "completion_tokens": completion,
                     "total_tokens": prompt_chars // 4 + completion}
        if usage:
            body["usage"] = usage
        return body


class _QuietServer(ThreadingHTTPServer):
    """Does not wait for handler threads on close and prints nothing when a client goes away."""

    block_on_close = False
    request_queue_size = 128  # many clients at once (eval --workers) are all accepted

    def handle_error(self, request, client_address):
        pass


def _error_body(status: int, message: str) -> dict:
    kind, code = _ERROR_TYPES.get(status, ("server_error" if status >= 500 else "invalid_request_error", None))
    return {"error": {"message": message, "type": kind, "code": code}}


def _handler_for(server: ScriptedServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = 10

        def do_GET(self):
            if self.path.rstrip("/") == "/v1/models":
                self._send(200, {"object": "list", "data": [
                    {"id": "scripted", "object": "model", "created": 0, "owned_by": "tests"}]})
            else:
                self._send(404, _error_body(404, f"no route for GET {self.path}"))

        def do_POST(self):
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                body = json.loads(raw or b"null")
            except ValueError:
                body = raw.decode("utf-8", "replace")
            request = {"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body}
            if self.path != "/v1/chat/completions":
                with server._lock:
                    server.requests.append(request)
                self._send(404, _error_body(404, f"no route for POST {self.path}"))
                return
            step = server._next(request)
            if step.get("gate"):
                step["gate"].wait(60)
            with server._gathered:
                server.in_flight += 1
                server.most_in_flight = max(server.most_in_flight, server.in_flight)
                server._gathered.notify_all()
                count, deadline = server._gather
                if server.in_flight >= count:
                    server._gather = (0, 0.0)  # gathered: from now on nothing is held
                server._gathered.wait_for(lambda: server.in_flight >= server._gather[0],
                                          max(0.0, deadline - time.monotonic()))
            try:
                self._answer(step, body)
            except (BrokenPipeError, ConnectionResetError):
                request["left"] = True
            finally:
                with server._lock:
                    server.in_flight -= 1

        def _wait(self, seconds: float) -> None:
            """Wait, unless the server stops or the client goes away (then BrokenPipeError, as a write would)."""
            deadline = time.monotonic() + seconds
            while (left := deadline - time.monotonic()) > 0:
                if server._stopping.wait(min(left, 0.05)):
                    raise BrokenPipeError("the server is stopping")
                readable, _, _ = select.select([self.connection], [], [], 0)
                if readable and not self.connection.recv(1, socket.MSG_PEEK):
                    raise BrokenPipeError("the client went away")

        def _answer(self, step: dict, body) -> None:
            if step["delay"]:
                self._wait(step["delay"])
            if "message" in step and isinstance(body, dict) and body.get("stream"):
                self._send_stream(server._completion(step, body), body, step["pause"], step.get("first", 0.0))
            elif "message" in step:
                self._send(200, server._completion(step, body if isinstance(body, dict) else {}))
            elif "endless" in step:
                self._send_endless(step["endless"], step["interval"], step["headers"])
            else:
                self._send(step["status"], step["body"], step["headers"], trickle=step.get("trickle", 0.0))

        def _send(self, status: int, payload: dict | str, headers: dict | None = None, trickle=0.0) -> None:
            data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
            headers = {"Content-Type": "application/json", "Content-Length": len(data), "Connection": "close",
                       **(headers or {})}
            self.close_connection = True
            self._send_headers(status, headers)
            if trickle:
                for at in range(len(data)):
                    self._wait(trickle)
                    self.wfile.write(data[at:at + 1])
            else:
                self.wfile.write(data)

        def _send_stream(self, completion: dict, request: dict, pause: float, first: float = 0.0) -> None:
            """The completion as server-sent events, as OpenAI streams one: the content a few characters a
            chunk, each tool call's name then its arguments in pieces, the finish reason, the usage when the
            request asked for it (stream_options.include_usage), then [DONE]."""
            choice, piece = completion["choices"][0], 4

            def chunk(delta, finish=None):
                return {"id": completion["id"], "object": "chat.completion.chunk", "created": completion["created"],
                        "model": completion["model"], "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

            content = choice["message"]["content"] or ""
            # the content's chunks are made as they are sent: a long content starts at once (4 MB: 13 s otherwise)
            texts = (chunk({"content": content[at:at + piece]}) for at in range(0, len(content), piece))
            events = []
            for index, call in enumerate(choice["message"].get("tool_calls") or []):
                function, arguments = call["function"], call["function"]["arguments"]
                events.append(chunk({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                                     "function": {"name": function["name"], "arguments": ""}}]}))
                events += [chunk({"tool_calls": [{"index": index, "function": {"arguments": arguments[at:at + piece]}}]})
                           for at in range(0, len(arguments), piece)]
            events.append(chunk({}, choice["finish_reason"]))
            if completion.get("usage") and (request.get("stream_options") or {}).get("include_usage"):
                events.append({**chunk({}), "choices": [], "usage": completion["usage"]})
            self.close_connection = True
            self._send_headers(200, {"Content-Type": "text/event-stream", "Connection": "close"})
            self.wfile.flush()
            made = itertools.chain([chunk({"role": "assistant", "content": ""})], texts, events)
            for number, event in enumerate(itertools.chain(map(json.dumps, made), ["[DONE]"])):
                self._wait(first if number == 0 else pause)
                self.wfile.write(f"data: {event}\n\n".encode())
                self.wfile.flush()

        def _send_endless(self, chunk: bytes, interval: float, headers: dict) -> None:
            """A body without a length, delimited by closing the connection, which this never does."""
            self.close_connection = True
            self._send_headers(200, {"Content-Type": "application/json", "Connection": "close", **headers})
            while not server._stopping.wait(interval):
                self.wfile.write(chunk)

        def _send_headers(self, status: int, headers: dict) -> None:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, str(value))
            self.end_headers()

        def log_message(self, format, *args):
            pass

    return Handler
