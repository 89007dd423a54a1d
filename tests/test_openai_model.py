"""The OpenAI-compatible backend, driven through the real SDK against a real local server."""
import json
import socket
import threading
import time
import urllib.error
import urllib.request

import pytest

from agent.model import ModelError
from agent.openai_model import OpenAIModel
from tests.openai_server import ScriptedServer

HELLO = [{"role": "user", "content": "hi there"}]
FAST_RETRY = {"retry-after-ms": "10"}


def make_model(server, **settings):
    settings = {"timeout": 5.0, "max_retries": 0, **settings}
    return OpenAIModel("test-model", base_url=server.url, **settings)


def failure(model, **options) -> str:
    with pytest.raises(ModelError) as caught:
        model.complete(HELLO, **options)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_plain_reply_is_parsed(server):
    server.reply("hello")
    reply = make_model(server).complete(HELLO)
    assert reply.content == "hello"
    assert reply.finish_reason == "stop"
    assert reply.tool_calls == []
    assert reply.usage == {"prompt_tokens": 2, "completion_tokens": 2}
    assert server.pending == 0


def test_missing_usage_is_none(server):
    server.reply("hello", usage=None)
    assert make_model(server).complete(HELLO).usage is None


def test_tool_calls_come_back_in_openai_format(server):
    server.reply(tool_calls=[{"name": "calculator", "arguments": {"expression": "2+2"}},
                             {"name": "read_file", "arguments": '{"path": ', "id": "own-id"}])
    reply = make_model(server).complete(HELLO)
    assert reply.content is None
    assert reply.finish_reason == "tool_calls"
    assert reply.tool_calls == [
        {"id": "call_1", "type": "function",
         "function": {"name": "calculator", "arguments": '{"expression": "2+2"}'}},
        {"id": "own-id", "type": "function", "function": {"name": "read_file", "arguments": '{"path": '}},
    ]


def test_request_body_carries_model_messages_and_options_but_no_temperature(server):
    server.reply("ok")
    tools = [{"type": "function", "function": {"name": "calculator", "parameters": {"type": "object"}}}]
    response_format = {"type": "json_schema", "json_schema": {"name": "action", "schema": {"type": "object"}}}
    make_model(server).complete(HELLO, tools=tools, tool_choice=None, response_format=response_format)
    (request,) = server.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["body"] == {"model": "test-model", "messages": HELLO, "tools": tools,
                               "response_format": response_format}


def test_temperature_is_sent_only_when_set(server):
    server.reply("ok")
    make_model(server, temperature=0.2).complete(HELLO)
    assert server.requests[0]["body"]["temperature"] == 0.2


def test_works_without_an_api_key_and_sends_a_given_one(server):
    server.replies("one", "two")
    assert make_model(server).complete(HELLO).content == "one"
    assert make_model(server, api_key="sk-test").complete(HELLO).content == "two"
    assert [r["headers"]["authorization"] for r in server.requests] == ["Bearer not-needed", "Bearer sk-test"]


def test_rate_limit_waits_as_long_as_retry_after_says_then_succeeds(server):
    server.error(429, headers={"Retry-After": "1"})
    server.reply("finally")
    started = time.monotonic()
    reply = make_model(server, max_retries=1).complete(HELLO)
    assert time.monotonic() - started >= 1.0
    assert reply.content == "finally"
    assert [r["headers"]["x-stainless-retry-count"] for r in server.requests] == ["0", "1"]


def test_rate_limit_that_persists_says_to_wait(server):
    for _ in range(2):
        server.error(429, headers={**FAST_RETRY, "Retry-After": "0.01"})
    message = failure(make_model(server, max_retries=1))
    assert message.startswith("rate limited (HTTP 429) after 1 retries")
    assert "wait and try again" in message


def test_rate_limit_longer_than_the_sdk_will_wait_fails_at_once(server):
    server.error(429, headers={"Retry-After": "300"})
    message = failure(make_model(server, max_retries=3))
    assert "after 0 retries (the server asked to wait 300s)" in message
    assert len(server.requests) == 1


def test_server_errors_are_retried_then_reported_on_one_line(server):
    for _ in range(3):
        server.error(503, body="model is loading\nplease wait", headers=FAST_RETRY)
    message = failure(make_model(server, max_retries=2))
    assert message == "endpoint error HTTP 503 after 2 retries: model is loading"
    assert len(server.requests) == 3


def test_long_server_message_is_cut(server):
    server.error(400, body="x" * 1000)
    message = failure(make_model(server))
    assert len(message) < 300


def test_timeout_says_to_raise_it(server):
    server.reply("too late", delay=3)
    started = time.monotonic()
    message = failure(make_model(server, timeout=0.3))
    assert time.monotonic() - started < 2
    assert message == (f"no answer from {server.url} within 0.3s (after 0 retries); "
                       "raise --timeout or check the server")


def test_connection_refused_says_to_check_the_base_url():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    model = OpenAIModel("test-model", base_url=f"http://127.0.0.1:{port}/v1", max_retries=0)
    message = failure(model)
    assert message.startswith(f"cannot connect to http://127.0.0.1:{port}/v1: ")
    assert "check --base-url / AGENT_BASE_URL" in message


@pytest.mark.parametrize("status", [401, 403])
def test_rejected_key_says_which_setting_to_fix(server, status):
    server.error(status)
    message = failure(make_model(server, max_retries=2))
    assert message == f"endpoint rejected the API key (HTTP {status}); set AGENT_API_KEY or pass --api-key"
    assert len(server.requests) == 1


def test_unknown_model_says_to_check_model_and_base_url(server):
    server.error(404, body="model 'test-model' not found")
    message = failure(make_model(server))
    assert "404 for model 'test-model'" in message
    assert "check --model / AGENT_MODEL and --base-url" in message


def test_bad_request_with_response_format_suggests_dropping_constrain(server):
    server.error(400, body="response_format is not supported")
    server.error(400, body="response_format is not supported")
    model = make_model(server)
    assert failure(model) == "endpoint rejected the request (HTTP 400): response_format is not supported"
    assert failure(model, response_format={"type": "json_object"}) == (
        "endpoint rejected the request (HTTP 400): response_format is not supported; "
        "the server may not support --constrain (response_format): drop the flag")


def test_reply_without_choices_is_an_error(server):
    server.respond(200, {"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": []})
    assert failure(make_model(server)) == "endpoint returned no choices"


@pytest.mark.parametrize("content_type", ["text/html", "application/json"])
def test_a_page_that_is_not_a_completion_says_to_check_the_base_url(server, content_type):
    server.respond(200, "<html>Welcome to the web UI</html>", headers={"Content-Type": content_type})
    message = failure(make_model(server))
    assert message.startswith(f"{server.url} did not answer with a chat completion (")
    assert message.endswith("check --base-url / AGENT_BASE_URL")


def test_exhausted_script_answers_500_and_records_the_request(server):
    request = urllib.request.Request(server.url + "/chat/completions", data=json.dumps({"model": "m"}).encode(),
                                     headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=5)
    assert caught.value.code == 500
    assert json.load(caught.value)["error"]["message"] == "scripted server: no reply left for request 1"
    assert server.requests == [{"path": "/v1/chat/completions", "headers": server.requests[0]["headers"],
                                "body": {"model": "m"}}]
    assert "no reply left for request 2" in failure(make_model(server))


def test_server_lists_one_model(server):
    with urllib.request.urlopen(server.url + "/models", timeout=5) as response:
        assert [m["id"] for m in json.load(response)["data"]] == ["scripted"]


def test_stopping_does_not_wait_for_a_sleeping_handler():
    with ScriptedServer() as slow:
        slow.reply("never", delay=30)
        client = threading.Thread(target=lambda: failure(make_model(slow, timeout=0.2)))
        client.start()
        client.join()
        started = time.monotonic()
    assert time.monotonic() - started < 1
