"""A value that breaks its parameter's schema is answered with the parameter's own documentation and, for a
value outside an enum, the allowed value it most likely means: in a prompt reply's re-ask and a native call's
error alike."""
import json

import pytest

from agent import Reply
from agent.protocols import NativeProtocol, PromptProtocol, Reask
from agent.tools import Registry, tool
from agent.tools.docs import MAX_MESSAGE, closest

UNITS = ["mm", "cm", "m", "km", "in", "ft", "yd", "mi", "nmi"]


@tool(parameters={"type": "object", "required": ["value", "from_unit"], "additionalProperties": False, "properties": {
    "value": {"type": "number", "description": "The length to convert, in from_unit."},
    "from_unit": {"type": "string", "enum": UNITS, "description": "Unit of value: mi (statute mile), km, ..."},
    "airport": {"type": "string", "pattern": "^[A-Z]{3}$", "description": "x" * 1000},
    "bare": {"type": "string", "enum": ["a", "b"]}}})
def convert_length(value, from_unit, airport="LIS", bare="a"):
    """Convert a length."""
    return value


def reask(arguments: dict) -> Reask:
    reply = json.dumps({"type": "tool_call", "tool": "convert_length", "arguments": arguments})
    turn = PromptProtocol(Registry([convert_length])).parse(Reply(content=reply))
    assert isinstance(turn, Reask) and turn.kind == "bad_arguments"
    return turn


def test_a_value_outside_the_enum_is_reasked_with_what_it_likely_means_and_the_parameters_documentation():
    turn = reask({"value": 10, "from_unit": "miles"})
    assert turn.problem == ("arguments for convert_length: $.arguments.from_unit: \"miles\" is not one of "
                            f"{UNITS}; did you mean \"mi\"? (from_unit: Unit of value: mi (statute mile), km, ...)")
    assert turn.problem in turn.messages[-1]["content"]


def test_native_calls_get_the_same_note_in_their_error_result():
    protocol = NativeProtocol(Registry([convert_length]))
    call = {"id": "c1", "type": "function",
            "function": {"name": "convert_length", "arguments": json.dumps({"value": 10, "from_unit": "miles"})}}
    turn = protocol.parse(Reply(content=None, tool_calls=[call]))  # its only call is malformed: asked again
    assert isinstance(turn, Reask) and turn.kind == "bad_arguments"
    assert 'did you mean "mi"? (from_unit: Unit of value: mi (statute mile), km, ...)' in turn.problem


def test_the_note_is_bounded_and_left_out_where_nothing_is_documented():
    long = reask({"value": 1, "from_unit": "m", "airport": "Rome"}).problem
    assert long.endswith(f" (airport: {'x' * (MAX_MESSAGE - 1)}…)") and "did you mean" not in long
    assert reask({"value": 1, "from_unit": "m", "bare": "A "}).problem.endswith("; did you mean \"a\"?")
    missing = reask({"from_unit": "m"}).problem  # a fault in the object's keys: no parameter to quote
    assert missing.endswith("'value' is a required property")


@pytest.mark.parametrize("value, allowed, guess", [
    ("miles", UNITS, "mi"),  # the longest allowed value it starts with, not "m"
    ("Celsius", ["celsius", "kelvin"], "celsius"),
    ("kelvn", ["celsius", "kelvin"], "kelvin"),
    ("us_g", UNITS, None),
    ("oz", ["ml", "l", "cup", "fl_oz"], None),
    ("m" * 10_000, UNITS, None),  # too long to guess at
    (5, UNITS, None),
    ("mi", "not a list", None),
    ("x", [None, 3, "", "x1"], "x1"),  # only the strings are candidates
])
def test_closest(value, allowed, guess):
    assert closest(value, allowed) == guess


def test_a_huge_enum_is_not_quoted_whole_in_either_protocol():
    @tool(description="Pick a code.", parameters={"type": "object", "required": ["code"], "properties": {
        "code": {"type": "string", "enum": [f"c{i}" for i in range(100_000)], "description": "A code."}}})
    def pick(code):
        return code

    registry = Registry([pick])
    reply = json.dumps({"type": "tool_call", "tool": "pick", "arguments": {"code": "c123456"}})
    prompted = PromptProtocol(registry).parse(Reply(content=reply)).problem
    native = registry.check_arguments("pick", {"code": "c123456"})
    for problem in (prompted, native):
        assert len(problem) < 2 * MAX_MESSAGE and "…" in problem and problem.endswith(" (code: A code.)")
