"""The backend for any OpenAI-compatible chat completions endpoint; the only module that imports ``openai``.

Retrying is the SDK's own: timeouts, connection errors, 408/409/429 and 5xx are retried up to
``max_retries`` times with exponential backoff (0.5s doubling, capped at 8s, minus up to 25% jitter),
except that a ``retry-after-ms`` or ``Retry-After`` header (seconds or HTTP date) between 0 and 120s
is waited exactly, one of 0 falls back to the backoff, and one above 120s stops the retrying at once.

The request goes out through the client's plain ``post`` (the typed ``chat.completions.create`` walks the
whole history on every call) to the whole URL, made once (a path is parsed and joined to the base URL on every
call), without the SDK's X-Stainless telemetry headers (but for the retry count, read back for the messages).
The answer is read here: within ``timeout`` seconds of sending, at most ``MAX_RESPONSE_BYTES``, then checked
against ``COMPLETION_SCHEMA`` and read as plain dicts. A streamed answer (``stream``) is read the same way, as
server-sent events each checked against ``CHUNK_SCHEMA`` (once per shape), and assembled into the same
completion; what follows its [DONE] is read too, so that its connection is kept.
"""
from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Generator, Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx2
import jsonschema
import openai

from agent.config import DEFAULT_BASE_URL
from agent.models import ModelError, Reply, RequestRejected, tool_call
from agent.text import kind_of, scrub
from agent.tools.text import shorten

MAX_RESPONSE_BYTES = 16 * 1024 * 1024
MIN_CONNECTIONS, MIN_KEEPALIVE = 100, 20  # httpx's own defaults: the pool is never smaller
_SENT_AT = "agent.sent_at"
DRAIN_SECONDS = 0.1  # to read the rest of a stream after its [DONE], as the SDK's async client gives it
# the headers the SDK sends of itself and the machine, which no server needs: left out (each one is merged,
# checked and written on every call)
TELEMETRY = ("X-Stainless-Lang", "X-Stainless-Package-Version", "X-Stainless-OS", "X-Stainless-Arch",
             "X-Stainless-Runtime", "X-Stainless-Runtime-Version", "X-Stainless-Async", "X-Stainless-Read-Timeout")
_LEFT_OUT: openai.RequestOptions = {"headers": {name: openai.Omit() for name in TELEMETRY}}  # per request

_TEXT = {"type": ["string", "null"]}
_COUNT = {"type": ["integer", "null"], "minimum": 0}
_TOOL_CALL = {"type": "object", "required": ["function"], "properties": {
    "id": _TEXT,
    "function": {"type": "object", "required": ["name", "arguments"],
                 "properties": {"name": {"type": "string"}, "arguments": {"type": "string"}}},
}}
COMPLETION_SCHEMA: dict = {
    "type": "object",
    "required": ["choices"],
    "properties": {
        "choices": {"type": "array", "minItems": 1, "prefixItems": [{
            "type": "object", "required": ["message"], "properties": {
                "message": {"type": "object", "properties": {
                    "content": _TEXT, "tool_calls": {"type": ["array", "null"], "items": _TOOL_CALL}}},
                "finish_reason": _TEXT,
            },
        }]},
        "usage": {"type": ["object", "null"], "properties": {"prompt_tokens": _COUNT, "completion_tokens": _COUNT}},
    },
}
_VALIDATOR = jsonschema.Draft202012Validator(COMPLETION_SCHEMA)
_DELTA_CALL = {"type": "object", "properties": {
    "index": {"type": "integer", "minimum": 0}, "id": _TEXT,
    "function": {"type": ["object", "null"], "properties": {"name": _TEXT, "arguments": _TEXT}}}}
CHUNK_SCHEMA = {
    "type": "object",
    "properties": {
        "choices": {"type": ["array", "null"], "items": {"type": "object", "properties": {
            "index": {"type": "integer"},
            "delta": {"type": ["object", "null"], "properties": {
                "content": _TEXT, "tool_calls": {"type": ["array", "null"], "items": _DELTA_CALL}}},
            "finish_reason": _TEXT}}},
        "usage": COMPLETION_SCHEMA["properties"]["usage"],
    },
}
_CHUNK_VALIDATOR = jsonschema.Draft202012Validator(CHUNK_SCHEMA)  # (no bound on a number but minimum 0: _shape)
_VALID_SHAPES: set = set()  # of the chunks found valid (see _chunk), at most MAX_SHAPES
MAX_SHAPES = 1024
_ABSENT = object()
_DECODER = json.JSONDecoder()


class OpenAIModel:
    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 timeout: float = 60.0, max_retries: int = 2, temperature: float | None = None,
                 connections: int = 1):
        """``connections``: how many requests will be made at once (`agent eval --workers`); the connection
        pool keeps that many open, so no worker waits for another's connection or opens a new one per call."""
        self.model = model
        self.base_url = base_url or DEFAULT_BASE_URL
        self.timeout = timeout
        self.max_retries = max_retries
        self.temperature = temperature
        self.has_key = bool(api_key)
        # a JSON Schema response_format as OpenAI writes it ({"type": "json_schema", ...}) until the server refuses
        # that and takes llama-cpp-python's server's form ({"type": "json_object", "schema": ...}) instead
        self.schema_form = "json_schema"
        limits = httpx2.Limits(max_connections=max(connections, MIN_CONNECTIONS),
                               max_keepalive_connections=max(connections, MIN_KEEPALIVE))
        http_client = openai.DefaultHttpxClient(event_hooks={"request": [_stamp_sent_at]}, limits=limits)
        self.client = openai.OpenAI(base_url=self.base_url, api_key=api_key or "not-needed",
                                    timeout=timeout, max_retries=max_retries, http_client=http_client)
        base = self.client.base_url  # (with a trailing slash)
        self.url = str(base.copy_with(raw_path=base.raw_path + b"chat/completions"))  # as the SDK joins a path

    def complete(self, messages: list[dict], **options) -> Reply:
        response = self._post(self._request(messages, options))
        return self._reply(self._completion(b"".join(self._body(response))))

    def stream(self, messages: list[dict], on_text: Callable[[str], None], **options) -> Reply:
        """As ``complete``, asking for the answer as server-sent events and giving each piece of its content to
        ``on_text`` as it arrives; a server that answers whole instead is read as ``complete`` reads it."""
        request = {**self._request(messages, options), "stream": True, "stream_options": {"include_usage": True}}
        response = self._post(request)
        if not response.headers.get("content-type", "").startswith("text/event-stream"):
            return self._reply(self._completion(b"".join(self._body(response))))
        return self._reply(self._assemble(self._body(response), on_text))

    def relay(self, request: dict) -> tuple[str, Generator[bytes, None, None]]:
        """Send a chat completions request as it is, but for this backend's model, and give the answer's content
        type and its body piece by piece, unread (within the timeout and the size limit): `agent serve`'s
        pass-through. An error status is a ModelError, with the status."""
        default = {"temperature": self.temperature} if self.temperature is not None else {}
        response = self._post({**default, **request, "model": self.model})
        return response.headers.get("content-type", "application/json"), self._body(response)

    def _request(self, messages: list[dict], options: dict) -> dict:
        request: dict = {"model": self.model, "messages": messages}
        if self.temperature is not None:
            request["temperature"] = self.temperature
        request.update({key: value for key, value in options.items() if value is not None})
        return request

    def _post(self, request: dict) -> httpx2.Response:
        """The response to ``request``. A JSON Schema response_format that the server refuses (HTTP 400, 422, or
        the 500 with which llama-cpp-python's server answers a request it cannot read) is asked once more in the
        form that server knows; if that is answered, the form is used from then on."""
        schema = _schema_of(request.get("response_format"))
        if schema is not None and self.schema_form == "json_object":
            request = {**request, "response_format": {"type": "json_object", "schema": schema}}
        try:
            return self._send(request)
        except ModelError as error:
            if schema is None or self.schema_form == "json_object" or getattr(error, "status", None) not in (
                    400, 422, 500):
                raise
            try:
                response = self._send({**request, "response_format": {"type": "json_object", "schema": schema}})
            except ModelError:
                raise error from None
            self.schema_form = "json_object"
            return response

    def _send(self, request: dict) -> httpx2.Response:
        try:
            response = self.client.post(self.url, content=_json_bytes(request), cast_to=httpx2.Response, stream=True,
                                        options=_LEFT_OUT)
        except openai.APIError as err:
            raise self._error(err, constrained="response_format" in request, streamed="stream" in request) from err
        except UnicodeEncodeError as err:  # the SDK encodes the headers outside what it turns into its errors
            raise _unsendable_key(err) from None
        _acknowledge_at_once(response)
        return response

    def _body(self, response: httpx2.Response) -> Generator[bytes, None, None]:
        """The body piece by piece, unless it takes past ``timeout`` since sending or grows past
        ``MAX_RESPONSE_BYTES``; the response is closed however the reading ends."""
        deadline = response.request.extensions[_SENT_AT] + self.timeout
        size = 0
        try:
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > MAX_RESPONSE_BYTES:
                    raise ModelError(f"the response from {self.base_url} was larger than "
                                     f"{MAX_RESPONSE_BYTES // 2**20} MB; check --base-url / AGENT_BASE_URL")
                if time.monotonic() > deadline:
                    raise self._too_slow()
                yield chunk
        except httpx2.TimeoutException:
            raise self._too_slow() from None
        except httpx2.HTTPError as err:
            raise ModelError(f"the connection to {self.base_url} broke while reading the answer: "
                             f"{_short(str(err)) or type(err).__name__}; check the server") from None
        finally:
            response.close()

    def _assemble(self, body: Generator[bytes, None, None], on_text: Callable[[str], None]) -> dict:
        """The streamed chunks as one chat completion (the first choice): the content joined, each tool call's
        id, name and arguments put together from its deltas, the last finish_reason, the usage if sent."""
        content: list[str] = []
        calls: dict[int, dict] = {}  # by the index of the call
        finish, usage, chosen, done = None, None, False, False
        try:
            for data in _events(body):
                if data.strip() == b"[DONE]":
                    done = True
                    _drain(body)
                    break
                chunk = self._chunk(data)
                usage = chunk.get("usage") or usage
                for choice in chunk.get("choices") or []:
                    if choice.get("index", 0) != 0:
                        continue
                    chosen = True
                    delta = choice.get("delta") or {}
                    if delta.get("content"):
                        content.append(delta["content"])
                        on_text(scrub(delta["content"]))
                    for call in delta.get("tool_calls") or []:
                        slot = calls.setdefault(call.get("index", len(calls)),
                                                {"id": None, "name": "", "arguments": ""})
                        function = call.get("function") or {}
                        slot["id"] = slot["id"] or call.get("id")
                        slot["name"] += function.get("name") or ""
                        slot["arguments"] += function.get("arguments") or ""
                    finish = choice.get("finish_reason") or finish
        finally:
            body.close()
        if not chosen:
            raise self._not_a_completion("the stream held no choice")
        if not (done or finish):
            raise ModelError(f"the stream from {self.base_url} ended before the answer was complete; check the server")
        message = {"content": "".join(content) if content else None,
                   "tool_calls": [{"id": c["id"], "function": {"name": c["name"], "arguments": c["arguments"]}}
                                  for _, c in sorted(calls.items())]}
        return {"choices": [{"message": message, "finish_reason": finish}], "usage": usage}

    def _chunk(self, data: bytes) -> dict:
        """One event's data as a completion chunk, or a ModelError naming what is wrong with it. CHUNK_SCHEMA says
        nothing of a string but that it is one, and nothing of the fields besides choices and usage, so a chunk of
        the same shape as one found valid (``_chunk_shape``) is valid too and is not checked again: chunks come in
        a handful of shapes (the role, the content's pieces, a call's name, its arguments' pieces, the end), and
        jsonschema takes some 40 us a chunk."""
        chunk = self._read(data, None, "an event of the stream", "", loads=_utf8_json)
        try:
            shape = _chunk_shape(chunk)
        except RecursionError:  # nested deeper than the shape can be made (json.loads goes deeper): checked alone
            shape = None
        if shape is None or shape not in _VALID_SHAPES:
            self._read(data, _CHUNK_VALIDATOR, "an event of the stream", "in a chunk of the stream, ", chunk)
            if len(_VALID_SHAPES) >= MAX_SHAPES:
                _VALID_SHAPES.clear()
            if shape is not None:
                _VALID_SHAPES.add(shape)
        return chunk

    def _completion(self, body: bytes) -> dict:
        """The body as a chat completion, or a ModelError naming what is wrong with it."""
        return self._read(body, _VALIDATOR, "the body", "")

    def _read(self, raw: bytes, validator, what: str, where: str, data: Any = None,
              loads: Callable[[bytes], Any] = json.loads) -> dict:
        """``raw`` read by ``loads`` (or ``data``, when it is read already) as JSON that ``validator`` accepts
        (None: not checked); an error the endpoint sent instead, or JSON of another shape, is a ModelError (``what``
        names the text in the message, ``where`` prefixes a shape fault)."""
        try:
            data = loads(raw) if data is None else data
        except (ValueError, RecursionError):
            text = raw[:200].decode("utf-8", "replace")
            raise self._not_a_completion(f"{what} is not JSON ({_short(text, 80) or 'empty'})") from None
        error = data.get("error") if isinstance(data, dict) and "choices" not in data else None
        if error:
            message = error.get("message") if isinstance(error, dict) else None
            raise ModelError(f"endpoint answered with an error: {_short(str(message or error))}")
        fault = jsonschema.exceptions.best_match(validator.iter_errors(data)) if validator is not None else None
        if fault is not None:
            raise self._not_a_completion(where + _describe(fault))
        return data

    def _reply(self, completion: dict) -> Reply:
        choice = completion["choices"][0]
        message = choice["message"]
        calls = [tool_call(scrub(call.get("id")) or f"call_{number}", scrub(call["function"]["name"]),
                           scrub(call["function"]["arguments"]))
                 for number, call in enumerate(message.get("tool_calls") or [], 1)]
        usage = completion.get("usage")
        if usage is not None:
            usage = {"prompt_tokens": int(usage.get("prompt_tokens") or 0),
                     "completion_tokens": int(usage.get("completion_tokens") or 0)}
        return Reply(content=scrub(message.get("content")), tool_calls=calls,
                     finish_reason=scrub(choice.get("finish_reason")), usage=usage)

    def _not_a_completion(self, fault: str) -> ModelError:
        return ModelError(f"{self.base_url} did not answer with a chat completion: {fault}; "
                          "check --base-url / AGENT_BASE_URL")

    def list_models(self) -> list[str]:
        """The model names the endpoint serves (GET /models), sorted."""
        try:
            return sorted(m.id for m in self.client.models.list())
        except openai.APIError as err:
            raise self._error(err, constrained=False) from err
        except UnicodeEncodeError as err:
            raise _unsendable_key(err) from None

    def _too_slow(self) -> ModelError:
        return ModelError(f"no complete answer from {self.base_url} within {self.timeout:g}s; "
                          "raise --timeout or check the server")

    def _error(self, err: openai.APIError, *, constrained: bool, streamed: bool = False) -> ModelError:
        """One line that says what went wrong and how to fix it."""
        retries = _retries_taken(err, self.max_retries)
        if isinstance(err, openai.APITimeoutError):
            return ModelError(f"no answer from {self.base_url} within {self.timeout:g}s (after {retries} retries); "
                              "raise --timeout or check the server")
        if isinstance(err, openai.APIConnectionError):
            cause = _short(str(err.__cause__ or err)) or type(err.__cause__).__name__
            return ModelError(f"cannot connect to {self.base_url}: {cause}; "
                              "check --base-url / AGENT_BASE_URL and that the server is running")
        if not isinstance(err, openai.APIStatusError):
            return ModelError(f"unexpected answer from {self.base_url}: {_short(err.message)}")
        error = self._status_error(err, constrained=constrained, streamed=streamed)
        error.status = err.status_code
        return error

    def _status_error(self, err: openai.APIStatusError, *, constrained: bool, streamed: bool) -> ModelError:
        retries = _retries_taken(err, self.max_retries)
        status, message = err.status_code, _server_message(err)
        if status in (401, 403) and not self.has_key:
            return ModelError(f"{self.base_url} wants an API key (HTTP {status}: {message}); pass --api-key "
                              "or set AGENT_API_KEY")
        if status in (401, 403):
            return ModelError(f"{self.base_url} rejected the API key (HTTP {status}: {message}); check that the "
                              "key is right and valid for this server")
        if status == 404 and not urlsplit(self.base_url).path.rstrip("/").endswith("/v1"):
            return ModelError(f"{err.request.url} answered 404 ({message}); most servers serve the API under /v1: "
                              f"try --base-url {self.base_url.rstrip('/')}/v1")
        if status == 404:
            return ModelError(f"{err.request.url} answered 404 for model {self.model!r} ({message}); check --model "
                              "(`agent models` lists what the server serves) and --base-url")
        if status == 429:
            asked = err.response.headers.get("retry-after")
            wait = f" (the server asked to wait {asked}s)" if asked else ""
            return ModelError(f"rate limited (HTTP 429) after {retries} retries{wait}; wait and try again")
        hint = "; the server may not support --constrain (response_format): drop the flag" if constrained else ""
        if status >= 500:
            advice = hint or ("; the server is down or overloaded: try again later, or another --base-url "
                              "(or --local)")
            return ModelError(f"endpoint error HTTP {status} after {retries} retries: {message}{advice}")
        hint += "; the server may not support streaming: drop --stream" if streamed else ""
        return RequestRejected(f"endpoint rejected the request (HTTP {status}): {message}{hint}",
                               f"HTTP {status}: {message}")


def _schema_of(response_format: object) -> dict | None:
    """The JSON Schema of an OpenAI-style ``{"type": "json_schema", ...}`` response_format, if it is one."""
    if isinstance(response_format, dict) and response_format.get("type") == "json_schema":
        schema = (response_format.get("json_schema") or {}).get("schema")
        return schema if isinstance(schema, dict) else None
    return None


def _events(body: Iterator[bytes]) -> Iterator[bytes]:
    """The data of each server-sent event in ``body`` (a comment or another field is skipped), as it completes."""
    partial: list[bytes] = []  # the pieces of a line not complete yet
    data: list[bytes] = []  # the data lines of the event so far
    for chunk in body:
        if b"\n" not in chunk:
            partial.append(chunk)
            continue
        lines = (b"".join(partial) + chunk if partial else chunk).split(b"\n")
        partial = [lines.pop()]
        for line in lines:
            line = line.rstrip(b"\r")
            if not line:
                if data:
                    yield b"\n".join(data)
                    data = []
            elif line.startswith(b"data:"):
                data.append(line[5:].removeprefix(b" "))
    if data:
        yield b"\n".join(data)


def _drain(body: Iterator[bytes]) -> None:
    """The rest of a stream after its [DONE] read, which gives its connection back to the pool for the next call
    (closed before its end, it is closed): as the SDK's async client does, for DRAIN_SECONDS at most once a piece
    has come (a server that sends on after it is let go), and what fails then does not undo the answer."""
    until = time.monotonic() + DRAIN_SECONDS
    try:
        for _ in body:
            if time.monotonic() > until:
                return
    except ModelError:
        pass


def _utf8_json(data: bytes) -> Any:
    """JSON text in UTF-8, as an event stream's data always is (json.loads looks for UTF-16 and 32 first)."""
    return _DECODER.decode(data.decode("utf-8", "surrogatepass"))


def _chunk_shape(chunk: object) -> tuple | type:
    """What CHUNK_SCHEMA looks at in a chunk: its choices and usage, or what it is instead of an object."""
    if isinstance(chunk, dict):
        return dict, _shape(chunk.get("choices", _ABSENT)), _shape(chunk.get("usage", _ABSENT))
    return _shape(chunk)


def _shape(value: Any) -> tuple | type:
    """A JSON value with every string as ``str`` and every whole number as its sign: the same keys, lists, other
    numbers, booleans and nulls. CHUNK_SCHEMA asks no more of a whole number than its sign (a count's minimum of
    0), so that a usage chunk's shape does not change with its counts."""
    kind = type(value)  # (json.loads makes no subclasses)
    if kind is str:
        return str
    if kind is int:
        return int, value >= 0
    if kind is dict:
        return dict, *[(key, _shape(item)) for key, item in value.items()]
    if kind is list:
        return list, *map(_shape, value)
    return kind, value  # (True == 1: the type tells them apart)


def _acknowledge_at_once(response: httpx2.Response) -> None:
    """Acknowledge what the server sends at once, not 40 ms later: a server that writes the headers and the body
    separately with Nagle's algorithm on (Python's http.server) holds the body until the headers are acknowledged,
    and on a connection kept open Linux delays the acknowledgement (TCP_QUICKACK, Linux only, lasts until this
    side sends again: set for each response)."""
    stream = response.extensions.get("network_stream")
    sock = stream.get_extra_info("socket") if stream is not None else None
    if sock is not None and hasattr(socket, "TCP_QUICKACK"):
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
        except OSError:
            pass


def _unsendable_key(err: UnicodeEncodeError) -> ModelError:
    """The key is the one header text given: one that is not ASCII cannot be sent."""
    return ModelError(f"the API key holds {err.object[err.start:err.end]!r}, which no HTTP header can carry; "
                      "check --api-key / AGENT_API_KEY")


def _stamp_sent_at(request: httpx2.Request) -> None:
    """Marks when each attempt (the SDK's retries included) is sent, for the whole-request deadline."""
    request.extensions[_SENT_AT] = time.monotonic()


def _json_bytes(request: dict) -> bytes:
    """The request as JSON; a lone surrogate (which UTF-8 cannot encode) is sent as U+FFFD."""
    try:
        return json.dumps(request, ensure_ascii=False, separators=(",", ":")).encode()
    except UnicodeEncodeError:
        return json.dumps(scrub(request), ensure_ascii=False, separators=(",", ":")).encode()


def _describe(fault: jsonschema.ValidationError) -> str:
    """``choices[0].message is a string``: where the body departs from a chat completion, and how."""
    where = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in fault.absolute_path)
    where = where.lstrip(".") or "the body"
    if fault.validator == "required":
        required: Any = fault.validator_value
        given: Any = fault.instance
        missing = next(name for name in required if name not in given)
        return f"{where} has no {missing!r}"
    if fault.validator == "type":
        return f"{where} is {kind_of(fault.instance)}"
    if fault.validator == "minItems":
        return f"{where} is empty"
    return f"{where}: {_short(fault.message, 80)}"


def _retries_taken(err: openai.APIError, default: int) -> int:
    """The SDK numbers each attempt in the x-stainless-retry-count request header."""
    try:
        return int(err.request.headers["x-stainless-retry-count"])
    except (AttributeError, KeyError, ValueError):
        return default


def _server_message(err: openai.APIStatusError) -> str:
    body = err.body
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return _short(body["message"])
    if isinstance(body, str) and body:
        return _short(body)
    return _short(err.response.text) or f"HTTP {err.status_code}"


def _short(text: str, limit: int = 200) -> str:
    """The first line of a text from the server, cut to ``limit`` characters, with no lone surrogate."""
    lines = scrub(text).strip().splitlines()
    first = lines[0].strip() if lines else ""
    return shorten(first, limit)
