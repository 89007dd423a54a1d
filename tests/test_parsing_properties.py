"""Properties of reply parsing on arbitrary text: always a Parsed or a ParseError, never another exception.

The deadlines are generous for the sizes involved, so only a super-linear slowdown trips them.
"""
import json
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.parsing import MAX_REPLY_CHARS, ParseError, Parsed, action_schema, parse_action

SCHEMA = action_schema({
    "calculator": {"type": "object", "properties": {"expression": {"type": "string"}},
                   "required": ["expression"], "additionalProperties": False},
    "flags": {"type": "object"},
})
FRAGMENTS = ["{", "}", "[", "]", '"', "'", ":", ",", " ", "\n", "\\", "\\u", "\\ud800", "<think>", "</think>",
             "<thinking>", "</thinking>", "```", "```json\n", "0", "7", "1" * 50, "-", ".5", "e9", "True", "None",
             "False", "true", "null", "NaN", '"type"', '"final"', '"tool_call"', '"tool"', '"calculator"',
             '"arguments"', '"answer"', '{"type": "final", "answer": "4"}', "x", "é", "\x00", "\ud800"]
CALL = '{"type": "tool_call", "tool": "calculator", "arguments": {"expression": "1+1"}}'


def parses_or_fails_cleanly(text: str) -> None:
    try:
        assert isinstance(parse_action(text, SCHEMA), Parsed)
    except ParseError as error:
        assert error.kind in ("no_json", "invalid_json", "multiple_actions", "schema", "unknown_tool",
                              "bad_arguments", "too_long") and error.message


def jsonish(max_pieces: int):
    return st.lists(st.sampled_from(FRAGMENTS), max_size=max_pieces).map("".join)


@settings(max_examples=300, deadline=timedelta(seconds=1))
@given(st.text(max_size=2000))
def test_any_short_text(text):
    parses_or_fails_cleanly(text)


@settings(max_examples=500, deadline=timedelta(seconds=1))
@given(jsonish(200))
def test_any_short_jsonish_text(text):
    parses_or_fails_cleanly(text)


@settings(max_examples=300, deadline=timedelta(seconds=1))
@given(jsonish(30), jsonish(30))
def test_an_action_among_jsonish_text(before, after):
    parses_or_fails_cleanly(before + CALL + after)


@settings(max_examples=25, deadline=timedelta(seconds=5), suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=4).map("".join),
       st.integers(min_value=MAX_REPLY_CHARS // 4, max_value=MAX_REPLY_CHARS), jsonish(20))
def test_any_fragments_repeated_up_to_the_size_cap(piece, size, tail):
    text = (piece * (size // len(piece) + 1))[:size - len(tail)] + tail
    parses_or_fails_cleanly(text)


@settings(max_examples=10, deadline=timedelta(seconds=5), suppress_health_check=[HealthCheck.too_slow])
@given(st.text(min_size=1, max_size=50), st.integers(min_value=MAX_REPLY_CHARS // 2, max_value=MAX_REPLY_CHARS))
def test_any_text_repeated_up_to_the_size_cap(piece, size):
    parses_or_fails_cleanly((piece * (size // len(piece) + 1))[:size])


@settings(max_examples=20, deadline=timedelta(seconds=1))
@given(st.text(min_size=1, max_size=50), st.integers(min_value=1, max_value=MAX_REPLY_CHARS))
def test_over_the_cap_is_too_long_whatever_it_holds(piece, extra):
    size = MAX_REPLY_CHARS + extra
    with pytest.raises(ParseError) as caught:
        parse_action((piece * (size // len(piece) + 1))[:size], SCHEMA)
    assert caught.value.kind == "too_long" and f"{size:,} characters" in caught.value.message


# without "<" (a reply that is not one whole JSON action has its <think> blocks cut out as reasoning) and lone
# surrogates (they become U+FFFD): both by design, and tested elsewhere
TEXTS = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="<"), max_size=20)
JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | TEXTS,
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXTS, inner, max_size=4),
                           max_leaves=20)


@settings(max_examples=300, deadline=timedelta(seconds=1))
@given(st.dictionaries(TEXTS, JSON_VALUES, max_size=4), st.booleans(), st.integers(min_value=1),
       st.sampled_from(["", " ", "\n"]))
def test_a_call_whose_last_closers_are_missing_is_the_same_call_or_invalid(arguments, batch, cut, space):
    value = {"type": "tool_call", "tool": "flags", "arguments": arguments}
    value = [value] if batch else value
    text = json.dumps(value)
    closers = len(text) - len(text.rstrip("}]"))
    left = text[:-(1 + cut % closers)]
    try:
        parsed = parse_action(left + space, SCHEMA)
    except ParseError as error:  # only where nothing but an opening bracket is left to close
        assert error.kind == "invalid_json" and left.rstrip()[-1] in "{["
        return
    assert parsed == Parsed(value, ["unclosed_brackets"])
