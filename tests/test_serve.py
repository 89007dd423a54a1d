"""`agent serve` in front of the scripted upstream, driven by the real openai SDK as its client."""
import asyncio
import json
import select
import signal
import socket
import subprocess
import sys
import threading
import time

import httpx2 as httpx
import openai
import pytest

from tests.openai_server import ScriptedServer
from tests.serve_support import SplitUpstream, serve_fixtures, serving
from tests.support import action, child_env

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

ADD = {"type": "function", "function": {"name": "add", "description": "Add two numbers.", "parameters": {
    "type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}}}
MULTIPLY = {"type": "function", "function": {"name": "multiply", "description": "Multiply two numbers.", "parameters": {
    "type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}}}
TOOLS = [ADD, MULTIPLY]
FUNCTIONS = {"add": lambda a, b: a + b, "multiply": lambda a, b: a * b}
QUESTION = [{"role": "user", "content": "What is (2 + 3) * 4?"}]


upstream, served, up, client = serve_fixtures("--timeout", "10")


def sent(request) -> list[dict]:
    return request["body"]["messages"]


def test_a_client_runs_its_own_multi_turn_tool_loop_through_serve(up, client):
    up.replies(action("add", a=2, b=3), action("multiply", a=5, b=4), action(answer="(2 + 3) * 4 = 20"))
    messages, calls = list(QUESTION), []
    for _ in range(5):  # the client's own loop, as the openai SDK's users write it
        choice = client.chat.completions.create(model="anything", messages=messages, tools=TOOLS).choices[0]
        if choice.finish_reason != "tool_calls":
            break
        messages.append(choice.message.model_dump(exclude_none=True))
        for call in choice.message.tool_calls:
            calls.append((call.function.name, json.loads(call.function.arguments)))
            output = FUNCTIONS[call.function.name](**json.loads(call.function.arguments))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": str(output)})
    assert choice.finish_reason == "stop" and choice.message.content == "(2 + 3) * 4 = 20"
    assert calls == [("add", {"a": 2, "b": 3}), ("multiply", {"a": 5, "b": 4})]
    last = up.requests[-1]["body"]
    assert last["model"] == "up-model" and "tools" not in last and "tool_choice" not in last
    assert "- multiply(a: number, b: number) — Multiply two numbers." in sent(up.requests[-1])[0]["content"]
    assert sent(up.requests[-1])[1:] == [
        QUESTION[0],
        {"role": "assistant", "content": f"[{action('add', a=2, b=3)}]"}, {"role": "user", "content": "Result of add:\n5\n"},
        {"role": "assistant", "content": f"[{action('multiply', a=5, b=4)}]"},
        {"role": "user", "content": "Result of multiply:\n20\n"}]


def test_parallel_calls_come_back_as_several_tool_calls(up, client):
    up.replies(json.dumps([json.loads(action("add", a=1, b=2)), json.loads(action("multiply", a=3, b=4))]))
    choice = client.chat.completions.create(model="m", messages=QUESTION, tools=TOOLS).choices[0]
    calls = choice.message.tool_calls
    assert [(c.function.name, json.loads(c.function.arguments)) for c in calls] == [
        ("add", {"a": 1, "b": 2}), ("multiply", {"a": 3, "b": 4})]
    assert len({c.id for c in calls}) == 2 and all(c.id.startswith("call_") for c in calls)


def test_parallel_tool_calls_false_re_asks_a_batch_for_one_call(up, client):
    up.replies(json.dumps([json.loads(action("add", a=1, b=2)), json.loads(action("multiply", a=3, b=4))]),
               action("add", a=1, b=2))
    response = client.chat.completions.with_raw_response.create(model="m", messages=QUESTION, tools=TOOLS,
                                                                parallel_tool_calls=False)
    assert len(response.parse().choices[0].message.tool_calls) == 1
    assert response.headers["x-agent-reasks"] == "1"
    assert "Send one tool call per reply" in sent(up.requests[0])[0]["content"]


@pytest.mark.parametrize("choice, first, then, finish", [
    ("none", action("add", a=1, b=2), action(answer="I would add them: 3"), "stop"),
    ("required", action(answer="3"), action("add", a=1, b=2), "tool_calls"),
    ({"type": "function", "function": {"name": "multiply"}}, action("add", a=1, b=2), action("multiply", a=1, b=2),
     "tool_calls"),
])
def test_tool_choice_is_honoured_by_re_asking_a_reply_that_ignores_it(up, client, choice, first, then, finish):
    up.replies(first, then)
    response = client.chat.completions.with_raw_response.create(model="m", messages=QUESTION, tools=TOOLS,
                                                                tool_choice=choice)
    completion = response.parse()
    assert completion.choices[0].finish_reason == finish and response.headers["x-agent-reasks"] == "1"
    if finish == "tool_calls":
        assert completion.choices[0].message.tool_calls[0].function.name == json.loads(then)["tool"]
    else:
        assert completion.choices[0].message.content == "I would add them: 3"
    assert "For this reply:" in sent(up.requests[0])[0]["content"]
    reask = sent(up.requests[1])[-1]
    assert reask["role"] == "user" and reask["content"].startswith("Your last reply could not be used")


def test_a_malformed_reply_is_re_asked_and_usage_adds_up_every_upstream_call(up, client):
    up.reply("Sure! I will add 2 and 3.", usage={"prompt_tokens": 100, "completion_tokens": 10})
    up.reply(action("add", a=2, b=3), usage={"prompt_tokens": 130, "completion_tokens": 20})
    response = client.chat.completions.with_raw_response.create(model="m", messages=QUESTION, tools=TOOLS)
    completion = response.parse()
    assert completion.choices[0].message.tool_calls[0].function.arguments == '{"a": 2, "b": 3}'
    assert response.headers["x-agent-reasks"] == "1"
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens, completion.usage.total_tokens) == (
        230, 30, 260)
    retry = sent(up.requests[1])
    assert retry[-2] == {"role": "assistant", "content": "Sure! I will add 2 and 3."}
    assert "(no_json)" in retry[-1]["content"]


def test_usage_is_null_when_an_upstream_call_reported_none(up, client):
    """llama-cpp-python's server sends no usage in a stream (serve asks the upstream by streaming): the
    tokens are unknown, not 0, in chat completions and the Responses API alike."""
    up.reply("Sure! I will add 2 and 3.", usage={"prompt_tokens": 100, "completion_tokens": 10})
    up.reply(action("add", a=2, b=3), usage=False)
    completion = client.chat.completions.create(model="m", messages=QUESTION, tools=TOOLS)
    assert completion.choices[0].finish_reason == "tool_calls" and completion.usage is None
    up.reply(action(answer="5"), usage=False)
    response = client.responses.create(model="m", input="What is 2 + 3?", tools=[
        {"type": "function", "name": "add", "parameters": TOOLS[0]["function"]["parameters"]}])
    assert response.output_text == "5" and response.usage is None


def test_a_reply_still_malformed_after_the_re_asks_is_a_502_saying_so(up, client):
    up.replies(*["no JSON here"] * 4)
    with pytest.raises(openai.APIStatusError) as caught:
        client.chat.completions.create(model="m", messages=QUESTION, tools=TOOLS)
    assert caught.value.status_code == 502
    assert "stayed malformed after 3 re-asks" in caught.value.message and "no_json" in caught.value.message
    assert caught.value.response.headers["x-agent-reasks"] == "3"


def test_streaming_a_tools_request_delivers_the_calls_as_deltas(up, client):
    up.reply(json.dumps([json.loads(action("add", a=2, b=3)), json.loads(action("multiply", a=5, b=4))]),
             usage={"prompt_tokens": 50, "completion_tokens": 9})
    stream = client.chat.completions.create(model="m", messages=QUESTION, tools=TOOLS, stream=True,
                                            stream_options={"include_usage": True})
    calls, finish, usage = {}, None, None
    for chunk in stream:
        usage = chunk.usage or usage
        for choice in chunk.choices:
            finish = choice.finish_reason or finish
            for delta in choice.delta.tool_calls or []:
                slot = calls.setdefault(delta.index, {"id": None, "name": "", "arguments": ""})
                slot["id"] = slot["id"] or delta.id
                slot["name"] += delta.function.name or ""
                slot["arguments"] += delta.function.arguments or ""
    assert finish == "tool_calls" and usage.total_tokens == 59
    assert [(c["name"], json.loads(c["arguments"])) for _, c in sorted(calls.items())] == [
        ("add", {"a": 2, "b": 3}), ("multiply", {"a": 5, "b": 4})]
    assert all(c["id"].startswith("call_") for c in calls.values())


def test_streaming_a_final_answer(up, client):
    up.replies(action(answer="It is 20."))
    stream = client.chat.completions.create(model="m", messages=QUESTION, tools=TOOLS, stream=True)
    pieces = [(c.choices[0].delta.content, c.choices[0].finish_reason) for c in stream if c.choices]
    assert "".join(p or "" for p, _ in pieces) == "It is 20." and pieces[-1][1] == "stop"


def test_a_request_without_tools_is_passed_through_unchanged(up, client):
    up.replies("Hello there.")
    completion = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}],
                                                temperature=0.3, logit_bias={"50256": -100})
    assert completion.choices[0].message.content == "Hello there."
    assert completion.id == "chatcmpl-1"  # the upstream's own completion, not one made here
    body = up.requests[0]["body"]
    assert body["messages"] == [{"role": "user", "content": "hi"}]
    assert (body["model"], body["temperature"], body["logit_bias"]) == ("up-model", 0.3, {"50256": -100})


def test_a_streamed_request_without_tools_is_relayed_as_it_streams(up, client):
    up.reply("Hello streamed world.", pause=0.05)
    started, arrivals, text = time.monotonic(), [], ""
    for chunk in client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], stream=True):
        if chunk.choices and chunk.choices[0].delta.content:
            arrivals.append(time.monotonic() - started)
            text += chunk.choices[0].delta.content
    assert text == "Hello streamed world."
    assert arrivals[-1] - arrivals[0] > 0.2  # piece by piece, not gathered first


@pytest.mark.parametrize("tools", [TOOLS, None])
def test_an_upstream_error_passes_through_with_its_status(up, client, tools):
    up.error(400, body="This model's maximum context length is 4096 tokens")
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="m", messages=QUESTION, **({"tools": tools} if tools else {}))
    assert caught.value.status_code == 400
    assert "maximum context length is 4096 tokens" in caught.value.message


def test_an_upstream_that_cannot_be_reached_is_a_502(client):
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    dead = f"http://127.0.0.1:{free.getsockname()[1]}/v1"
    free.close()
    with serving("--upstream-url", dead, "--model", "m", "--timeout", "2") as (url, _, _):
        gone = openai.OpenAI(base_url=url, api_key="x", max_retries=0)
        with pytest.raises(openai.APIStatusError) as caught:
            gone.chat.completions.create(model="m", messages=QUESTION, tools=TOOLS)
    assert caught.value.status_code == 502 and "cannot connect" in caught.value.message


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the delayed acknowledgement is Linux's")
def test_an_upstream_that_writes_headers_and_body_apart_is_answered_without_a_stall():
    """Python's http.server writes a response's headers and its body apart, with Nagle's algorithm on: the body
    waits until the headers are acknowledged, which Linux delays by 40 ms at least on a connection kept open.
    Serve's upstream connections acknowledge at once: its requests take far less than that (the median of a few)."""

    def answer(body: dict) -> str:
        return action("add", a=2, b=3) if "exactly one JSON value" in sent({"body": body})[0]["content"] else "Hi."

    with SplitUpstream(answer) as upstream, serving("--upstream-url", upstream.url, "--model", "m") as (url, _, _):
        client = openai.OpenAI(base_url=url, api_key="x", max_retries=0)
        for request in [{"tools": TOOLS}, {"tools": TOOLS, "stream": True}, {}, {"stream": True}]:
            times = []
            for _ in range(7):  # the first makes the connection, on which Linux acknowledges at once for a while
                started = time.monotonic()
                answered = client.chat.completions.create(model="m", messages=QUESTION, **request)
                if request.get("stream"):
                    list(answered)
                times.append(time.monotonic() - started)
            assert sorted(times)[3] < 0.03, (request, times)


def test_the_models_list_names_the_served_model(client):
    assert [m.id for m in client.models.list()] == ["up-model"]


def test_requests_are_served_concurrently(up, served):
    for _ in range(3):
        up.reply(action(answer="done"), delay=0.6)
    results, started = [], time.monotonic()

    def ask():
        clients = openai.OpenAI(base_url=served[0], api_key="x", max_retries=0)
        results.append(clients.chat.completions.create(model="m", messages=QUESTION, tools=TOOLS))

    threads = [threading.Thread(target=ask) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=20)
    assert [r.choices[0].message.content for r in results] == ["done"] * 3
    assert time.monotonic() - started < 1.5  # three 0.6 s upstream calls, side by side


@pytest.mark.parametrize("content, status, says", [
    (b"{not json", 400, "the request body is not JSON"),
    (b"\xff\xfe", 400, "not UTF-8"),
    (b"[1, 2]", 400, "a JSON object with messages"),
    (b"[" * 100_000 + b"]" * 100_000, 400, "nested too deeply"),
    (json.dumps({"messages": QUESTION, "tools": TOOLS, "tool_choice": "sometimes"}).encode(), 400, "tool_choice"),
    (json.dumps({"messages": QUESTION, "tools": TOOLS, "padding": "x" * (9 * 2**20)}).encode(), 413, "over the limit"),
])
def test_a_hostile_body_gets_an_openai_style_error(served, content, status, says):
    response = httpx.post(f"{served[0]}/chat/completions", content=content, timeout=20,
                          headers={"content-type": "application/json"})
    assert response.status_code == status
    error = response.json()["error"]
    assert says in error["message"] and error["type"] == "invalid_request_error"


def wait_for(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)
    return condition()


def asks(words: str):
    """Whether an upstream request carries the client's question ``words``."""
    return lambda body: words in json.dumps(body["messages"][1:])


@pytest.mark.parametrize("slow", ["thinks after the headers", "sends nothing until it has begun"])
def test_clients_that_leave_stop_their_upstream_calls_and_hold_no_one_up(slow):
    """40 clients leave 0.2 s after asking; the upstream calls they got to are dropped at the upstream's first
    piece of answer (the upstream sees its client leave), and a request made meanwhile is answered at once."""
    waits = {"first": 2.0} if slow == "thinks after the headers" else {"delay": 2.0}
    with ScriptedServer() as upstream, serving("--upstream-url", upstream.url, "--model", "m", "--timeout",
                                                "30") as (url, _, said):
        upstream.answer_when(asks("leaving"), action(answer="too late for anyone"), pause=0.3, **waits)
        upstream.answer_when(asks("staying"), action(answer="on time"))

        def leave():
            with pytest.raises(httpx.TimeoutException):
                httpx.post(f"{url}/chat/completions", timeout=0.2,
                           json={"messages": [{"role": "user", "content": "leaving"}], "tools": TOOLS})

        leaving = [threading.Thread(target=leave) for _ in range(40)]
        for thread in leaving:
            thread.start()
        for thread in leaving:
            thread.join(timeout=10)
        time.sleep(0.3)  # every request they got to make is made
        started = time.monotonic()
        answer = httpx.post(f"{url}/chat/completions", timeout=20,
                            json={"messages": [{"role": "user", "content": "staying"}], "tools": TOOLS})
        assert answer.json()["choices"][0]["message"]["content"] == "on time"
        assert time.monotonic() - started < 1.5  # not behind the others, whose upstream calls take 2 s to begin
        made = [r for r in upstream.requests if asks("leaving")(r["body"])]
        assert len(made) >= 10  # (a client that left before its call began cost none)
        assert wait_for(lambda: all(r.get("left") for r in made), 10)  # each call stopped
        assert len(upstream.requests) == len(made) + 1  # and none re-asked
        assert "Traceback" not in said()


def test_a_streamed_pass_through_whose_client_left_closes_its_upstream_connection(up):
    with serving("--upstream-url", up.url, "--model", "m", "--timeout", "20") as (url, _, said):
        up.reply("a long answer " * 30, pause=0.25)  # about 100 pieces: 25 s
        with httpx.stream("POST", f"{url}/chat/completions", timeout=20,
                          json={"messages": [{"role": "user", "content": "hi"}], "stream": True}) as response:
            assert next(line for line in response.iter_lines() if line.startswith("data:"))
        left = time.monotonic()
        assert wait_for(lambda: up.requests[0].get("left"), 10)
        assert time.monotonic() - left < 3  # at the upstream's next piece, long before --timeout
        assert "Traceback" not in said()


@pytest.mark.parametrize("stream", [False, True])
def test_a_client_that_leaves_during_a_passed_through_request_stops_it(up, stream):
    """Unstreamed, the upstream sends its answer slowly (headers at once, then a byte each 0.05 s); streamed, it
    thinks for a second before its first piece: either way it sees its client leave soon after ours did."""
    with serving("--upstream-url", up.url, "--model", "m", "--timeout", "20") as (url, _, said):
        if stream:
            up.reply("slow", first=1.0, pause=0.5)
        else:
            up.respond(200, {"choices": [{"message": {"role": "assistant", "content": "slow " * 50}}]}, trickle=0.05)
        with pytest.raises(httpx.TimeoutException):
            httpx.post(f"{url}/chat/completions", timeout=0.3, json={
                "messages": [{"role": "user", "content": "hi"}], "stream": stream})
        left = time.monotonic()
        assert wait_for(lambda: up.requests and up.requests[0].get("left"), 10)
        assert time.monotonic() - left < 3
        assert "Traceback" not in said()


def test_a_client_that_leaves_while_sending_its_body_costs_nothing(up):
    with serving("--upstream-url", up.url, "--model", "m") as (url, _, said):
        host, port = url.split("//")[1].split("/")[0].split(":")
        with socket.create_connection((host, int(port))) as sock:
            sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 1000\r\n\r\n{\"messages\": [")
            time.sleep(0.3)
        assert httpx.get(f"{url}/models", timeout=10).status_code == 200
        assert up.requests == [] and "Traceback" not in said() and "Exception" not in said()


@pytest.fixture(scope="module")
def strict(upstream):
    """`agent serve` with a 2 s client timeout and 4 connections at most: (host, port, base URL, its stderr)."""
    with serving("--upstream-url", upstream.url, "--model", "m", "--client-timeout", "2",
                 "--max-connections", "4") as (url, _, said):
        host, port = url.split("//")[1].split("/")[0].rsplit(":", 1)
        yield host, int(port), url, said


def answered_within(sock: socket.socket, seconds: float) -> tuple[bytes, float]:
    """What the server sends before it closes the connection, and after how long (at most ``seconds``)."""
    sock.settimeout(seconds)
    started, got = time.monotonic(), b""
    try:
        while chunk := sock.recv(65536):
            got += chunk
    except ConnectionResetError:
        pass
    return got, time.monotonic() - started


def dribble(sock: socket.socket, data: bytes, pause: float) -> None:
    """Send ``data`` a byte each ``pause`` seconds, until the server answers (or 10 s have passed)."""
    deadline = time.monotonic() + 10
    for byte in data:
        if select.select([sock], [], [], 0)[0] or time.monotonic() > deadline:
            return
        sock.sendall(bytes([byte]))
        time.sleep(pause)


HEAD = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"


@pytest.mark.parametrize("sent, status", [
    (b"", b"408"),  # a connection that sends nothing
    (HEAD, b"408"),  # headers that never end
    (HEAD + b"Content-Length: 500\r\n\r\n" + b'{"messages": [', b"408"),  # a body that never ends
])
def test_a_slow_client_is_answered_and_cut_off_at_the_client_timeout(strict, up, sent, status):
    host, port, _, said = strict
    with socket.create_connection((host, port)) as sock:
        sock.sendall(sent)
        got, waited = answered_within(sock, 10)
    assert got.startswith(b"HTTP/1.1 " + status) and 1.5 < waited < 5
    assert json.loads(got.split(b"\r\n\r\n", 1)[1])["error"]["message"]
    assert up.requests == [] and "Traceback" not in said()


def test_a_body_sent_a_byte_a_second_is_cut_off_at_the_client_timeout(strict, up):
    host, port, _, said = strict
    body = json.dumps({"messages": QUESTION, "tools": TOOLS}).encode()
    with socket.create_connection((host, port)) as sock:
        sock.sendall(HEAD + b"Content-Length: %d\r\n\r\n" % len(body))
        started = time.monotonic()
        dribble(sock, body, 0.5)
        got, _ = answered_within(sock, 5)
    assert got.startswith(b"HTTP/1.1 408") and b"the request body did not arrive within 2 s" in got
    assert time.monotonic() - started < 8 and up.requests == []


def test_headers_sent_a_byte_at_a_time_get_no_more_time_than_any(strict, up):
    host, port, _, said = strict
    with socket.create_connection((host, port)) as sock:
        started = time.monotonic()
        dribble(sock, HEAD * 10, 0.2)
        got, _ = answered_within(sock, 5)
    assert got.startswith(b"HTTP/1.1 408") and time.monotonic() - started < 5 and up.requests == []


def test_an_idle_connection_after_an_answer_closes_after_the_keep_alive_time(strict):
    host, port, _, _ = strict
    with socket.create_connection((host, port)) as sock:
        sock.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
        got, waited = answered_within(sock, 15)
    assert got.startswith(b"HTTP/1.1 200") and 4 < waited < 10


def test_headers_without_end_are_refused_before_they_cost_memory(strict):
    host, port, url, _ = strict
    with socket.create_connection((host, port)) as sock:
        sock.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\n")
        with pytest.raises(OSError):  # the server stops reading and closes
            for number in range(2000):
                sock.sendall(b"X-Padding-%d: %s\r\n" % (number, b"a" * 50_000))
        got, _ = answered_within(sock, 5)
    assert got == b"" or got.startswith(b"HTTP/1.1 431")
    assert httpx.get(f"{url}/models", timeout=10).status_code == 200


def test_connections_beyond_the_most_are_refused_at_once_and_the_others_served(strict, up):
    host, port, url, said = strict
    held = [socket.create_connection((host, port)) for _ in range(4)]
    try:
        time.sleep(0.2)
        with socket.create_connection((host, port)) as extra:
            got, waited = answered_within(extra, 5)
        assert got.startswith(b"HTTP/1.1 503") and b"4 connections open, the most it takes" in got and waited < 1
    finally:
        for sock in held:
            sock.close()
    up.replies(action(answer="room again"))
    response = httpx.post(f"{url}/chat/completions", json={"messages": QUESTION, "tools": TOOLS}, timeout=10)
    assert response.status_code == 200, response.text


def test_a_client_that_stops_reading_a_relayed_stream_is_cut_off_and_the_upstream_let_go(strict, up):
    """The upstream streams about 4 MB at once; the client reads none of it."""
    host, port, _, said = strict
    up.reply("x" * 4_000_000)
    request = json.dumps({"messages": [{"role": "user", "content": "hi"}], "stream": True}).encode()
    with socket.create_connection((host, port)) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.sendall(HEAD + b"Content-Length: %d\r\n\r\n" % len(request) + request)
        assert wait_for(lambda: up.requests and up.requests[0].get("left"), 15)  # the upstream was let go
    assert "Traceback" not in said()


def rss(pid: int) -> int:
    """A process's resident memory, in bytes."""
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS:"))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_small_request_that_would_expand_into_a_huge_one_is_refused_at_once_and_leaves_no_memory_behind(up):
    from tests.test_serve_translate import HUGE_DESCRIPTION, LONG_ENUM

    with serving("--upstream-url", up.url, "--model", "m", "--constrain") as (url, child, _):
        up.replies(action(answer="warm"), action(answer="still here"))
        httpx.post(f"{url}/chat/completions", json={"messages": QUESTION, "tools": TOOLS}, timeout=20)
        before = rss(child.pid)
        for tool in [HUGE_DESCRIPTION, LONG_ENUM] * 3:
            body = json.dumps({"messages": QUESTION, "tools": [tool]}).encode()
            assert len(body) < 200_000
            started = time.monotonic()
            response = httpx.post(f"{url}/chat/completions", content=body, timeout=20)
            assert time.monotonic() - started < 10 and response.status_code == 400
            assert response.json()["error"]["param"] == "tools[0].function.parameters"
            assert "too large once its $refs are inlined" in response.json()["error"]["message"]
        assert len(up.requests) == 1  # none of them reached the upstream
        assert rss(child.pid) - before < 100 * 2**20
        answer = httpx.post(f"{url}/chat/completions", json={"messages": QUESTION, "tools": TOOLS}, timeout=20)
        assert answer.json()["choices"][0]["message"]["content"] == "still here"


def deep_parameters(levels: int) -> bytes:
    schema = '{"type": "object", "properties": {"x": ' * levels + "{}" + "}}" * levels
    return (f'{{"messages": {json.dumps(QUESTION)}, "tools": [{{"type": "function", "function": {{"name": "f", '
            f'"parameters": {schema}}}}}]}}').encode()


ANSWERED = {"role": "assistant", "content": None, "tool_calls": [
    {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'}}]}


@pytest.mark.parametrize("content, param", [
    (json.dumps({"messages": [*QUESTION, ANSWERED, {"role": "tool", "tool_call_id": {"id": "c1"}, "content": "3"}],
                 "tools": TOOLS}).encode(), "messages[2].tool_call_id"),
    (json.dumps({"messages": [*QUESTION, ANSWERED, {"role": "tool", "tool_call_id": ["c1"], "content": "3"}],
                 "tools": TOOLS}).encode(), "messages[2].tool_call_id"),
    (deep_parameters(450), "tools[0].function.parameters"),  # 900 objects deep
    (deep_parameters(100), "tools[0].function.parameters"),
    (json.dumps({"messages": QUESTION, "tools": TOOLS, "temperature": {"hot": True}}).encode(), "temperature"),
    (b'{"messages": [{"role": "user", "content": "hi"}], "tools": [], "temperature": NaN}', None),
])
def test_a_request_of_the_wrong_types_is_a_400_naming_the_field(served, up, content, param):
    response = httpx.post(f"{served[0]}/chat/completions", content=content, timeout=20,
                          headers={"content-type": "application/json"})
    error = response.json()["error"]
    assert response.status_code == 400 and error["param"] == param and error["type"] == "invalid_request_error"
    assert param is not None or "NaN is not a JSON number" in error["message"]
    assert up.requests == []


def test_a_body_without_a_length_is_capped_as_it_arrives(served):
    def endless():
        yield b'{"messages": [{"role": "user", "content": "'
        for _ in range(2000):
            yield b"x" * 8192

    response = httpx.post(f"{served[0]}/chat/completions", content=endless(), timeout=20)
    assert response.status_code == 413


def test_an_unknown_route_is_a_404_in_openai_form(served):
    response = httpx.post(f"{served[0]}/embeddings", json={"input": "x"})
    assert response.status_code == 404 and "agent serve answers POST /v1/chat/completions" in response.json()["error"][
        "message"]
    assert httpx.get(f"{served[0]}/chat/completions").status_code == 405


def test_with_an_api_key_a_client_must_present_it_and_the_upstream_key_is_never_echoed(upstream, up):
    secret = "sk-upstream-secret-123"
    with serving("--upstream-url", upstream.url, "--model", "m", "--upstream-key", secret,
                 env={"AGENT_SERVE_API_KEY": "client-key"}) as (url, _, said):
        stranger = openai.OpenAI(base_url=url, api_key="wrong", max_retries=0)
        with pytest.raises(openai.AuthenticationError) as caught:
            stranger.chat.completions.create(model="m", messages=QUESTION, tools=TOOLS)
        assert "Authorization: Bearer KEY" in caught.value.message
        with pytest.raises(openai.AuthenticationError):
            stranger.models.list()
        keyless = httpx.post(f"{url}/chat/completions", json={"messages": QUESTION, "tools": TOOLS})
        assert keyless.status_code == 401 and keyless.json()["error"]["code"] == "invalid_api_key"
        friend = openai.OpenAI(base_url=url, api_key="client-key", max_retries=0)
        up.replies(action(answer="hi"))
        assert friend.chat.completions.create(model="m", messages=QUESTION, tools=TOOLS).choices[0].message.content == "hi"
        assert up.requests[0]["headers"]["authorization"] == f"Bearer {secret}"  # the upstream gets its own key
        up.error(401, body=f"invalid api key {secret}")  # an upstream that echoes the key it was sent
        with pytest.raises(openai.AuthenticationError) as caught:
            friend.chat.completions.create(model="m", messages=QUESTION, tools=TOOLS)
        assert secret not in caught.value.response.text and "client-key" not in caught.value.response.text
        assert "invalid api key ***" in caught.value.message
        assert secret not in said()


def serve_exit(*args, **run):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=60, env=child_env(),
                          stdin=subprocess.DEVNULL, **run)


def test_a_taken_port_is_a_usage_error(upstream):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = serve_exit("-m", "agent", "serve", "--upstream-url", upstream.url, "-m", "m", "--port", str(port))
    assert done.returncode == 2 and f"cannot listen on 127.0.0.1:{port}" in done.stderr
    assert "Traceback" not in done.stderr


def test_without_the_serve_extra_the_command_says_how_to_install_it(upstream):
    blocked = ("import sys; sys.modules['starlette'] = None; from agent.cli import main; "
               f"sys.exit(main(['serve', '--upstream-url', {upstream.url!r}, '-m', 'm']))")
    done = serve_exit("-c", blocked)
    assert done.returncode == 2 and "pip install '.[serve]' in the project folder" in done.stderr
    assert "Traceback" not in done.stderr


def test_listening_beyond_this_machine_without_a_key_is_warned_about(upstream):
    with serving("--upstream-url", upstream.url, "-m", "m", "--host", "0.0.0.0") as (_, _, said):
        assert "warning: 0.0.0.0 is reachable from other machines and no --api-key is set" in said()


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_or_a_termination_request_stops_the_server_with_the_interrupted_exit_code(upstream, stop):
    with serving("--upstream-url", upstream.url, "-m", "m") as (url, child, said):
        assert httpx.get(f"{url}/models").status_code == 200
        child.send_signal(stop)
        assert child.wait(timeout=10) == 130
        assert said().endswith("agent: interrupted\n") and "Traceback" not in said()


def in_process(model, *requests, **settings) -> list:
    """The app called in process (httpx2's ASGI transport) with a model that has no pass-through of its own, as
    the embedded model: each request's response."""
    from agent.serve.app import create_app

    async def send():
        transport = httpx.ASGITransport(app=create_app(model, "local", **settings))
        async with httpx.AsyncClient(transport=transport, base_url="http://serve") as client:
            return [await client.post("/v1/chat/completions", json=body) for body in requests]

    return asyncio.run(send())


def test_a_model_without_pass_through_answers_requests_without_tools_itself():
    from agent.models import Reply, ScriptedModel

    model = ScriptedModel([Reply("Hi!", usage={"prompt_tokens": 3, "completion_tokens": 1}), "Hi again."])
    plain, streamed = in_process(model, {"messages": [{"role": "user", "content": "hi"}], "temperature": 0.5,
                                         "logit_bias": {"1": 1}, "n": 1},
                                 {"messages": [{"role": "user", "content": "hi"}], "stream": True,
                                  "stream_options": ["not", "an", "object"]})
    assert plain.json()["choices"][0]["message"]["content"] == "Hi!" and plain.json()["usage"]["total_tokens"] == 4
    assert model.calls[0]["options"] == {"temperature": 0.5}  # what the backend takes, nothing it would refuse
    events = [json.loads(line[6:]) for line in streamed.text.split("\n\n") if line.startswith("data: {")]
    assert streamed.text.endswith("data: [DONE]\n\n")
    assert "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e["choices"]) == "Hi again."


def test_constrained_replies_follow_tool_choice_in_what_the_model_is_asked_for():
    from agent.models import ScriptedModel

    model = ScriptedModel([action("multiply", a=2, b=3)])
    response, = in_process(model, {"messages": QUESTION, "tools": TOOLS, "tool_choice": {
        "type": "function", "function": {"name": "multiply"}}, "parallel_tool_calls": False}, constrain=True)
    assert response.json()["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "multiply"
    schema = model.calls[0]["options"]["response_format"]["json_schema"]["schema"]
    assert [branch["properties"]["tool"]["const"] for branch in schema["anyOf"]] == ["multiply"]
