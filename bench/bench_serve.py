"""What `agent serve` adds to a request: the same requests, made with the openai SDK, straight to the scripted
upstream of the tests and through `agent serve` in front of it (a child process), interleaved; the median time
per request of each, side by side, and the difference. The upstream answers every request at once with a valid
action, so nothing is re-asked.

    python bench/bench_serve.py [REQUESTS]      # default 300 per row and side; needs the `serve` extra
"""
from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import openai  # noqa: E402

from tests.openai_server import ScriptedServer  # noqa: E402
from tests.serve_support import serving  # noqa: E402

TOOLS = [{"type": "function", "function": {"name": name, "description": f"{name.title()} two numbers.", "parameters": {
    "type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}}}
    for name in ("add", "subtract", "multiply", "divide")]
CALL = json.dumps({"type": "tool_call", "tool": "add", "arguments": {"a": 2, "b": 3}})


def history(turns: int) -> list[dict]:
    """A question and ``turns`` earlier calls with their results, as a client sends them."""
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Add up 1 to 50, in pairs."}]
    for turn in range(turns):
        messages += [{"role": "assistant", "content": None, "tool_calls": [{
                          "id": f"call_{turn}", "type": "function",
                          "function": {"name": "add", "arguments": json.dumps({"a": turn, "b": turn + 1})}}]},
                     {"role": "tool", "tool_call_id": f"call_{turn}", "content": str(2 * turn + 1)}]
    return messages


def asks_for_a_call(body: dict) -> bool:
    """A request with tools, sent straight or through serve (then in the protocol's system prompt, without tools)."""
    return "tools" in body or "exactly one JSON value" in str(body["messages"][0].get("content"))


def timed(client: openai.OpenAI, request: dict) -> float:
    started = time.perf_counter()
    client.chat.completions.create(model="m", **request)
    return time.perf_counter() - started


async def in_process(count: int, rows: list) -> None:
    """serve's own work per request, without the network: the app called in process (httpx2's ASGI transport)
    in front of a model that answers at once."""
    import httpx2

    from agent.models import Reply
    from agent.serve.app import create_app

    class Instant:
        def complete(self, messages, **options):
            return Reply(CALL if "exactly one JSON value" in messages[0]["content"] else "Hello.",
                         usage={"prompt_tokens": 1, "completion_tokens": 1})

    transport = httpx2.ASGITransport(app=create_app(Instant(), "m"))
    async with httpx2.AsyncClient(transport=transport, base_url="http://serve") as client:
        print(f"\n{'in process, instant model':<28} {'per request (ms)':>29}")
        for label, request in rows:
            times = []
            for _ in range(count + 20):
                started = time.perf_counter()
                response = await client.post("/v1/chat/completions", json={"model": "m", **request})
                times.append(time.perf_counter() - started)
                assert response.status_code == 200, response.text
            print(f"{label:<28} {statistics.median(times[20:]) * 1000:29.2f}")


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    rows = [("tools, 1 message", {"messages": history(0)[1:], "tools": TOOLS}),
            ("tools, 40 earlier calls", {"messages": history(40), "tools": TOOLS}),
            ("no tools (passed through)", {"messages": history(0)[1:]})]
    with ScriptedServer() as upstream:
        upstream.answer_when(asks_for_a_call, CALL)
        upstream.answer_when(lambda body: not asks_for_a_call(body), "Hello.")
        with serving("--upstream-url", upstream.url, "--model", "m") as (url, _, _):
            direct = openai.OpenAI(base_url=upstream.url, api_key="x", max_retries=0)
            served = openai.OpenAI(base_url=url, api_key="x", max_retries=0)
            print(f"{'median per request (ms)':<28} {'upstream':>9} {'via serve':>10} {'added':>8}")
            for label, request in rows:
                for _ in range(20):  # warm up: connections, imports, compiled validators
                    timed(direct, request), timed(served, request)
                pairs = [(timed(direct, request), timed(served, request)) for _ in range(count)]
                alone = statistics.median(a for a, _ in pairs) * 1000
                through = statistics.median(b for _, b in pairs) * 1000
                added = statistics.median(b - a for a, b in pairs) * 1000
                print(f"{label:<28} {alone:9.2f} {through:10.2f} {added:8.2f}")
    asyncio.run(in_process(count, rows))


if __name__ == "__main__":
    main()
