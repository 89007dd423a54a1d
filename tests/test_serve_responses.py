"""`agent serve`'s Responses API (POST /v1/responses), in front of the scripted upstream, driven by the openai SDK's
own `client.responses`: tool loops streamed and not, structured output with tools, previous_response_id, and
requests that do not fit."""
import json
import threading
import time

import httpx2 as httpx
import jsonschema
import openai
import pytest
from pydantic import BaseModel

from tests.serve_support import serve_fixtures, serving
from tests.support import action

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

ADD = {"type": "function", "name": "add", "description": "Add two numbers.", "parameters": {
    "type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}}
MULTIPLY = {**ADD, "name": "multiply", "description": "Multiply two numbers."}
TOOLS = [ADD, MULTIPLY]
FUNCTIONS = {"add": lambda a, b: a + b, "multiply": lambda a, b: a * b}
QUESTION = "What is (2 + 3) * 4?"
SUM = {"type": "object", "properties": {"expression": {"type": "string"}, "value": {"type": "number"}},
       "required": ["expression", "value"], "additionalProperties": False}
AS_JSON = {"format": {"type": "json_schema", "name": "result", "schema": SUM, "strict": True}}


upstream, served, up, client = serve_fixtures("--timeout", "10", "--max-reasks", "2")



def run_loop(client, create, **fields) -> tuple[object, list]:
    """The client's own tool loop over the Responses API, sending back each call and its output as items."""
    items, calls = [{"role": "user", "content": QUESTION}], []
    for _ in range(5):
        response = create(model="anything", input=items, tools=TOOLS, **fields)
        called = [item for item in response.output if item.type == "function_call"]
        if not called:
            return response, calls
        for call in called:
            arguments = json.loads(call.arguments)
            calls.append((call.name, arguments))
            items += [call.model_dump(exclude_none=True),
                      {"type": "function_call_output", "call_id": call.call_id,
                       "output": str(FUNCTIONS[call.name](**arguments))}]
    raise AssertionError("the loop did not end")


def test_responses_create_runs_a_tool_loop(up, client):
    up.replies(action("add", a=2, b=3), action("multiply", a=5, b=4), action(answer="(2 + 3) * 4 = 20"))
    response, calls = run_loop(client, client.responses.create, instructions="Be brief.")
    assert response.output_text == "(2 + 3) * 4 = 20" and response.status == "completed"
    assert response.id.startswith("resp_") and response.model == "up-model"
    assert calls == [("add", {"a": 2, "b": 3}), ("multiply", {"a": 5, "b": 4})]
    sent = up.requests[-1]["body"]["messages"]
    assert "- multiply(a: number, b: number) — Multiply two numbers." in sent[0]["content"]
    assert sent[0]["content"].endswith("Instructions from the user:\nBe brief.\n")
    assert sent[1:] == [
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": f"[{action('add', a=2, b=3)}]"}, {"role": "user", "content": "Result of add:\n5\n"},
        {"role": "assistant", "content": f"[{action('multiply', a=5, b=4)}]"},
        {"role": "user", "content": "Result of multiply:\n20\n"}]
    assert "tools" not in up.requests[-1]["body"]
    usage = response.usage
    assert usage.input_tokens > 0 and usage.total_tokens == usage.input_tokens + usage.output_tokens


def test_a_streamed_tool_loop_gives_the_events_the_sdk_reads(up, client):
    up.replies("I will add them.", action("add", a=2, b=3), action("multiply", a=5, b=4),
               action(answer="(2 + 3) * 4 = 20"))
    seen = []

    def create(**fields):
        with client.responses.stream(**fields) as stream:
            seen.append([event.type for event in stream])
            return stream.get_final_response()

    response, calls = run_loop(client, create)
    assert response.output_text == "(2 + 3) * 4 = 20"
    assert calls == [("add", {"a": 2, "b": 3}), ("multiply", {"a": 5, "b": 4})]
    assert seen[0] == ["response.created", "response.in_progress", "response.output_item.added",
                       "response.function_call_arguments.delta", "response.function_call_arguments.done",
                       "response.output_item.done", "response.completed"]
    assert seen[-1] == ["response.created", "response.in_progress", "response.output_item.added",
                        "response.content_part.added", "response.output_text.delta", "response.output_text.done",
                        "response.content_part.done", "response.output_item.done", "response.completed"]
    assert len(up.requests) == 4  # the prose was re-asked; the client never saw it


def test_create_with_stream_true_yields_numbered_events(up, client):
    up.replies(json.dumps([json.loads(action("add", a=1, b=2)), json.loads(action("multiply", a=3, b=4))]))
    events = list(client.responses.create(model="m", input=QUESTION, tools=TOOLS, stream=True))
    assert [e.sequence_number for e in events] == list(range(len(events)))
    done = events[-1].response
    assert [(item.name, json.loads(item.arguments)) for item in done.output] == [
        ("add", {"a": 1, "b": 2}), ("multiply", {"a": 3, "b": 4})]
    deltas = [e.delta for e in events if e.type == "response.function_call_arguments.delta"]
    assert deltas == [item.arguments for item in done.output]


def test_structured_output_with_tools_calls_a_tool_then_answers_json_valid_against_the_schema(up, client):
    up.replies(action("add", a=2, b=3), action("multiply", a=5, b=4), action(answer="20"),
               action(answer={"expression": "(2 + 3) * 4", "value": 20}))
    reasks = []

    def create(**fields):
        raw = client.responses.with_raw_response.create(**fields)
        reasks.append(raw.headers["x-agent-reasks"])
        return raw.parse()

    parsed, calls = run_loop(client, create, text=AS_JSON)
    jsonschema.validate(json.loads(parsed.output_text), SUM)
    assert json.loads(parsed.output_text) == {"expression": "(2 + 3) * 4", "value": 20}
    assert reasks == ["0", "0", "1"]
    reask = up.requests[3]["body"]["messages"][-1]["content"]
    assert reask.startswith("Your last reply could not be used (schema): $.answer: \"20\" is not of type 'object'")
    assert parsed.text.format.type == "json_schema" and len(calls) == 2


def test_responses_parse_with_a_pydantic_text_format(up, client):
    class Sum(BaseModel):
        expression: str
        value: float

    up.replies(action(answer={"expression": "2 + 3", "value": 5}))
    response = client.responses.parse(model="m", input="2 + 3?", tools=[ADD], text_format=Sum)
    assert response.output_parsed == Sum(expression="2 + 3", value=5)


def test_an_answer_that_never_fits_the_schema_is_a_502_with_the_last_error(up, client):
    up.replies(action(answer="20"), action(answer={"value": 20}), action(answer={"expression": "x", "value": "twenty"}))
    with pytest.raises(openai.APIStatusError) as caught:
        client.responses.create(model="m", input=QUESTION, tools=TOOLS, text=AS_JSON)
    assert caught.value.status_code == 502
    assert ("stayed malformed after 2 re-asks (3 unusable replies in a row; the last one: schema: $.answer.value: "
            "\"twenty\" is not of type 'number'") in caught.value.message


def test_previous_response_id_continues_a_kept_conversation(up, client):
    up.replies(action("add", a=2, b=3), action(answer="5"), action(answer="10"))
    first = client.responses.create(model="m", input="2 + 3?", tools=TOOLS, instructions="Be brief.")
    call = first.output[0]
    second = client.responses.create(model="m", previous_response_id=first.id, tools=TOOLS, input=[
        {"type": "function_call_output", "call_id": call.call_id, "output": "5"}])
    assert second.output_text == "5" and second.previous_response_id == first.id
    third = client.responses.create(model="m", previous_response_id=second.id, input="And doubled?", tools=TOOLS)
    assert third.output_text == "10"
    sent = up.requests[-1]["body"]["messages"]
    assert sent[1:] == [{"role": "user", "content": "2 + 3?"},
                        {"role": "assistant", "content": f"[{action('add', a=2, b=3)}]"},
                        {"role": "user", "content": "Result of add:\n5\n"},
                        {"role": "assistant", "content": action(answer="5")},
                        {"role": "user", "content": "And doubled?"}]
    assert "Be brief." not in sent[0]["content"]  # instructions are not carried over, as OpenAI's are not


def test_a_previous_response_that_is_not_kept_is_a_400_saying_so(up, client):
    up.replies(action(answer="5"))
    unstored = client.responses.create(model="m", input="2 + 3?", tools=TOOLS, store=False)
    for previous in (unstored.id, "resp_never_made"):
        with pytest.raises(openai.BadRequestError) as caught:
            client.responses.create(model="m", previous_response_id=previous, input="again", tools=TOOLS)
        assert caught.value.body["param"] == "previous_response_id"
        assert "is not kept here" in caught.value.message and "send the whole conversation" in caught.value.message


def test_without_tools_the_request_is_answered_by_the_upstream_as_asked(up, client):
    up.replies('{"expression": "2 + 3", "value": 5}')
    response = client.responses.create(model="m", input=[{"role": "developer", "content": "Answer in JSON."},
                                                         {"role": "user", "content": [
                                                             {"type": "input_text", "text": "2 + 3?"}]}],
                                       text=AS_JSON, temperature=0.2, max_output_tokens=50)
    assert json.loads(response.output_text) == {"expression": "2 + 3", "value": 5}
    body = up.requests[0]["body"]
    assert body["messages"] == [{"role": "developer", "content": "Answer in JSON."},
                                {"role": "user", "content": "2 + 3?"}]
    assert body["response_format"] == {"type": "json_schema", "json_schema": {"name": "result", "schema": SUM,
                                                                              "strict": True}}
    assert (body["temperature"], body["max_tokens"]) == (0.2, 50)


def test_a_cut_off_answer_is_an_incomplete_response(up, client):
    up.reply("The answer is", finish_reason="length")
    response = client.responses.create(model="m", input="Tell me everything", max_output_tokens=3)
    assert response.status == "incomplete" and response.incomplete_details.reason == "max_output_tokens"


USER = {"role": "user", "content": "hi"}
CALL = {"type": "function_call", "call_id": "c1", "name": "add", "arguments": '{"a": 1, "b": 2}'}


@pytest.mark.parametrize("fields, param, says", [
    ({"input": 5}, "input", "input must be a string or a non-empty array of items"),
    ({"input": []}, "input", "non-empty array"),
    ({"input": [5]}, "input[0]", "input[0] must be an object"),
    ({"input": [USER, {"type": "web_search_call", "id": "ws_1"}]}, "input[1].type",
     "input[1].type 'web_search_call' is not supported"),
    ({"input": [{"type": "item_reference", "id": "msg_1"}]}, "input[0]", "item references are not kept here"),
    ({"input": [{"role": "wizard", "content": "hi"}]}, "input[0].role", "must be one of user"),
    ({"input": [{"role": "user", "content": 7}]}, "input[0].content", "a string or an array of content parts"),
    ({"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]}, "input[0].content[0]",
     "files are not supported"),
    ({"input": [USER, {**CALL, "call_id": 3}]}, "input[1].call_id", "must be a non-empty string"),
    ({"input": [USER, {**CALL, "arguments": {"a": 1}}]}, "input[1].arguments", "must be JSON text"),
    ({"input": [USER, {**CALL, "arguments": "{a: 1"}]}, "input[1].tool_calls[0]", "arguments is not JSON text"),
    ({"input": [USER, CALL, {"type": "function_call_output", "call_id": "c9", "output": "3"}]}, "input[2]",
     "input[2] is a function_call_output for call_id 'c9', which answers no (other) tool call of the function_call "
     "items before it"),
    ({"input": [USER, CALL, USER]}, "input", "the tool call 'c1' has no function_call_output answering it"),
    ({"input": [USER, {"type": "function_call_output", "call_id": "c1", "output": "3"}]}, "input[1]",
     "input[1] is a function_call_output that answers no tool call"),
    ({"input": [USER, CALL, {"type": "function_call_output", "call_id": "c1", "output": 3}]}, "input[2].output",
     "must be a string or an array of text parts"),
    ({"tools": [{"type": "web_search"}]}, "tools[0].type", "function tools only (got type 'web_search')"),
    ({"tools": [{"type": "function", "name": 7}]}, "tools[0].name", "tools[0].name must be a string"),
    ({"tools": [{"type": "function", "name": "x", "parameters": []}]}, "tools[0]", "JSON Schema object"),
    ({"tools": "add"}, "tools", "tools must be an array"),
    ({"tool_choice": {"type": "allowed_tools", "tools": []}}, "tool_choice", 'tool_choice must be "none"'),
    ({"tool_choice": {"type": "function", "name": "subtract"}}, "tool_choice", "not among the tools (add, multiply)"),
    ({"tools": [], "tool_choice": "required"}, "tool_choice", "the request has no tools"),
    ({"text": "json"}, "text", "text must be an object"),
    ({"text": {"format": {"type": "yaml"}}}, "text.format", "text.format must be"),
    ({"text": {"format": {"type": "json_schema", "name": "x", "schema": {"type": "objekt"}}}}, "text.format.schema",
     "text.format.schema is not a valid JSON Schema"),
    ({"text": {"format": {"type": "json_schema", "name": "x", "schema": json.loads(
        '{"type": "object", "properties": {"x": ' * 80 + "{}" + "}}" * 80)}}}, "text.format.schema",
     "nested more than 64 levels deep"),
    ({"text": {"format": {"type": "json_schema", "name": "x", "schema": {
        "$defs": {"A": {"type": "string", "description": "d" * 100_000}},
        "type": "object", "properties": {f"p{i}": {"$ref": "#/$defs/A"} for i in range(20)}}}}},
     "text.format.schema", "too large once its $refs are inlined"),
    ({"max_output_tokens": 0}, "max_output_tokens", "max_output_tokens must be a whole number of at least 1"),
    ({"temperature": "hot"}, "temperature", "temperature must be a number"),
    ({"stream": "yes"}, "stream", "stream must be true or false"),
    ({"store": "no"}, "store", "store must be true or false"),
    ({"instructions": ["be brief"]}, "instructions", "instructions must be a string"),
    ({"background": True}, "background", "background responses are not run here"),
    ({"conversation": "conv_1"}, "conversation", "conversation objects are not kept here"),
    ({"previous_response_id": 42}, "previous_response_id", "previous_response_id must be a string"),
    ({"metadata": "x"}, "metadata", "metadata must be an object"),
])
def test_a_request_that_does_not_fit_is_a_400_naming_the_field(served, up, fields, param, says):
    body = {"model": "m", "input": "hi", "tools": TOOLS, **fields}
    response = httpx.post(f"{served[0]}/responses", json=body, timeout=20)
    error = response.json()["error"]
    assert response.status_code == 400 and error["type"] == "invalid_request_error"
    assert error["param"] == param and says in error["message"], error
    assert up.requests == []


@pytest.mark.parametrize("content, status, says", [
    (b"{not json", 400, "the request body is not JSON"),
    (b"[1, 2]", 400, "the body must be a JSON object (a Responses API request)"),
    (b"[" * 100_000 + b"]" * 100_000, 400, "nested too deeply"),
    (json.dumps({"input": "hi", "padding": "x" * (9 * 2**20)}).encode(), 413, "over the limit"),
])
def test_a_hostile_body_gets_the_same_errors_as_chat_completions(served, content, status, says):
    response = httpx.post(f"{served[0]}/responses", content=content, timeout=20,
                          headers={"content-type": "application/json"})
    assert response.status_code == status and says in response.json()["error"]["message"]


def test_an_api_key_is_asked_for_on_the_responses_route_too(upstream, up):
    with serving("--upstream-url", upstream.url, "--model", "m", env={"AGENT_SERVE_API_KEY": "k"}) as (url, _, _):
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=url, api_key="wrong", max_retries=0).responses.create(model="m", input="hi")
        up.replies(action(answer="hello"))
        friend = openai.OpenAI(base_url=url, api_key="k", max_retries=0)
        assert friend.responses.create(model="m", input="hi", tools=TOOLS).output_text == "hello"


@pytest.mark.parametrize("tools", [TOOLS, None])
def test_a_client_that_leaves_stops_its_upstream_call(upstream, up, tools):
    with serving("--upstream-url", upstream.url, "--model", "m", "--timeout", "20") as (url, _, said):
        up.reply(action(answer="too late"), first=2.0, pause=0.3)
        with pytest.raises(httpx.TimeoutException):
            httpx.post(f"{url}/responses", timeout=0.3, json={"input": "hi", **({"tools": tools} if tools else {})})
        left = time.monotonic()
        deadline = left + 10
        while not (up.requests and up.requests[0].get("left")) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert up.requests[0].get("left") and time.monotonic() - left < 4
        assert len(up.requests) == 1 and "Traceback" not in said()


def test_kept_conversations_are_bounded():
    from agent.serve.stored import Stored

    kept = Stored(most=3, chars=200)
    for number in range(5):
        kept.put(f"r{number}", [{"role": "user", "content": str(number)}])
    assert [kept.get(f"r{n}") is not None for n in range(5)] == [False, False, True, True, True]
    kept.put("big", [{"role": "user", "content": "x" * 150}])  # the size bound drops the oldest too
    assert kept.get("r2") is None and kept.get("big")
    kept.put("huge", [{"role": "user", "content": "x" * 500}])  # larger than all: not kept at all
    assert kept.get("huge") is None and kept.get("big")
    given = kept.get("big")
    given[0]["content"] = "changed"  # a copy: what is kept stays as it was
    assert kept.get("big")[0]["content"] == "x" * 150


def test_concurrent_responses_are_each_answered(up, client):
    up.answer_when(lambda body: "first" in json.dumps(body["messages"][1:]), action(answer="one"), delay=0.5)
    up.answer_when(lambda body: "second" in json.dumps(body["messages"][1:]), action(answer="two"))
    answers = {}

    def ask(word):
        answers[word] = client.responses.create(model="m", input=word, tools=TOOLS).output_text

    threads = [threading.Thread(target=ask, args=(w,)) for w in ("first", "second")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    up._rules.clear()
    assert answers == {"first": "one", "second": "two"}


def test_items_become_chat_messages_in_order():
    from agent.serve.responses import to_chat

    translated = to_chat({"instructions": "Be brief.", "input": [
        {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "What is in this picture, plus 2 + 3?"},
            {"type": "input_image", "image_url": "data:image/png;base64,AAAA"}]},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Let me add."}]},
        {"type": "function_call", "call_id": "c1", "name": "add", "arguments": '{"a": 2, "b": 3}'},
        {"type": "function_call", "call_id": "c2", "name": "add", "arguments": '{"a": 1, "b": 1}'},
        {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "2"}]},
        {"type": "function_call_output", "call_id": "c1", "output": "5"}],
        "tools": [ADD], "tool_choice": {"type": "function", "name": "add"}, "max_output_tokens": 9})
    chat = translated.chat
    assert chat["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "What is in this picture, plus 2 + 3?"},
                                     {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA",
                                                                         "detail": "auto"}}]},
        {"role": "assistant", "content": "Let me add.", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}},
            {"id": "c2", "type": "function", "function": {"name": "add", "arguments": '{"a": 1, "b": 1}'}}]},
        {"role": "tool", "tool_call_id": "c2", "content": "2"},
        {"role": "tool", "tool_call_id": "c1", "content": "5"}]
    assert translated.origins == ["instructions", "input[0]", "input[2]", "input[5]", "input[6]"]
    assert chat["tools"] == [{"type": "function", "function": {
        "name": "add", "description": "Add two numbers.", "parameters": ADD["parameters"]}}]
    assert chat["tool_choice"] == {"type": "function", "function": {"name": "add"}} and chat["max_tokens"] == 9
    assert translated.kept == chat["messages"][1:]  # instructions are not kept for a later response
