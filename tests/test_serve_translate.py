"""The translation between OpenAI tool calling and the prompt protocol, on its own (agent.serve.translate)."""
import json

import pytest

from agent.models import Reply
from agent.parsing import ParseError, parse_action
from agent.protocols import PromptProtocol, Reask
from agent.serve import translate as translation
from agent.serve.translate import (CACHED_CHARS, MAX_TOOLS, RequestError, chunks, completion, conversation, passed_on,
                                   plain, tool_registry, translate)

ADD = {"type": "function", "function": {"name": "add", "description": "Add two numbers.", "parameters": {
    "type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}}}
NOW = {"type": "function", "function": {"name": "now", "description": "The time now."}}  # no parameters at all
USER = {"role": "user", "content": "What is 2 + 3, and the time?"}


def request(**fields) -> dict:
    return {"model": "m", "messages": [USER], "tools": [ADD, NOW], **fields}


def assistant_calls(*calls) -> dict:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
        for id, name, arguments in calls]}


def test_an_earlier_single_call_is_written_as_the_prompt_shows_calls():
    """As an array where several calls may go in a reply (the prompt shows calls so), else as one object."""
    messages = [USER, assistant_calls(("c1", "add", {"a": 2, "b": 3})),
                {"role": "tool", "tool_call_id": "c1", "content": "5"}]
    for parallel, written in ((True, '[{"type": "tool_call", "tool": "add", "arguments": {"a": 2, "b": 3}}]'),
                              (False, '{"type": "tool_call", "tool": "add", "arguments": {"a": 2, "b": 3}}')):
        translated = translate(request(messages=messages, parallel_tool_calls=parallel))
        assert translated.messages[2] == {"role": "assistant", "content": written}
        system = translated.messages[0]["content"]
        assert ("in one of two forms" in system) is parallel and ("in one of three forms" in system) is not parallel


def test_the_tools_become_the_protocols_system_prompt_and_the_clients_own_follows_it():
    translated = translate(request(messages=[{"role": "system", "content": "Be brief."}, USER]))
    system = translated.messages[0]["content"]
    registry = tool_registry([ADD, NOW])
    assert system.startswith(PromptProtocol(registry).system_prompt())  # the agent's own prompt, unchanged
    assert "- add(a: number, b: number) — Add two numbers." in system
    assert "- now() — The time now." in system
    assert system.endswith("Instructions from the user:\nBe brief.\n")
    assert translated.messages[1:] == [USER]
    assert "tools" not in translated.protocol.options and "tool_choice" not in translated.protocol.options


def test_earlier_calls_and_their_results_are_written_in_the_protocols_text_form():
    messages = [USER, assistant_calls(("c1", "add", {"a": 2, "b": 3})),
                {"role": "tool", "tool_call_id": "c1", "content": "5"},
                assistant_calls(("c2", "now", {}), ("c3", "add", {"a": 1, "b": 1})),
                {"role": "tool", "tool_call_id": "c3", "content": [{"type": "text", "text": "2"}]},  # out of order
                {"role": "tool", "tool_call_id": "c2", "content": "12:00"},
                {"role": "assistant", "content": "5, at 12:00"}, {"role": "user", "content": "Thanks"}]
    history = translate(request(messages=messages)).messages[1:]
    assert history == [
        USER,
        {"role": "assistant", "content": '[{"type": "tool_call", "tool": "add", "arguments": {"a": 2, "b": 3}}]'},
        {"role": "user", "content": "Result of add:\n5\n"},
        {"role": "assistant", "content": '[{"type": "tool_call", "tool": "now", "arguments": {}}, '
                                         '{"type": "tool_call", "tool": "add", "arguments": {"a": 1, "b": 1}}]'},
        {"role": "user", "content": "Results, in the order of your calls:\n1. now: 12:00\n2. add: 2\n"},
        {"role": "assistant", "content": '{"type": "final", "answer": "5, at 12:00"}'},
        {"role": "user", "content": "Thanks"},
    ]


@pytest.mark.parametrize("choice, allowed, refused", [
    ("auto", ["final", "add", "batch"], []),
    ("none", ["final"], ["add", "batch"]),
    ("required", ["add", "now", "batch"], ["final"]),
    ({"type": "function", "function": {"name": "now"}}, ["now", "batch_now"], ["final", "add"]),
])
def test_tool_choice_changes_the_schema_a_reply_must_satisfy(choice, allowed, refused):
    replies = {"final": '{"type": "final", "answer": "5"}',
               "add": '{"type": "tool_call", "tool": "add", "arguments": {"a": 2, "b": 3}}',
               "now": '{"type": "tool_call", "tool": "now", "arguments": {}}',
               "batch": '[{"type": "tool_call", "tool": "add", "arguments": {"a": 2, "b": 3}}, '
                        '{"type": "tool_call", "tool": "now", "arguments": {}}]',
               "batch_now": '[{"type": "tool_call", "tool": "now", "arguments": {}}]'}
    protocol = translate(request(tool_choice=choice)).protocol
    for name in allowed:
        assert parse_action(replies[name], protocol.actions).value == json.loads(replies[name])
    for name in refused:
        with pytest.raises(ParseError):
            parse_action(replies[name], protocol.actions)


def test_the_system_prompt_says_what_tool_choice_asks():
    def system(**fields):
        return translate(request(**fields)).messages[0]["content"]

    assert "call no tool" in system(tool_choice="none")
    assert "call a tool (the final object is not allowed yet)" in system(tool_choice="required")
    assert "call the tool now (no other tool" in system(tool_choice={"type": "function", "function": {"name": "now"}})
    assert "Send one tool call per reply" in system(parallel_tool_calls=False)
    assert "For this reply" not in system() and "one tool call per reply" not in system()


def test_one_call_per_reply_when_parallel_tool_calls_is_false():
    protocol = translate(request(parallel_tool_calls=False)).protocol
    with pytest.raises(ParseError) as caught:
        parse_action('[{"type": "tool_call", "tool": "now", "arguments": {}}]', protocol.actions)
    assert caught.value.kind == "schema"
    assert parse_action('{"type": "tool_call", "tool": "now", "arguments": {}}', protocol.actions)


def test_with_constrained_decoding_the_grammars_schema_follows_tool_choice():
    def constraint(**fields):
        return translate(request(**fields), constrain=True).protocol.options["response_format"]["json_schema"]["schema"]

    branches = lambda schema: [b["properties"].get("tool", b["properties"]["type"])["const"]  # noqa: E731
                               for b in schema["anyOf"] if b.get("type") == "object"]
    assert branches(constraint()) == ["final", "add", "now"]
    assert branches(constraint(tool_choice="none")) == ["final"]
    assert branches(constraint(tool_choice="required")) == ["add", "now"]
    assert branches(constraint(tool_choice={"type": "function", "function": {"name": "add"}})) == ["add"]
    assert not any(b.get("type") == "array" for b in constraint(parallel_tool_calls=False)["anyOf"])


def test_the_clients_sampling_options_go_upstream_and_nothing_else():
    options = translate(request(temperature=0.2, max_completion_tokens=50, seed=7, user="u", tool_choice="auto",
                                logit_bias={"1": 2})).protocol.options
    assert options == {"temperature": 0.2, "max_tokens": 50, "seed": 7}


def test_pydantic_style_references_are_inlined_so_each_tool_stands_alone():
    point = {"type": "function", "function": {"name": "move", "parameters": {
        "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}},
        "type": "object", "properties": {"to": {"$ref": "#/$defs/Point", "description": "where"}}}}}
    protocol = translate(request(tools=[point])).protocol
    call = '{"type": "tool_call", "tool": "move", "arguments": {"to": {"x": 1}}}'
    assert parse_action(call, protocol.actions).value["arguments"] == {"to": {"x": 1}}
    with pytest.raises(ParseError) as caught:
        parse_action('{"type": "tool_call", "tool": "move", "arguments": {"to": {"x": "far"}}}', protocol.actions)
    assert caught.value.kind == "bad_arguments" and "$.arguments.to.x" in caught.value.message
    assert "$ref" not in json.dumps(protocol.actions.schema)


def test_a_reply_becomes_a_standard_completion_with_fresh_call_ids():
    protocol = translate(request()).protocol
    step = protocol.parse(Reply('[{"type": "tool_call", "tool": "add", "arguments": {"a": 2, "b": 3}}, '
                                '{"type": "tool_call", "tool": "now", "arguments": {}}]'))
    done = completion(step, "m", {"prompt_tokens": 10, "completion_tokens": 4})
    choice = done["choices"][0]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] is None
    calls = choice["message"]["tool_calls"]
    assert [(c["type"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == [
        ("function", "add", {"a": 2, "b": 3}), ("function", "now", {})]
    assert all(c["id"].startswith("call_") for c in calls) and calls[0]["id"] != calls[1]["id"]
    assert done["usage"] == {"prompt_tokens": 10, "completion_tokens": 4, "total_tokens": 14}
    final = completion(protocol.parse(Reply('{"type": "final", "answer": "5"}')), "m", {})
    assert final["choices"][0]["message"] == {"role": "assistant", "content": "5"}
    assert final["choices"][0]["finish_reason"] == "stop"


def test_the_stream_carries_the_same_completion_in_chunks():
    protocol = translate(request()).protocol
    done = completion(protocol.parse(Reply('[{"type": "tool_call", "tool": "add", "arguments": {"a": 2, "b": 3}}, '
                                           '{"type": "tool_call", "tool": "now", "arguments": {}}]')),
                      "m", {"prompt_tokens": 3, "completion_tokens": 2})
    events = chunks(done, include_usage=True)
    assert all(e["object"] == "chat.completion.chunk" and e["id"] == done["id"] for e in events)
    calls = {}
    for event in events[:-1]:
        for delta in event["choices"][0]["delta"].get("tool_calls") or []:
            slot = calls.setdefault(delta["index"], {"id": None, "name": "", "arguments": ""})
            slot["id"] = slot["id"] or delta.get("id")
            slot["name"] += delta.get("function", {}).get("name") or ""
            slot["arguments"] += delta.get("function", {}).get("arguments") or ""
    assert [{"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for _, c in sorted(calls.items())] == done["choices"][0]["message"]["tool_calls"]
    assert events[-2]["choices"][0]["finish_reason"] == "tool_calls"
    assert events[-1]["choices"] == [] and events[-1]["usage"]["total_tokens"] == 5
    assert "usage" not in chunks(done, include_usage=False)[-1]


def test_a_reply_passed_on_keeps_what_the_backend_said():
    done = passed_on(Reply("hi", finish_reason="length", usage={"prompt_tokens": 1, "completion_tokens": 1}), "m")
    assert done["choices"][0]["message"]["content"] == "hi" and done["choices"][0]["finish_reason"] == "length"


def test_a_user_message_with_an_image_is_passed_on_as_it_is():
    parts = [{"type": "text", "text": "What is this?"}, {"type": "image_url", "image_url": {"url": "data:,"}}]
    assert translate(request(messages=[{"role": "user", "content": parts}])).messages[1]["content"] == parts
    text_only = [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
    assert translate(request(messages=[{"role": "user", "content": text_only}])).messages[1]["content"] == "ab"


TOOL_MESSAGE = {"role": "tool", "tool_call_id": "c9", "content": "5"}
RECURSIVE = {"type": "function", "function": {"name": "tree", "parameters": {
    "$defs": {"Node": {"type": "object", "properties": {"child": {"$ref": "#/$defs/Node"}}}},
    "type": "object", "properties": {"root": {"$ref": "#/$defs/Node"}}}}}
# each level refers to the next twice: inlined, 2**30 nodes
EXPLODING = {"type": "function", "function": {"name": "boom", "parameters": {
    "$defs": {f"L{i}": {"type": "object", "properties": {"a": {"$ref": f"#/$defs/L{i + 1}"},
                                                          "b": {"$ref": f"#/$defs/L{i + 1}"}}} for i in range(30)}
    | {"L30": {"type": "string"}},
    "type": "object", "properties": {"x": {"$ref": "#/$defs/L0"}}}}}


def one_def_referred_to(definition: dict, times: int) -> dict:
    """A tool whose parameters refer ``times`` to one $defs entry: a small request that inlines into a big one."""
    return {"type": "function", "function": {"name": "wide", "parameters": {
        "type": "object", "$defs": {"Big": definition},
        "properties": {f"p{i}": {"$ref": "#/$defs/Big"} for i in range(times)}}}}


def nested(levels: int, leaf=None) -> dict:
    schema = {} if leaf is None else leaf
    for _ in range(levels):
        schema = {"type": "object", "properties": {"x": schema}}
    return schema


def answer_format(schema: dict) -> dict:
    return {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema, "strict": True}}


def function(parameters: dict, name: str = "f", description: str = "") -> dict:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}


HUGE_DESCRIPTION = one_def_referred_to({"type": "string", "description": "d" * 100_000}, 1000)  # 131 kB, 100 MB
LONG_ENUM = one_def_referred_to({"type": "string", "enum": [f"value-{i:06d}" for i in range(10_000)]}, 200)
DEEP_DEFAULT = {"type": "object", "properties": {"x": {"type": "array", "default": json.loads("[" * 200 + "]" * 200)}}}


@pytest.mark.parametrize("body, says, param", [
    ("not an object", "the body must be a JSON object", None),
    (request(tools=[HUGE_DESCRIPTION]), "too large once its $refs are inlined: over 1,000,000 characters",
     "tools[0].function.parameters"),
    (request(tools=[LONG_ENUM]), "too large once its $refs are inlined", "tools[0].function.parameters"),
    (request(tools=[function({"type": "object"}, f"t{i}", "d" * 20_000) for i in range(101)]),
     "the tools' documentation would make a system prompt of", "tools"),
    (request(tools=[function(nested(450))]), "is nested more than 64 levels deep", "tools[0].function.parameters"),
    (request(tools=[function(nested(40))]), "is nested more than 64 levels deep", "tools[0].function.parameters"),
    (request(tools=[function(DEEP_DEFAULT)]), "is nested more than 64 levels deep", "tools[0].function.parameters"),
    (request(tools=[function({"type": "object", "$defs": {"X": 1}, "properties": {"a": {"$ref": "#/$defs/X"}}})]),
     "$defs.X is not a schema object", "tools[0].function.parameters"),
    (request(temperature="hot"), "temperature must be a number", "temperature"),
    (request(top_p=[1]), "top_p must be a number", "top_p"),
    (request(max_tokens=0), "max_tokens must be a whole number of at least 1", "max_tokens"),
    (request(max_completion_tokens=2.5), "max_completion_tokens must be a whole number", "max_completion_tokens"),
    (request(seed=True), "seed must be a whole number", "seed"),
    (request(tools="add"), "tools must be a non-empty array", "tools"),
    (request(tools=[ADD] * 2), "a tool named 'add' is already registered", "tools[1]"),
    (request(tools=[{"type": "function"}]), "tools[0] must be", "tools[0]"),
    (request(tools=[{"type": "custom", "custom": {"name": "x"}}]), "tools[0] must be", "tools[0]"),
    (request(tools=[{"type": "function", "function": {"name": "no spaces"}}]), "invalid tool name", "tools[0]"),
    (request(tools=[{"type": "function", "function": {"name": 7}}]), "name must be a string", "tools[0].function.name"),
    (request(tools=[{"type": "function", "function": {"name": "x", "parameters": {"type": "string"}}}]),
     '"type": "object"', "tools[0]"),
    (request(tools=[{"type": "function", "function": {"name": "x", "parameters": {"type": "object", "properties": 3}}}]),
     "invalid parameters schema", "tools[0]"),
    (request(tools=[{"type": "function", "function": {"name": "x", "parameters": []}}]), "JSON Schema object",
     "tools[0].function"),
    (request(tools=[RECURSIVE]), "recursive", "tools[0].function.parameters"),
    (request(tools=[EXPLODING]), "too large once its $refs are inlined", "tools[0].function.parameters"),
    (request(tools=[{"type": "function", "function": {"name": "x", "parameters": {
        "type": "object", "properties": {"y": {"$ref": "https://example.com/schema"}}}}}]), "only local references",
     "tools[0].function.parameters"),
    (request(tools=[ADD] + [{"type": "function", "function": {"name": f"t{i}"}} for i in range(MAX_TOOLS)]),
     f"at most {MAX_TOOLS} tools", "tools"),
    (request(tool_choice={"type": "function", "function": {"name": "delete_everything"}}),
     "not among the tools (add, now)", "tool_choice"),
    (request(tool_choice="always"), 'tool_choice must be "none", "auto", "required"', "tool_choice"),
    (request(parallel_tool_calls="no"), "parallel_tool_calls must be true or false", "parallel_tool_calls"),
    (request(n=3), "n must be 1", "n"),
    (request(stream="yes"), "stream must be true or false", "stream"),
    (request(response_format="json"), "response_format must be", "response_format"),
    (request(response_format={"type": "yaml"}), "response_format must be", "response_format"),
    (request(response_format={"type": "json_schema", "json_schema": "city"}), "response_format must be",
     "response_format"),
    (request(response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": []}}),
     "response_format must be", "response_format"),
    (request(response_format=answer_format({"type": "objekt"})), "is not a valid JSON Schema",
     "response_format.json_schema.schema"),
    (request(response_format=answer_format({"type": "object", "properties": {"n": {"minimum": "one"}}})),
     "is not a valid JSON Schema: ['properties']['n']['minimum']", "response_format.json_schema.schema"),
    (request(response_format=answer_format(nested(100))), "is nested more than 64 levels deep",
     "response_format.json_schema.schema"),
    (request(response_format=answer_format(HUGE_DESCRIPTION["function"]["parameters"])),
     "too large once its $refs are inlined", "response_format.json_schema.schema"),
    (request(response_format=answer_format(RECURSIVE["function"]["parameters"])), "recursive",
     "response_format.json_schema.schema"),
    (request(response_format=nested(5000)), "response_format is nested too deeply",
     "response_format"),
    (request(messages=[]), "messages must be a non-empty array", "messages"),
    (request(messages="hi"), "messages must be a non-empty array", "messages"),
    (request(messages=[{"role": "wizard", "content": "hi"}]), "messages[0] must be an object with a role", "messages[0]"),
    (request(messages=[USER, TOOL_MESSAGE]), "messages[1] is a tool message that answers no tool call", "messages[1]"),
    (request(messages=[USER, assistant_calls(("c1", "add", {"a": 1, "b": 2})), TOOL_MESSAGE]),
     "tool_call_id 'c9', which answers no (other) tool call", "messages[2]"),
    (request(messages=[USER, assistant_calls(("c1", "add", {"a": 1, "b": 2})), {**TOOL_MESSAGE, "tool_call_id": {}}]),
     "messages[2].tool_call_id must be a string", "messages[2].tool_call_id"),
    (request(messages=[USER, assistant_calls(("c1", "add", {"a": 1, "b": 2})), {**TOOL_MESSAGE, "tool_call_id": ["c1"]}]),
     "messages[2].tool_call_id must be a string", "messages[2].tool_call_id"),
    (request(messages=[USER, assistant_calls(("c1", "add", {"a": 1, "b": 2})), USER]),
     "the tool call 'c1' has no tool message answering it", "messages"),
    (request(messages=[USER, {"role": "assistant", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{a: 1"}}]}]),
     "arguments is not JSON text", "messages[1].tool_calls[0]"),
    (request(messages=[USER, {"role": "assistant", "tool_calls": [{"type": "function"}]}]),
     "must be {\"id\"", "messages[1].tool_calls[0]"),
    (request(messages=[USER, {"role": "assistant", "tool_calls": "add"}]), "must be an array", "messages[1].tool_calls"),
    (request(messages=[{"role": "system", "content": 42}, USER]), "content must be a string or an array of text parts",
     "messages[0].content"),
])
def test_a_request_that_does_not_fit_is_refused_with_what_to_fix(body, says, param):
    with pytest.raises(RequestError) as caught:
        translate(body)
    assert says in caught.value.message
    assert caught.value.param == param and caught.value.status == 400


@pytest.mark.parametrize("schema, says", [
    ({"type": "object", "properties": {"s": {"type": "string", "maxLength": 10**9}}}, "maxLength 1000000000 is over"),
    ({"type": "object", "properties": {"s": {"type": "array", "minItems": 200_000}}}, "minItems 200000 is over"),
    ({"type": "object", "properties": {"s": {"type": "string", "pattern": "^a{3,5000000}$"}}},
     "the pattern repeats 5,000,000 times"),
])
def test_constrained_replies_refuse_repetitions_a_grammar_would_spell_out(schema, says):
    body = request(tools=[function(schema)])
    assert translate(body).protocol.options == {}  # unconstrained, the bound is only checked in the reply
    with pytest.raises(RequestError) as caught:
        translate(body, constrain=True)
    assert says in caught.value.message and caught.value.param == "tools[0].function.parameters"


def test_the_protocols_kept_for_repeated_tools_stay_within_their_size():
    for number in range(12):  # each about 0.9 MB of documentation once inlined
        big = one_def_referred_to({"type": "string", "description": f"{number} " + "d" * 9000}, 95)
        assert len(translate(request(tools=[big])).messages[0]["content"]) > 850_000
    kept = translation._kept
    assert sum(size for _, _, size in kept.values()) <= CACHED_CHARS and 0 < len(kept) < 12
    again = one_def_referred_to({"type": "string", "description": "11 " + "d" * 9000}, 95)
    assert translate(request(tools=[again])).protocol.registry is list(kept.values())[-1][0].registry  # the latest


HOSTILE = [None, 7, -1.5, True, "x", "", [], {}, [None], {"a": {}}, json.loads("[" * 300 + "]" * 300)]


def paths(value, path=()):
    """Every place in a JSON value: (path, value)."""
    yield path, value
    children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in children:
        yield from paths(child, (*path, key))


def replaced(value, path, new):
    if not path:
        return new
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[path[0]] = replaced(value[path[0]], path[1:], new)
    return copy


def test_any_field_of_any_type_is_translated_or_a_400_naming_its_field():
    base = request(messages=[{"role": "system", "content": "Be brief."}, USER,
                             assistant_calls(("c1", "add", {"a": 2, "b": 3})),
                             {"role": "tool", "tool_call_id": "c1", "content": "5"},
                             {"role": "assistant", "content": [{"type": "text", "text": "5."}]}],
                   tool_choice="auto", temperature=0.2, max_tokens=50, stream=False, parallel_tool_calls=True)
    tried = 0
    for path, _ in list(paths(base))[1:]:
        for value in HOSTILE:
            body = replaced(base, path, value)
            tried += 1
            try:
                translate(body)
            except RequestError as error:
                assert error.status == 400 and "\n" not in error.message
                assert error.param is not None and str(path[0]) == error.param.split(".")[0].split("[")[0], \
                    (path, value, error.message, error.param)
    assert tried > 500


def test_any_field_of_a_request_without_tools_for_the_embedded_model_is_taken_or_a_400_naming_it():
    """The embedded model has no pass-through: what it is given is checked here first."""
    base = {"model": "m", "messages": [{"role": "system", "content": "Be brief."}, USER,
                                       {"role": "user", "content": [{"type": "text", "text": "and?"}]}],
            "temperature": 0.5, "max_tokens": 20, "stop": ["\n\n"], "response_format": {"type": "json_schema",
                                                                                     "json_schema": {"schema": {}}}}
    assert plain(base) == (base["messages"], {"temperature": 0.5, "max_tokens": 20, "stop": ["\n\n"],
                                              "response_format": base["response_format"]})
    for path, _ in list(paths(base))[1:]:
        for value in HOSTILE:
            try:
                plain(replaced(base, path, value))
            except RequestError as error:
                assert error.param is not None and str(path[0]) == error.param.split(".")[0].split("[")[0], \
                    (path, value, error.message, error.param)


def test_a_huge_history_translates_in_bounded_time():
    messages = []
    for i in range(2000):
        messages += [USER, assistant_calls((f"c{i}", "add", {"a": i, "b": 1})),
                     {"role": "tool", "tool_call_id": f"c{i}", "content": "x" * 1000}]
    history = conversation(messages, PromptProtocol(tool_registry([ADD])))
    assert len(history) == 1 + 3 * 2000


CITY = {"type": "object", "properties": {"city": {"type": "string"}, "population": {"type": "integer"}},
        "required": ["city", "population"], "additionalProperties": False}


def test_a_json_schema_response_format_with_tools_is_the_final_answers_schema():
    translated = translate(request(response_format=answer_format(CITY)))
    protocol = translated.protocol
    assert protocol.output_schema == CITY
    assert '"answer" is not a text but a JSON value valid against this JSON Schema:\n' + json.dumps(CITY) in \
        translated.messages[0]["content"]
    final = protocol.parse(Reply('{"type": "final", "answer": {"city": "Paris", "population": 2100000}}'))
    assert json.loads(final.answer) == {"city": "Paris", "population": 2100000}
    assert completion(final, "m", {})["choices"][0]["message"]["content"] == final.answer
    reask = protocol.parse(Reply('{"type": "final", "answer": "Paris, with 2.1 million people"}'))
    assert reask.kind == "schema" and reask.problem == (
        '$.answer: "Paris, with 2.1 million people" is not of type \'object\' '
        '(the answer must be a JSON value valid against the answer schema)')
    call = protocol.parse(Reply('{"type": "tool_call", "tool": "now", "arguments": {}}'))  # tools are still called
    assert call.calls[0].tool == "now"


def test_the_answer_schemas_refs_are_inlined_and_json_object_means_any_object():
    pydantic_like = {"$defs": {"City": CITY}, "type": "object", "properties": {"cities": {
        "type": "array", "items": {"$ref": "#/$defs/City"}}}, "required": ["cities"]}
    protocol = translate(request(response_format=answer_format(pydantic_like)), constrain=True).protocol
    assert protocol.output_schema["properties"]["cities"]["items"] == CITY
    grammar_schema = protocol.options["response_format"]["json_schema"]["schema"]
    assert "$ref" not in json.dumps(grammar_schema)  # the constraint holds the answer too, standing alone
    assert grammar_schema["anyOf"][0]["properties"]["answer"]["properties"]["cities"]["items"]["properties"] == \
        CITY["properties"]
    anything = translate(request(response_format={"type": "json_object"})).protocol
    assert anything.output_schema == {"type": "object"}
    assert isinstance(anything.parse(Reply('{"type": "final", "answer": "text"}')), Reask)
    assert translate(request(response_format={"type": "text"})).protocol.output_schema is None


def test_an_earlier_answer_that_is_json_goes_back_as_the_final_actions_value():
    messages = [USER, {"role": "assistant", "content": '{"city": "Paris", "population": 1}'}, USER]
    history = translate(request(messages=messages, response_format=answer_format(CITY))).messages
    assert json.loads(history[2]["content"]) == {"type": "final", "answer": {"city": "Paris", "population": 1}}


def test_the_order_of_properties_is_kept_as_the_client_wrote_it():
    parameters = {"type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}}}
    answer = {"type": "object", "properties": {"title": {"type": "string"}, "author": {"type": "string"}}}
    translated = translate(request(tools=[function(parameters, "search")], response_format=answer_format(answer)))
    assert "- search(query?: string, limit?: integer)" in translated.messages[0]["content"]
    assert list(translated.protocol.output_schema["properties"]) == ["title", "author"]


def test_constrained_the_answer_schemas_repetitions_are_bounded_as_a_tools_are():
    body = request(response_format=answer_format({"type": "string", "maxLength": 10**9}))
    assert translate(body).protocol.output_schema == {"type": "string", "maxLength": 10**9}
    with pytest.raises(RequestError) as caught:
        translate(body, constrain=True)
    assert "maxLength 1000000000 is over" in caught.value.message
    assert caught.value.param == "response_format.json_schema.schema"
