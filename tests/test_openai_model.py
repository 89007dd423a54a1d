"""The OpenAI-compatible backend, driven through the real SDK against a real local server."""
import json
import socket
import threading
import time
import urllib.error
import urllib.request

import pytest

from agent.models import ModelError, Reply
from agent.models.openai_compatible import OpenAIModel
from tests.openai_server import ScriptedServer
from tests.serve_support import InstantUpstream

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


def test_the_headers_are_the_sdks_but_for_its_telemetry(server):
    server.reply("ok")
    make_model(server, api_key="sk-test").complete(HELLO)
    headers = server.requests[0]["headers"]
    assert headers["user-agent"].startswith("OpenAI/Python") and headers["content-type"] == "application/json"
    assert headers["authorization"] == "Bearer sk-test" and headers["x-stainless-retry-count"] == "0"
    assert [name for name in headers if name.startswith("x-stainless")] == ["x-stainless-retry-count"]


def test_a_key_that_no_header_can_carry_is_said_so_before_anything_is_sent(server):
    model = make_model(server, api_key="clé-secrète")
    message = failure(model)
    assert message == "the API key holds 'é', which no HTTP header can carry; check --api-key / AGENT_API_KEY"
    with pytest.raises(ModelError, match="^the API key holds 'é'"):
        model.list_models()
    assert server.requests == []


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
    assert message == ("endpoint error HTTP 503 after 2 retries: model is loading; the server is down or "
                       "overloaded: try again later, or another --base-url (or --local)")
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
def test_a_missing_or_rejected_key_says_which_setting_to_fix(server, status):
    server.error(status, body="invalid api key")
    message = failure(make_model(server, max_retries=2))
    assert message == (f"{server.url} wants an API key (HTTP {status}: invalid api key); pass --api-key "
                       "or set AGENT_API_KEY")
    server.error(status, body="invalid api key")
    message = failure(make_model(server, api_key="sk-wrong"))
    assert message == (f"{server.url} rejected the API key (HTTP {status}: invalid api key); check that the key "
                       "is right and valid for this server")
    assert len(server.requests) == 2


def test_unknown_model_says_to_check_model_and_base_url(server):
    server.error(404, body="model 'test-model' not found")
    message = failure(make_model(server))
    assert "404 for model 'test-model' (model 'test-model' not found)" in message
    assert "check --model (`agent models` lists what the server serves) and --base-url" in message


def test_bad_request_with_response_format_suggests_dropping_constrain(server):
    server.error(400, body="response_format is not supported")
    server.error(400, body="response_format is not supported")
    model = make_model(server)
    assert failure(model) == "endpoint rejected the request (HTTP 400): response_format is not supported"
    assert failure(model, response_format={"type": "json_object"}) == (
        "endpoint rejected the request (HTTP 400): response_format is not supported; "
        "the server may not support --constrain (response_format): drop the flag")


SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
AS_OPENAI = {"type": "json_schema", "json_schema": {"name": "reply", "schema": SCHEMA}}


def test_a_schema_refused_as_openai_writes_it_is_sent_as_llama_cpp_pythons_server_reads_it_from_then_on(server):
    server.refuse_when(lambda body: body.get("response_format", {}).get("type") == "json_schema", 500,
                       "1 validation error: response_format.type: Input should be 'text' or 'json_object'")
    server.replies('{"n": 1}', '{"n": 2}')
    model = make_model(server)
    assert model.complete(HELLO, response_format=AS_OPENAI).content == '{"n": 1}'
    assert model.complete(HELLO, response_format=AS_OPENAI).content == '{"n": 2}'
    sent = [r["body"].get("response_format") for r in server.requests]
    assert sent == [AS_OPENAI, {"type": "json_object", "schema": SCHEMA}, {"type": "json_object", "schema": SCHEMA}]


def test_a_schema_refused_in_both_forms_is_the_first_refusal(server):
    server.refuse("response_format", 400, "response_format is not supported")
    model = make_model(server)
    assert failure(model, response_format=AS_OPENAI) == (
        "endpoint rejected the request (HTTP 400): response_format is not supported; "
        "the server may not support --constrain (response_format): drop the flag")
    assert [r["body"]["response_format"]["type"] for r in server.requests] == ["json_schema", "json_object"]


def test_a_schema_request_that_fails_for_another_reason_is_not_asked_in_the_other_form(server):
    server.error(401, body="no")
    assert "wants an API key" in failure(make_model(server), response_format=AS_OPENAI)
    assert len(server.requests) == 1


def completion(*, message=None, choice=None, **fields) -> dict:
    """A valid chat.completion body with the first choice's message, the choice or top-level fields changed."""
    body = {"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}]}
    body["choices"][0]["message"].update(message or {})
    body["choices"][0].update(choice or {})
    body.update(fields)
    return body


def bad_call(**function) -> dict:
    return {"tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}", **function}}]}


@pytest.mark.parametrize("body, fault", [
    ("[]", "the body is an array"),
    ("null", "the body is null"),
    ('"hello"', "the body is a string"),
    ("42", "the body is a number"),
    ({"id": "x", "object": "chat.completion"}, "the body has no 'choices'"),
    (completion(choices=[]), "choices is empty"),
    (completion(choices={"0": {}}), "choices is an object"),
    (completion(choices=[{"index": 0, "finish_reason": "stop"}]), "choices[0] has no 'message'"),
    (completion(choice={"message": "hi"}), "choices[0].message is a string"),
    (completion(message={"content": 42}), "choices[0].message.content is a number"),
    (completion(message={"content": [{"type": "text", "text": "hi"}]}), "choices[0].message.content is an array"),
    (completion(message={"tool_calls": [{"id": "c1", "type": "function", "function": None}]}),
     "choices[0].message.tool_calls[0].function is null"),
    (completion(message=bad_call(name=7)), "choices[0].message.tool_calls[0].function.name is a number"),
    (completion(message=bad_call(arguments={"x": 1})),
     "choices[0].message.tool_calls[0].function.arguments is an object"),
    (completion(usage={"prompt_tokens": "12", "completion_tokens": 3}), "usage.prompt_tokens is a string"),
    (completion(usage={"prompt_tokens": -1}), "usage.prompt_tokens: -1 is less than the minimum of 0"),
    (completion(choice={"finish_reason": ["stop"]}), "choices[0].finish_reason is an array"),
    ("<html>Welcome to the web UI</html>", "the body is not JSON (<html>Welcome to the web UI</html>)"),
    ("", "the body is not JSON (empty)"),
])
def test_an_answer_that_is_not_a_chat_completion_names_the_fault(server, body, fault):
    server.respond(200, body)
    assert failure(make_model(server)) == (f"{server.url} did not answer with a chat completion: {fault}; "
                                           "check --base-url / AGENT_BASE_URL")


def test_a_minimal_completion_with_nulls_is_read(server):
    server.respond(200, {"choices": [{"message": {"content": "hi", "tool_calls": None}, "finish_reason": None}],
                         "usage": None})
    assert make_model(server).complete(HELLO) == Reply(content="hi", tool_calls=[], finish_reason=None, usage=None)


def test_an_html_page_is_not_a_completion_whatever_its_content_type(server):
    server.respond(200, "<html>Welcome</html>", headers={"Content-Type": "text/html"})
    assert "did not answer with a chat completion: the body is not JSON (<html>" in failure(make_model(server))


@pytest.mark.parametrize("error", [{"message": "model is overloaded", "type": "server_error"},
                                   "model is overloaded"])
def test_an_error_sent_with_http_200_reports_the_servers_message(server, error):
    server.respond(200, {"error": error})
    assert failure(make_model(server)) == "endpoint answered with an error: model is overloaded"


@pytest.mark.parametrize("status, expected", [
    (200, "endpoint answered with an error: bad \ufffd request"),
    (400, "endpoint rejected the request (HTTP 400): bad \ufffd request"),
])
def test_a_servers_error_message_comes_without_lone_surrogates(server, status, expected):
    server.respond(status, {"error": {"message": "bad \ud800 request"}})
    assert failure(make_model(server)) == expected


def test_lone_surrogates_in_the_answer_are_replaced(server):
    call = {"id": "c\udfff", "type": "function", "function": {"name": "f\ud800", "arguments": '{"a": "\ud800"}'}}
    server.respond(200, completion(message={"content": "bad \ud800 text", "tool_calls": [call]},
                                   choice={"finish_reason": "stop\udc00"}))  # json.dumps sends them as \ud800 escapes
    reply = make_model(server).complete(HELLO)
    assert reply.content == "bad \ufffd text"
    assert reply.tool_calls == [{"id": "c\ufffd", "type": "function",
                                 "function": {"name": "f\ufffd", "arguments": '{"a": "\ufffd"}'}}]
    assert reply.finish_reason == "stop\ufffd"


def test_lone_surrogates_in_the_request_are_sent_as_replacement_characters(server):
    server.reply("fine")
    messages = [{"role": "user", "content": "bad \ud800 text", "name": "\udc80"}]
    assert make_model(server).complete(messages).content == "fine"
    assert server.requests[0]["body"]["messages"] == [{"role": "user", "content": "bad \ufffd text", "name": "\ufffd"}]
    assert messages[0]["content"] == "bad \ud800 text"


def test_a_body_that_trickles_in_is_cut_off_at_the_timeout(server):
    server.respond(200, completion(), trickle=0.1)
    message = failure(make_model(server, timeout=0.6))
    assert message == f"no complete answer from {server.url} within 0.6s; raise --timeout or check the server"


def test_a_body_that_never_ends_is_cut_off_at_the_timeout(server):
    server.endless(" ", interval=0.05)
    message = failure(make_model(server, timeout=0.5))
    assert message == f"no complete answer from {server.url} within 0.5s; raise --timeout or check the server"


def test_a_body_that_stops_coming_is_cut_off_at_the_timeout(server):
    server.respond(200, completion(), trickle=30)
    message = failure(make_model(server, timeout=0.3))
    assert message == f"no complete answer from {server.url} within 0.3s; raise --timeout or check the server"


def test_the_timeout_counts_from_each_attempt_not_from_the_first(server):
    server.error(503, headers={"Retry-After": "1"})
    server.reply("second attempt")
    assert make_model(server, timeout=0.8, max_retries=1).complete(HELLO).content == "second attempt"


def test_an_answer_larger_than_16_mb_is_refused(server):
    server.endless(" " * 65536)
    assert failure(make_model(server)) == (f"the response from {server.url} was larger than 16 MB; "
                                           "check --base-url / AGENT_BASE_URL")


def test_a_connection_that_breaks_in_the_body_says_so(server):
    server.respond(200, '{"choices": [', headers={"Content-Length": "1000"})
    message = failure(make_model(server))
    assert message.startswith(f"the connection to {server.url} broke while reading the answer: ")
    assert message.endswith("; check the server")


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



def test_connections_are_kept_between_calls_streamed_or_not():
    """A streamed answer is read to its end, past its [DONE], so its connection goes back to the pool."""
    with InstantUpstream(lambda body: "Hi.") as upstream:
        model = OpenAIModel("m", base_url=upstream.url, max_retries=0)
        for _ in range(3):
            assert model.stream(HELLO, lambda text: None).content == "Hi."
            assert model.complete(HELLO).content == "Hi."
    assert upstream.connections == 1


@pytest.mark.skipif(not hasattr(socket, "TCP_CORK"), reason="the server's close must come with its answer")
def test_a_kept_connection_the_server_closed_is_replaced_without_a_retry():
    """The server closes each connection right after its first answer: the pool sees it closed and opens another."""
    with InstantUpstream(lambda body: "Hi.", answers_per_connection=1, close_at_once=True) as upstream:
        model = OpenAIModel("m", base_url=upstream.url, max_retries=0)
        assert [model.complete(HELLO).content for _ in range(3)] == ["Hi."] * 3
        assert model.stream(HELLO, lambda text: None).content == "Hi."
    assert upstream.connections == 4  # one for each request


def test_a_kept_connection_the_server_closes_as_the_request_comes_is_retried():
    """A server whose keep-alive time runs out as a request comes closes it unanswered: a connection failure, which
    the SDK retries on a new connection (after its backoff)."""
    with InstantUpstream(lambda body: "Hi.", answers_per_connection=1) as upstream:
        model = OpenAIModel("m", base_url=upstream.url, max_retries=1)
        assert model.complete(HELLO).content == "Hi." == model.stream(HELLO, lambda text: None).content
    assert upstream.connections == 2
