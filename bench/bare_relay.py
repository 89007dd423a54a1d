"""The least a Python relay on serve's stack can add: an ASGI app on uvicorn (with httptools and uvloop, as
`agent serve` runs) that passes each POST's body to the upstream with one kept httpx connection (async, on the
event loop: no worker thread) and its answer back, unread. No routing, no checks, no limits, no translation: the
floor bench_serve.py measures `agent serve` against, never a server to use.

    python bench/bare_relay.py UPSTREAM_BASE_URL   # prints "listening on http://127.0.0.1:PORT/v1" on stderr
"""
from __future__ import annotations

import socket
import sys

import httpx2
import uvicorn


def relay_app(upstream: str):
    client = httpx2.AsyncClient(timeout=30)

    async def app(scope, receive, send) -> None:
        if scope["type"] != "http":
            return
        body = bytearray()
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        path = scope["path"].removeprefix("/v1")
        request = client.build_request(scope["method"], upstream + path, content=bytes(body),
                                       headers={"content-type": "application/json"})
        response = await client.send(request, stream=True)
        await send({"type": "http.response.start", "status": response.status_code,
                    "headers": [(b"content-type", response.headers.get("content-type", "").encode())]})
        async for piece in response.aiter_raw():
            await send({"type": "http.response.body", "body": piece, "more_body": True})
        await response.aclose()
        await send({"type": "http.response.body", "body": b""})

    return app


def main() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    print(f"listening on http://127.0.0.1:{listener.getsockname()[1]}/v1", file=sys.stderr, flush=True)
    config = uvicorn.Config(relay_app(sys.argv[1].rstrip("/")), log_level="warning", access_log=False,
                            http="httptools", loop="uvloop")
    uvicorn.Server(config).run(sockets=[listener])


if __name__ == "__main__":
    main()
