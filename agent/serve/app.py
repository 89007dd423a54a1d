"""`agent serve`'s web application (starlette): POST /v1/chat/completions, POST /v1/responses and GET /v1/models in
OpenAI's format, in front of one upstream model. A request with tools goes through the prompt protocol
(agent.serve.translate, and agent.replies as the loop uses it: model call, parse, re-asks); a chat completions
request without is passed on unchanged. A Responses request is answered as the chat completions request it
translates to (agent.serve.responses)."""
from __future__ import annotations

import asyncio
import hmac
import json
import threading
from collections.abc import Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.to_thread
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from agent.models import Model, ModelError, RelayingModel
from agent.replies import Replies, Stop
from agent.serve import responses as responses_api
from agent.serve.disconnects import Cancellable, ClientGone, gathered, relayed, while_connected
from agent.serve.stored import Stored
from agent.serve.translate import RequestError, chunks, completion, error_body, passed_on, plain, translate

MAX_BODY = 8 * 2**20  # bytes of a request body; a larger one is refused (413) unread
CLIENT_TIMEOUT = 30.0  # seconds for a request's body to arrive (its headers: agent.serve.connections)
THREADS = 100  # upstream calls at once
REASKS_HEADER = "x-agent-reasks"  # how many times the upstream was re-asked for this response


def create_app(model: Model, model_name: str, *, api_key: str | None = None, constrain: bool = False,
               max_reasks: int = 3, max_body: int = MAX_BODY, secrets: tuple[str, ...] = (),
               client_timeout: float = CLIENT_TIMEOUT, threads: int = THREADS) -> Starlette:
    """The application serving ``model`` (named ``model_name`` to clients); with ``api_key``, every request must
    carry it as a bearer token. ``constrain``: tool requests ask the upstream for schema-constrained replies.
    ``secrets`` (the upstream's key) are cut out of any upstream error shown to a client. A body must arrive
    within ``client_timeout`` seconds; ``threads``: the upstream calls made at once (one per open request)."""

    def refused(request: Request) -> JSONResponse | None:
        if api_key is None:
            return None
        given = request.headers.get("authorization", "")
        if hmac.compare_digest(given.encode(), f"Bearer {api_key}".encode()):
            return None
        return _error(401, "missing or wrong API key: send it as the header Authorization: Bearer KEY "
                           "(the key agent serve was started with, --api-key or AGENT_SERVE_API_KEY)",
                      "authentication_error", code="invalid_api_key")

    async def models(request: Request) -> Response:
        return refused(request) or JSONResponse({"object": "list", "data": [
            {"id": model_name, "object": "model", "created": 0, "owned_by": "agent-serve"}]})

    async def chat(request: Request) -> Response:
        return await guarded(request, chat_body)

    async def chat_body(body: object, receive) -> Response:
        if isinstance(body, dict) and body.get("tools"):
            return await with_tools(body, receive)
        return await pass_on(body, receive)

    async def guarded(request: Request, respond) -> Response:
        """``respond(body, receive)`` for a request whose key is right and whose body arrived in time and in size,
        with every failure as its error response."""
        if denied := refused(request):
            return denied
        try:
            async with asyncio.timeout(client_timeout):  # (half of anyio.fail_after's time)
                raw = await _read_body(request, max_body)
            body = await run_in_threadpool(_decode, raw) if len(raw) > 65536 else _decode(raw)
            return await respond(body, request.receive)
        except RequestError as error:
            return _error(error.status, error.message, param=error.param)
        except ModelError as error:
            return _upstream_error(error, secrets)
        except ClientGone:  # nobody is there to read it
            return Response(status_code=499)
        except TimeoutError:
            return _error(408, f"the request body did not arrive within {client_timeout:g} s; send it at once",
                          headers={"connection": "close"})

    def answer(body: dict, gone: threading.Event) -> tuple:
        """Translate the request and get a usable reply (in a worker thread: both can take a while), until the
        client leaves."""
        request = translate(body, constrain)
        replies = Replies(Cancellable(model, gone), request.protocol, max_reasks)
        try:
            return request, replies, replies.next(request.messages)
        except Stop as stop:
            return request, replies, stop

    async def with_tools(body: dict, receive) -> Response:
        done = await completed(body, receive)
        if isinstance(done, Response):
            return done
        request, done, headers = done
        if request.stream:
            return _sse(chunks(done, request.include_usage), headers)
        return JSONResponse(done, headers=headers)

    async def completed(body: dict, receive) -> tuple | Response:
        """A tools request's completion (with the request as translated, and the headers), or the 502 saying
        the upstream's replies stayed malformed."""
        request, replies, turn = await while_connected(receive, answer, body)
        if isinstance(turn, Stop):
            return _error(502, f"the upstream model's reply stayed malformed after {replies.reasks} re-asks "
                               f"({turn.error})", "upstream_error", headers={REASKS_HEADER: str(replies.reasks)})
        counts = replies.counts()
        return request, completion(turn, model_name, counts), {REASKS_HEADER: str(counts["reasks"])}

    async def responses(request: Request) -> Response:
        return await guarded(request, responses_body)

    async def responses_body(body: object, receive) -> Response:
        """A Responses request, answered as the chat completions request it translates to; its conversation is
        kept for a later previous_response_id unless it says store: false."""
        previous = body.get("previous_response_id") if isinstance(body, dict) else None
        if previous is not None and not isinstance(previous, str):
            raise RequestError("previous_response_id must be a string: the id of an earlier response",
                               "previous_response_id")
        earlier = kept.get(previous) if previous is not None else None
        if previous is not None and earlier is None:
            raise RequestError(f"previous_response_id {str(previous)[:80]!r} is not kept here: agent serve keeps the "
                               f"conversations of its latest {kept.most:,} responses in memory (not those made with "
                               "store: false, none after a restart); send the whole conversation as input instead",
                               "previous_response_id")
        request = responses_api.to_chat(body, earlier)
        try:
            done: dict
            if request.chat.get("tools"):
                finished = await completed(request.chat, receive)
                if isinstance(finished, Response):
                    return finished
                _, done, headers = finished
            else:
                messages, options = plain(request.chat)
                reply = await while_connected(receive, lambda gone: Cancellable(model, gone).complete(messages,
                                                                                                     **options))
                done, headers = passed_on(reply, model_name), {REASKS_HEADER: "0"}
        except RequestError as error:
            raise responses_api.renamed(error, request.origins) from None
        if request.store:
            kept.put(request.id, responses_api.kept_messages(request, done))
        made = responses_api.response(done, request)
        if request.stream:
            return _event_stream([responses_api.sse(e) for e in responses_api.events(made)], headers)
        return JSONResponse(made, headers=headers)

    async def pass_on(body: object, receive) -> Response:
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            raise RequestError("the body must be a JSON object with messages (a chat completions request)")
        if relaying is not None:
            content_type, first, pieces = await while_connected(receive, relay, relaying, body)
            if pieces is None:
                return Response(first, media_type=content_type, headers={REASKS_HEADER: "0"})
            return StreamingResponse(relayed(first, pieces, _failed), media_type=content_type,
                                     headers={REASKS_HEADER: "0"})
        messages, options = plain(body)
        reply = await while_connected(receive, lambda gone: Cancellable(model, gone).complete(messages, **options))
        done = passed_on(reply, model_name)
        if body.get("stream") is True:
            stream_options = body.get("stream_options")
            include_usage = isinstance(stream_options, dict) and stream_options.get("include_usage") is True
            return _sse(chunks(done, include_usage), {REASKS_HEADER: "0"})
        return JSONResponse(done, headers={REASKS_HEADER: "0"})

    def relay(upstream: RelayingModel, body: dict, gone: threading.Event) -> tuple:
        """The upstream's answer to a request passed on: its content type, and its body whole (then None), or for
        a stream its first piece (an upstream failure before the answer is an error status) and the others; one
        worker thread's work."""
        content_type, pieces = upstream.relay(body)
        if body.get("stream") is not True:
            return content_type, gathered(pieces, gone), None
        try:
            if gone.is_set():
                raise ClientGone()
            return content_type, next(pieces, b""), pieces
        except BaseException:
            pieces.close()
            raise

    async def not_found(request: Request, error: HTTPException) -> Response:
        kind = "not_found_error" if error.status_code == 404 else "invalid_request_error"
        return _error(error.status_code, f"{request.method} {request.url.path}: {error.detail}; agent serve answers "
                                         "POST /v1/chat/completions, POST /v1/responses and GET /v1/models", kind)

    async def failed(request: Request, error: Exception) -> Response:
        return _error(500, f"internal error of agent serve: {type(error).__name__}: {str(error)[:200]}", "server_error")

    @asynccontextmanager
    async def lifespan(app: Starlette):
        """Worker threads for as many upstream calls as requests may be open (anyio's default is 40: a 41st
        request waited for one, even behind calls whose clients had left)."""
        anyio.to_thread.current_default_thread_limiter().total_tokens = threads
        yield

    kept = Stored()  # the latest responses' conversations, for previous_response_id
    relaying = model if isinstance(model, RelayingModel) else None  # (a Protocol's isinstance takes 5-10 us)
    handlers: dict[Any, Callable] = {HTTPException: not_found, Exception: failed}
    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"]),
                             Route("/v1/responses", responses, methods=["POST"]),
                             Route("/v1/models", models, methods=["GET"])],
                     exception_handlers=handlers, lifespan=lifespan)


async def _read_body(request: Request, limit: int) -> bytes:
    """The body, refused unread past ``limit`` bytes (by its Content-Length, else as it arrives)."""
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > limit:
        raise RequestError(f"the request body is {int(length):,} bytes, over the limit of {limit:,}", status=413)
    body = bytearray()
    try:
        async for piece in request.stream():
            body += piece
            if len(body) > limit:
                raise RequestError(f"the request body is over the limit of {limit:,} bytes", status=413)
    except ClientDisconnect:
        raise ClientGone() from None
    return bytes(body)


def _decode(body: bytes) -> object:
    try:  # C speed; the parts read closely (tools, calls) are checked later
        return json.loads(body.decode("utf-8"), parse_constant=_not_json)
    except UnicodeDecodeError:
        raise RequestError("the request body is not UTF-8 text") from None
    except RecursionError:
        raise RequestError("the request body is not JSON that can be read: it is nested too deeply") from None
    except ValueError as error:
        raise RequestError(f"the request body is not JSON: {error}") from None


def _not_json(constant: str) -> None:
    raise ValueError(f"{constant} is not a JSON number")


def _failed(error: ModelError) -> bytes:
    """The event that ends a relayed stream the upstream broke off."""
    return f"data: {json.dumps(error_body(str(error), 'upstream_error'))}\n\n".encode()


def _sse(events: list[dict], headers: dict) -> Response:
    lines = [f"data: {json.dumps(event, ensure_ascii=False)}\n\n" for event in events] + ["data: [DONE]\n\n"]
    return _event_stream(lines, headers)


def _event_stream(lines: list[str], headers: dict) -> Response:
    """Server-sent events known whole (a reply is validated before any of it is sent), as one body: a
    StreamingResponse would hand each line to a worker thread and back."""
    return Response("".join(lines), media_type="text/event-stream", headers={"cache-control": "no-cache", **headers})


def _upstream_error(error: ModelError, secrets: tuple[str, ...]) -> JSONResponse:
    """The upstream's failure, with its status (502 when it gave none: no connection, no usable answer)."""
    status = error.status if error.status and 400 <= error.status <= 599 else 502
    message = f"upstream: {error}"
    for secret in secrets:
        message = message.replace(secret, "***") if secret else message
    return _error(status, message, "upstream_error", code=status)


def _error(status: int, message: str, kind: str = "invalid_request_error", param: str | None = None,
           code: str | int | None = None, headers: dict | None = None) -> JSONResponse:
    return JSONResponse(error_body(message, kind, param, code), status_code=status, headers=headers)
