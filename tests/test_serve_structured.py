"""Structured output together with tools through `agent serve`'s chat completions, driven by the openai SDK: the
model may call tools, and its final answer is JSON valid against the response_format's schema (re-asked when not)."""
import json

import jsonschema
import openai
import pytest
from pydantic import BaseModel

from tests.serve_support import serve_fixtures, serving
from tests.support import action

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

ADD = {"type": "function", "function": {"name": "add", "description": "Add two numbers.", "parameters": {
    "type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}}}
SUM = {"type": "object", "properties": {"expression": {"type": "string"}, "value": {"type": "number"}},
       "required": ["expression", "value"], "additionalProperties": False}
AS_JSON = {"type": "json_schema", "json_schema": {"name": "result", "schema": SUM, "strict": True}}
QUESTION = [{"role": "user", "content": "What is 2 + 3?"}]



upstream, served, up, client = serve_fixtures("--max-reasks", "2")


def test_a_tool_call_then_a_json_answer_valid_against_the_schema_after_a_re_ask(up, client):
    up.replies(action("add", a=2, b=3), action(answer="5"), action(answer={"expression": "2 + 3", "value": 5}))
    messages = list(QUESTION)
    first = client.chat.completions.create(model="m", messages=messages, tools=[ADD], response_format=AS_JSON)
    call = first.choices[0].message.tool_calls[0]
    assert (call.function.name, json.loads(call.function.arguments)) == ("add", {"a": 2, "b": 3})
    messages += [first.choices[0].message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": call.id, "content": "5"}]
    raw = client.chat.completions.with_raw_response.create(model="m", messages=messages, tools=[ADD],
                                                           response_format=AS_JSON)
    answer = raw.parse().choices[0]
    assert answer.finish_reason == "stop" and raw.headers["x-agent-reasks"] == "1"
    jsonschema.validate(json.loads(answer.message.content), SUM)
    assert json.loads(answer.message.content) == {"expression": "2 + 3", "value": 5}
    reask = up.requests[2]["body"]["messages"][-1]["content"]
    assert reask.startswith("Your last reply could not be used (schema): $.answer: \"5\" is not of type 'object' "
                            "(the answer must be a JSON value valid against the answer schema)")
    assert "response_format" not in up.requests[0]["body"]  # unconstrained: the schema is in the prompt


def test_streamed_the_json_answer_arrives_as_content(up, client):
    up.replies(action(answer={"expression": "2 + 3", "value": 5}))
    stream = client.chat.completions.create(model="m", messages=QUESTION, tools=[ADD], response_format=AS_JSON,
                                            stream=True)
    content = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert json.loads(content) == {"expression": "2 + 3", "value": 5}


def test_the_sdks_parse_with_a_pydantic_model_and_a_strict_tool(up, client):
    class Sum(BaseModel):
        expression: str
        value: float

    class Add(BaseModel):
        """Add two numbers."""
        a: float
        b: float

    up.replies(action("Add", a=2, b=3), action(answer={"expression": "2 + 3", "value": 5}))
    tools = [openai.pydantic_function_tool(Add)]
    first = client.chat.completions.parse(model="m", messages=QUESTION, tools=tools, response_format=Sum)
    call = first.choices[0].message.tool_calls[0]
    assert call.function.parsed_arguments == Add(a=2, b=3)
    messages = [*QUESTION, {"role": "assistant", "tool_calls": [
        {"id": call.id, "type": "function", "function": {"name": "Add", "arguments": call.function.arguments}}]},
        {"role": "tool", "tool_call_id": call.id, "content": "5"}]
    done = client.chat.completions.parse(model="m", messages=messages, tools=tools, response_format=Sum)
    assert done.choices[0].message.parsed == Sum(expression="2 + 3", value=5)


def test_json_object_with_tools_asks_for_any_object(up, client):
    up.replies(action(answer="five"), action(answer={"value": 5}))
    answer = client.chat.completions.create(model="m", messages=QUESTION, tools=[ADD],
                                            response_format={"type": "json_object"}).choices[0].message.content
    assert json.loads(answer) == {"value": 5}


def test_an_answer_that_never_fits_is_a_502_with_the_last_error(up, client):
    up.replies(action(answer="5"), action(answer={"value": 5}), action(answer={"expression": "2 + 3", "value": "five"}))
    with pytest.raises(openai.APIStatusError) as caught:
        client.chat.completions.create(model="m", messages=QUESTION, tools=[ADD], response_format=AS_JSON)
    assert caught.value.status_code == 502
    assert ("after 2 re-asks (3 unusable replies in a row; the last one: schema: $.answer.value: \"five\" is not of "
            "type 'number'") in caught.value.message


def test_constrained_the_answer_schema_is_in_what_the_upstream_is_held_to(upstream, up):
    with serving("--upstream-url", upstream.url, "--model", "m", "--constrain") as (url, _, _):
        up.replies(action(answer={"expression": "2 + 3", "value": 5}))
        client = openai.OpenAI(base_url=url, api_key="unused", max_retries=0)
        answer = client.chat.completions.create(model="m", messages=QUESTION, tools=[ADD], response_format=AS_JSON)
        assert json.loads(answer.choices[0].message.content)["value"] == 5
    schema = up.requests[0]["body"]["response_format"]["json_schema"]["schema"]
    branch = next(b for b in schema["anyOf"] if b["properties"]["type"].get("const") == "final")
    assert branch["properties"]["answer"] == SUM
    jsonschema.validate({"type": "final", "answer": {"expression": "2 + 3", "value": 5}}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"type": "final", "answer": "5"}, schema)
