"""The prompt is written for the tools actually offered, and both protocols treat a call the same way."""
import json

from jsonschema import Draft202012Validator

from agent import Agent, Reply, ScriptedModel
from agent.protocols import NativeProtocol, PromptProtocol, Reask, explicit_types, written_call
from agent.tools import Registry, builtin_registry, tool


@tool(parameters={"type": "object", "required": ["value", "unit"], "additionalProperties": False, "properties": {
    "value": {"type": "number", "description": "the length, in unit"},
    "unit": {"type": "string", "enum": ["m", "km"], "description": "the unit of value"},
    "extra": {"description": "any JSON value"}}})
def convert(value, unit, extra=None):
    """Convert a length to metres."""
    return value * (1000 if unit == "km" else 1)


def test_the_prompt_names_only_the_offered_tools_and_their_own_rules():
    prompt = PromptProtocol(Registry([convert])).system_prompt()
    assert "Tools (the only ones: convert):" in prompt
    assert "calculator" not in prompt and "list_dir" not in prompt and "current_time" not in prompt
    assert "value (number, required): the length, in unit" in prompt
    assert 'unit (string, required, one of "m" | "km"): the unit of value' in prompt


def test_the_builtin_tools_bring_their_rules_and_the_calculator_its_example():
    prompt = PromptProtocol(builtin_registry(".")).system_prompt()
    assert "Use calculator for any arithmetic" in prompt and "Use list_dir when you do not know" in prompt
    assert 'You: {"type": "tool_call", "tool": "calculator", "arguments": {"expression": "350 * 12 / 100"}}' in prompt


def test_tools_with_no_example_get_one_with_a_tool_that_is_not_offered_and_cannot_be_called():
    protocol = PromptProtocol(Registry([convert]))
    prompt = protocol.system_prompt()
    assert "with a tool count_letters(text: string, letter: string) that is not one of your tools" in prompt
    assert prompt.index('"answer": "count_letters counts one letter, not words') < prompt.index('"tool": "count_letters"')
    assert prompt.index("Examples, with a tool count_letters") < prompt.index("Tools (the only ones")
    assert "Tools (the only ones: convert):" in prompt
    turn = protocol.parse(Reply(content='{"type": "tool_call", "tool": "count_letters", "arguments": {}}'))
    assert isinstance(turn, Reask) and turn.kind == "unknown_tool"


def test_everything_before_the_tools_is_the_same_for_any_tools_without_an_example():
    """So a model server's prompt cache (or the embedded model's kept state) holds it for the next tool set."""
    @tool
    def shout(text: str) -> str:
        """Shout a text."""
        return text.upper()

    first, second = (PromptProtocol(Registry(tools)).system_prompt() for tools in ([convert], [shout, convert]))
    start = first[:first.index("\nTools (the only ones: ")]
    assert second.startswith(start) and "Rules:" in start and "Examples," in start
    assert "convert" not in start and "shout" not in start


def test_the_neutral_example_shows_independent_calls_sent_together():
    prompt = PromptProtocol(Registry([convert])).system_prompt()
    batch = next(line for line in prompt.splitlines() if line.startswith("You: ["))
    calls = json.loads(batch.removeprefix("You: "))
    assert [c["arguments"]["letter"] for c in calls] == ["a", "n"]


def test_the_neutral_example_is_left_out_when_a_tool_has_its_name():
    @tool
    def count_letters(text: str) -> int:
        """Count letters."""
        return len(text)

    prompt = PromptProtocol(Registry([convert, count_letters])).system_prompt()
    assert "Example" not in prompt and "not one of your tools" not in prompt


def test_constrained_replies_may_be_a_batch_and_a_typeless_parameter_takes_any_value():
    protocol = PromptProtocol(Registry([convert]), constrain=True)
    schema = protocol.options["response_format"]["json_schema"]["schema"]
    validator = Draft202012Validator(schema)
    call = {"type": "tool_call", "tool": "convert", "arguments": {"value": 5, "unit": "km", "extra": [1, {"a": None}]}}
    assert validator.is_valid([call, call]) and validator.is_valid(call)
    assert not validator.is_valid([call] * 9)
    extra = schema["anyOf"][1]["properties"]["arguments"]["properties"]["extra"]
    assert extra["type"] == ["string", "number", "boolean", "object", "array", "null"]


def test_explicit_types_leaves_shaped_schemas_alone_and_reaches_nested_ones():
    schema = {"type": "object", "properties": {"a": {"enum": [1]}, "b": {"type": "array", "items": {}},
                                               "c": {"anyOf": [{"description": "x"}]}}}
    out = explicit_types(schema)
    assert out["properties"]["a"] == {"enum": [1]}
    assert out["properties"]["b"]["items"]["type"][0] == "string"
    assert out["properties"]["c"]["anyOf"][0]["type"][-1] == "null"
    assert "type" not in schema["properties"]["b"]["items"]  # a copy


def test_written_call_reads_the_usual_shapes():
    assert written_call('{"name": "convert", "arguments": {"value": 1}}') == ("convert", {"value": 1})
    assert written_call('```json\n{"function": {"name": "f", "arguments": "{\\"a\\": 2}"}}\n```') == ("f", {"a": 2})
    assert written_call('<tool_call>{"name": "f", "parameters": {}}</tool_call>') == ("f", {})
    assert written_call('{"type": "tool_call", "tool": "f", "arguments": {}}') == ("f", {})
    assert written_call("The answer is 4.") is None
    assert written_call('{"name": "Ada", "age": 36}') is None  # data, not a call


def native_run(*replies):
    registry = Registry([convert])
    model = ScriptedModel(list(replies))
    return Agent(model, registry, NativeProtocol(registry)).run("convert 5 km"), model


def test_native_text_calling_a_missing_tool_is_reasked_like_prompt_mode():
    result, model = native_run(Reply(content='{"name": "calculator", "arguments": {"expression": "5*1000"}}'),
                               Reply(content="5000 m"))
    assert (result.status, result.answer, result.errors) == ("final", "5000 m", {"unknown_tool": 1})
    assert "unknown tool 'calculator'; available tools: convert" in model.calls[1]["messages"][-1]["content"]


def test_native_text_calling_an_offered_tool_runs_it():
    result, model = native_run(Reply(content='{"name": "convert", "arguments": {"value": 5, "unit": "km"}}'),
                               Reply(content="5000 m"))
    assert result.status == "final" and result.tool_calls == [
        {"tool": "convert", "arguments": {"value": 5, "unit": "km"}, "ok": True}]
    sent = model.calls[1]["messages"]
    assert sent[-1] == {"role": "tool", "tool_call_id": "call_1", "content": "5000"}
    assert json.loads(sent[-2]["tool_calls"][0]["function"]["arguments"]) == {"value": 5, "unit": "km"}


def test_native_prompt_carries_the_shared_rules_and_only_the_offered_tools_hints():
    assert "calculator" not in NativeProtocol(Registry([convert])).system_prompt()
    prompt = NativeProtocol(builtin_registry(".")).system_prompt()
    assert "When a tool does what the task asks, call it" in prompt and "Use calculator for any arithmetic" in prompt
