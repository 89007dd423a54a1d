"""Where a completion is in its JSON, fed as the model writes it: in pieces that split anywhere."""
import json

import pytest

from agent.models.local_json import JsonTrail

CALLS = ('[{"type": "tool_call", "tool": "get_record", "arguments": {"county": "San \\"Diego\\"", "n": 2, '
         '"tags": ["a", "b"], "filter": {"kind": "x"}}}]')


def fed(text: str, size: int = 3) -> JsonTrail:
    trail = JsonTrail()
    for start in range(0, len(text), size):
        trail.feed(text[start:start + size])
    return trail


@pytest.mark.parametrize("size", [1, 2, 3, 7, 1000])
def test_the_call_and_its_keys_are_read_however_the_text_is_split(size):
    cut = CALLS.index(', "filter"')
    trail = fed(CALLS[:cut], size)
    tool, arguments = trail.arguments()
    assert tool == "get_record"
    assert arguments.keys == ["county", "n", "tags"]
    assert arguments.strings["county"] == 'San \\"Diego\\"'  # as written, escapes kept
    assert not trail.in_string


def test_inside_a_value_a_key_and_an_answer():
    assert fed(CALLS[:CALLS.index("San") + 2]).in_value()  # inside the county's value
    assert fed(CALLS[:CALLS.index('"kind"') + 3]).in_value() is False  # writing a key of the nested object
    assert fed(CALLS[:CALLS.index('"x"') + 1]).in_value()  # a value in an object nested in the arguments
    assert fed(CALLS[:CALLS.index('"a"') + 1]).in_value()  # a string in an array in the arguments
    assert fed('{"type": "final", "answer": "San').in_value() is False
    assert fed('[{"type": "tool_call", "tool": "get').in_value() is False  # the tool's name is no argument


def test_a_nested_object_is_not_the_calls_arguments():
    trail = fed(CALLS[:CALLS.index('"x"')])
    assert trail.arguments() is None


def test_the_whole_call_leaves_nothing_open():
    trail = fed(CALLS)
    assert trail.open == [] and not trail.in_string and trail.arguments() is None
    assert json.loads(CALLS)  # (the text fed is the JSON of a call)


def test_stray_closing_brackets_and_a_huge_value_end_cleanly():
    trail = fed("]]}}" + '{"type": "tool_call", "tool": "t", "arguments": {"k": "' + "x" * 100_000, 4096)
    assert trail.in_value() and len(trail.string) == 100_000


def test_a_final_answers_text_is_told_from_keys_types_and_call_arguments():
    assert fed('{"type": "final", "answer": "It is ').in_answer()
    assert fed('{"type": "final", "answer": "a \\"quoted').in_answer()  # an escaped mark stays inside
    assert not fed('{"type": "final", "answer": "done"').in_answer()  # ended
    assert not fed('{"type": "final", "ans').in_answer()  # a key
    assert not fed('{"type": "fin').in_answer()
    assert not fed('{"type": "tool_call", "tool": "t", "arguments": {"answer": "x').in_answer()


def test_the_parameter_being_written_and_the_tools_name():
    assert fed(CALLS[:CALLS.index("San") + 2]).parameter() == ("get_record", "county")
    assert fed(CALLS[:CALLS.index('"b"') + 1]).parameter() == ("get_record", "tags")  # in an array
    assert fed(CALLS[:CALLS.index('"x"') + 1]).parameter() == ("get_record", "filter")  # below the parameter
    assert fed('[{"type": "tool_call", "tool": "get_record", "arguments": {').parameter() is None  # none keyed
    assert fed('{"type": "final", "answer": "San').parameter() is None
    assert fed('[{"type": "tool_call", "tool": "get_').in_tool_name()
    assert not fed('[{"type": "tool_call", "tool": "get_record"').in_tool_name()  # ended
    assert not fed('[{"type": "tool_call", "to').in_tool_name()  # a key
    assert not fed('{"type": "final", "tool": "get_').in_tool_name()  # no call
    assert not fed(CALLS[:CALLS.index("San") + 2]).in_tool_name()
