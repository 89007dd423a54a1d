"""What `agent serve` adds to a request: the same requests, made with the openai SDK, straight to an upstream and
through `agent serve` in front of it (a child process), interleaved; the median time per request of each, side by
side, and the median of the differences (with its quartiles). Two upstreams, each answering every request at once
with a valid action (nothing is re-asked):

- instant: answers in a fraction of a millisecond, in one write per answer, on connections kept open; what is
  added in front of it is serve's own cost;
- http.server-style: Python's http.server, which writes the headers and the body (each event of a stream) in
  separate writes with Nagle's algorithm on, so that a client which delays acknowledging the headers waits about
  40 ms for the body (the stall serve's kept upstream connections once had).

Rows: a request with 20 tools (its translation built once and kept, as clients send the same tools every turn)
and one without tools, each answered whole and streamed. The column "serve CPU" is the CPU time serve's process used per
request (Linux): unlike the added time, it does not grow with the time a busy machine takes to give it a core.
The last column is what the same requests gain through a bare relay (bench/bare_relay.py: uvicorn as serve runs
it, each body passed to the upstream and its answer back, unread, with httpx on the event loop): the floor of a
Python relay on this stack, measured in the same run.
The straight requests to the http.server-style upstream are the openai SDK's own, which wait on it as said.

    python bench/bench_serve.py [REQUESTS] [CHECKOUT]   # default 300 per row and side; needs the `serve` extra

CHECKOUT: another checkout (a worktree) whose `agent serve` is measured instead of this one's, with this
benchmark, its upstreams and its clients, so that two versions are compared alike.
"""
from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import openai  # noqa: E402

from tests.serve_support import LISTENING, InstantUpstream, SplitUpstream, serving  # noqa: E402
from tests.support import stop  # noqa: E402

TOOLS = [{"type": "function", "function": {"name": f"tool_{number}", "description": f"Tool number {number}: "
          "combines two numbers and a label.", "parameters": {"type": "object", "properties": {
              "a": {"type": "number", "description": "the first number"}, "b": {"type": "number"},
              "label": {"type": "string", "enum": ["sum", "difference", "product"]}}, "required": ["a", "b"]}}}
         for number in range(20)]
CALL = json.dumps({"type": "tool_call", "tool": "tool_3", "arguments": {"a": 2, "b": 3}})
QUESTION = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2 + 3?"}]
ROWS = [("20 tools", {"tools": TOOLS}), ("20 tools, streamed", {"tools": TOOLS, "stream": True}),
        ("no tools", {}), ("no tools, streamed", {"stream": True})]


def answer(body: dict) -> str | dict:
    """A tool call for a request with tools sent straight (as an upstream with tool calling of its own answers), the
    protocol's action for one through serve (in the protocol's system prompt, without tools); a greeting for one
    without."""
    if "tools" in body:
        return {"name": "tool_3", "arguments": {"a": 2, "b": 3}}
    return CALL if "exactly one JSON value" in str(body["messages"][0].get("content")) else "Hello."


def timed(client: openai.OpenAI, request: dict) -> float:
    """Seconds until the whole answer is read (a stream to its end)."""
    started = time.perf_counter()
    answered = client.chat.completions.create(model="m", messages=QUESTION, **request)
    if request.get("stream"):
        for _ in answered:
            pass
    return time.perf_counter() - started


def cpu_seconds(pid: int) -> float:
    """The CPU time a process has used (Linux: /proc), NaN where it cannot be read."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return math.nan
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def bare_relay(upstream_url: str):
    """bench/bare_relay.py in front of the upstream, until the block ends; yields its base URL."""
    child = subprocess.Popen([sys.executable, str(ROOT / "bench" / "bare_relay.py"), upstream_url],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        found = LISTENING.search(child.stderr.readline()) if child.stderr else None
        if found is None:
            raise RuntimeError("bench/bare_relay.py did not start (it needs the serve extra)")
        yield found.group(1)
    finally:
        stop(child)


def compare(upstream_url: str, served_url: str, bare_url: str | None, pid: int, count: int) -> None:
    """The rows for one upstream; ``bare_url``: the bare relay in front of it, if measured."""
    direct, served = (openai.OpenAI(base_url=url, api_key="x", max_retries=0) for url in (upstream_url, served_url))
    bare = openai.OpenAI(base_url=bare_url, api_key="x", max_retries=0) if bare_url else None
    for label, request in ROWS:
        for _ in range(20):  # warm up: connections, imports, compiled validators, the kept translation
            timed(direct, request), timed(served, request), bare and timed(bare, request)
        used = cpu_seconds(pid)
        triples = []
        for _ in range(count):
            alone, through = timed(direct, request), timed(served, request)
            triples.append((alone, through, timed(bare, request) if bare else math.nan))
        used = (cpu_seconds(pid) - used) / count * 1000
        alone = statistics.median(a for a, _, _ in triples) * 1000
        through = statistics.median(b for _, b, _ in triples) * 1000
        quartiles = statistics.quantiles([(b - a) * 1000 for a, b, _ in triples], n=4)
        floor = statistics.median((c - a) * 1000 for a, _, c in triples) if bare else math.nan
        print(f"  {label:<22} {alone:9.2f} {through:10.2f} {quartiles[1]:8.2f}   {quartiles[0]:5.2f} to "
              f"{quartiles[2]:<5.2f} {used:9.2f} {floor:11.2f}")
    for client in (direct, served, bare):
        if client is not None:
            client.close()


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    if len(sys.argv) > 2:  # `python -m agent` finds the package of the folder it starts in first
        os.chdir(sys.argv[2])
    print(f"{'median per request (ms)':<24} {'upstream':>9} {'via serve':>10} {'added':>8}   added, quartiles "
          f"{'serve CPU':>9} {'bare relay':>11}")
    with InstantUpstream(answer) as upstream, serving("--upstream-url", upstream.url, "--model", "m") as (
            url, child, _), bare_relay(upstream.url) as bare:
        print("instant upstream")
        compare(upstream.url, url, bare, child.pid, count)
    with SplitUpstream(answer) as upstream, serving("--upstream-url", upstream.url, "--model", "m") as (url, child, _):
        print("http.server-style upstream (no bare relay: it would wait the 40 ms serve does not)")
        compare(upstream.url, url, None, child.pid, count)


if __name__ == "__main__":
    main()
