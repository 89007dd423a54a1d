"""Specification of reply parsing: lenient extraction, conservative repairs, strict and precise validation."""
import json

import pytest
from jsonschema import Draft202012Validator

from agent.parsing import ParseError, Parsed, action_schema, parse_action

TOOLS = {
    "calculator": {"type": "object", "properties": {"expression": {"type": "string"}},
                   "required": ["expression"], "additionalProperties": False},
    "read_file": {"type": "object", "properties": {"path": {"type": "string"}},
                  "required": ["path"], "additionalProperties": False},
    "current_time": {"type": "object", "properties": {"timezone": {"type": "string"}},
                     "additionalProperties": False},
}
SCHEMA = action_schema(TOOLS)

FINAL = '{"type": "final", "answer": "4"}'
CALC = '{"type": "tool_call", "tool": "calculator", "arguments": {"expression": "2+2"}}'
READ = '{"type": "tool_call", "tool": "read_file", "arguments": {"path": "notes.txt"}}'
CALC_VALUE = {"type": "tool_call", "tool": "calculator", "arguments": {"expression": "2+2"}}


def parse(text, **options):
    return parse_action(text, SCHEMA, **options)


def error_of(text, **options):
    with pytest.raises(ParseError) as caught:
        parse(text, **options)
    return caught.value


# --- the schema ---------------------------------------------------------------------------

def test_schema_is_valid_inline_and_has_a_branch_per_tool():
    Draft202012Validator.check_schema(SCHEMA.schema)
    assert "$ref" not in json.dumps(SCHEMA.schema)
    objects = [b for b in SCHEMA.schema["anyOf"] if b["type"] == "object"]
    assert [b["properties"]["type"]["const"] for b in objects] == ["final", "tool_call", "tool_call", "tool_call"]
    assert [b["properties"]["tool"]["const"] for b in objects[1:]] == list(TOOLS)
    assert all(b["additionalProperties"] is False for b in objects)
    assert objects[1]["properties"]["arguments"] == TOOLS["calculator"]
    assert objects[1]["required"] == ["type", "tool", "arguments"]
    (batch,) = [b for b in SCHEMA.schema["anyOf"] if b["type"] == "array"]
    assert (batch["minItems"], batch["maxItems"]) == (1, 8)


def test_schema_without_batch_has_no_array_branch():
    assert all(branch["type"] == "object" for branch in action_schema(TOOLS, batch=False).schema["anyOf"])


def test_schema_with_no_tools_only_allows_a_final_answer():
    schema = action_schema({})
    assert parse_action(FINAL, schema).value["answer"] == "4"
    with pytest.raises(ParseError) as caught:
        parse_action(CALC, schema)
    assert caught.value.kind == "unknown_tool"
    assert "available tools: none" in caught.value.message


def test_schema_does_not_share_the_tool_parameter_dicts():
    parameters = {"type": "object", "properties": {}}
    schema = action_schema({"noop": parameters})
    parameters["properties"]["x"] = {"type": "string"}
    assert schema.schema["anyOf"][1]["properties"]["arguments"]["properties"] == {}


# --- extraction ---------------------------------------------------------------------------

def test_plain_object():
    assert parse(FINAL) == Parsed({"type": "final", "answer": "4"}, [])
    assert parse(CALC).value == CALC_VALUE


@pytest.mark.parametrize("fence", ["```json\n{}\n```", "```\n{}\n```", "```JSON {} ```"])
def test_fenced_block_with_prose(fence):
    text = "I will compute it.\n" + fence.replace("{}", CALC) + "\nThen I will answer."
    assert parse(text).value == CALC_VALUE


def test_prose_before_and_after():
    assert parse(f"Let me calculate. {CALC} That should do it.").value == CALC_VALUE


def test_think_blocks_are_stripped_even_if_they_contain_actions():
    text = f"<think>maybe {FINAL}?</think>\n<THINKING>or {READ}</Thinking>{CALC}"
    assert parse(text).value == CALC_VALUE


def test_reasoning_before_an_orphan_closing_tag_is_dropped():
    assert parse(f"the template opened the block; I try {FINAL}</think>{CALC}").value == CALC_VALUE


def test_unterminated_think_is_all_reasoning():
    error = error_of(f"<think>I could send {CALC} but let me think more")
    assert error.kind == "no_json"
    assert error.message.startswith("no JSON object found in the reply")


def test_braces_in_prose_before_the_action_are_skipped():
    text = f"In set notation {{x}} and [1] (see below), the call is: {CALC}"
    assert parse(text).value == CALC_VALUE


def test_an_action_is_preferred_over_an_earlier_plain_json_value():
    assert parse(f'Given the data {{"a": 1}} and [1, 2], I call {CALC}').value == CALC_VALUE


def test_without_an_action_the_fenced_value_is_validated_before_earlier_ones():
    error = error_of('Config {"note": 1}, see below\n```json\n{"tool": "calculator", "arguments": {}}\n```')
    assert (error.kind, error.message) == ("schema", '$.type must be "tool_call" or "final"')


def test_a_broken_action_is_reported_not_the_fragment_inside_it():
    error = error_of(CALC[:-1] + " (the sum)")
    assert error.kind == "invalid_json"
    assert "Expecting ',' delimiter at line 1 column 80" in error.message


def test_an_unclosed_array_of_calls_is_invalid_json_not_several_actions():
    text = f"[{CALC}, {READ} and so on"
    error = error_of(text)
    assert error.kind == "invalid_json"
    assert error.message.startswith(f"invalid JSON: Expecting ',' delimiter at line 1 column {len(CALC + READ) + 5}:")


def test_a_broken_action_is_reported_not_an_earlier_prose_bracket():
    error = error_of('Step [1]: {"type": "final", "answer": "4" "5"}')
    assert error.kind == "invalid_json"


def test_prose_with_a_brace_but_nothing_decodable_is_invalid_json():
    error = error_of("The set {x | x > 0} is infinite.")
    assert error.kind == "invalid_json"
    assert error.message.startswith(
        "invalid JSON: Expecting property name enclosed in double quotes at line 1 column 10")


def test_invalid_json_gives_line_column_and_an_excerpt_with_a_caret():
    error = error_of('Here:\n{"type": "final",\n "answer": "4" "more"}')
    assert error.kind == "invalid_json"
    first, excerpt, caret = error.message.split("\n")
    assert first == "invalid JSON: Expecting ',' delimiter at line 3 column 16:"
    assert excerpt.strip() == '"answer": "4" "more"}'
    assert excerpt[caret.index("^")] == '"' and excerpt[caret.index("^"):].startswith('"more"')


def test_no_guessing_of_bare_words():
    assert error_of('{type: "final", answer: "4"}').kind == "invalid_json"


@pytest.mark.parametrize("text, value", [
    ('{"type": "final", "answer": "4"', {"type": "final", "answer": "4"}),
    ('Here: {"type": "final", "answer": "4"  \n', {"type": "final", "answer": "4"}),
    (CALC[:-2], CALC_VALUE),
    (f"[{CALC}, {READ}", [CALC_VALUE, json.loads(READ)]),
    ('{"type": "tool_call", "tool": "calculator", "arguments": {"expression": "2+2"}, "x": [1, {}', None),
])
def test_a_reply_that_ends_with_brackets_open_after_a_value_gets_them_closed(text, value):
    if value is None:  # closed, and then checked like any other reply
        assert error_of(text).kind == "schema"
        return
    assert parse(text) == Parsed(value, ["unclosed_brackets"])


@pytest.mark.parametrize("text", [
    '{"type": "final", "answer": "4",',  # after a comma: what came next is not known
    '{"type": "final", "answer":',
    '{"type": "final", "answer": "4',  # inside a string
    '{"type": "final", "answer": {',  # after an opening bracket
    '{"type": "final", "answer": "4" "5"',
])
def test_brackets_are_closed_only_after_a_complete_value(text):
    assert error_of(text).kind == "invalid_json"


def test_a_reply_cut_off_by_the_token_limit_is_not_closed_but_truncated():
    assert error_of(CALC[:-1], finish_reason="length").kind == "truncated"
    assert parse(CALC[:-1], finish_reason="stop").repairs == ["unclosed_brackets"]


@pytest.mark.parametrize("text, value", [
    # the object is closed first where the reply closes the array, and the brace left over dropped
    ('[{"type": "tool_call", "tool": "read_file", "arguments": {"path": "a"}]}', [{"type": "tool_call",
                                                                                 "tool": "read_file",
                                                                                 "arguments": {"path": "a"}}]),
    ('[{"type": "tool_call", "tool": "calculator", "arguments": {"expression": "2+2"}]', [CALC_VALUE]),
    ('[{"type": "tool_call", "tool": "calculator", "arguments": {"expression": "2+2"]}} \n}] ', [CALC_VALUE]),
])
def test_closers_that_skip_an_open_bracket_at_the_end_of_a_reply_are_mended(text, value):
    assert parse(text) == Parsed(value, ["mismatched_brackets"])


@pytest.mark.parametrize("text", [
    # a miscount before more of the value: where the model meant each bracket to close is not known
    '{"type": "tool_call", "tool": "calculator", "arguments": {"expression": "2+2"], "x": 1}',
    '{"type": "final", "answer": "4"] and then some prose',
    '{"type": "final", "answer": "4"}}]',  # nothing to mend: the action is whole, the rest is prose
])
def test_a_miscount_is_mended_only_at_the_end_of_the_reply(text):
    if text.endswith("}}]"):
        assert parse(text) == Parsed({"type": "final", "answer": "4"}, [])
        return
    assert error_of(text).kind == "invalid_json"


@pytest.mark.parametrize("text", [None, "", "   \n\t"])
def test_empty_reply(text):
    error = error_of(text)
    assert (error.kind, error.message) == ("no_json", "the reply was empty")


@pytest.mark.parametrize("text", ["The answer is 4. [citation needed]", "As shown in [1] and [2, 3]."])
def test_prose_without_json(text):
    error = error_of(text)
    assert (error.kind, error.message) == ("no_json", "no JSON object found in the reply")


def test_a_bare_array_is_validated_when_it_is_the_whole_reply():
    assert error_of("[1, 2]").message == "$[0] must be a tool_call object, got a number"


@pytest.mark.parametrize("text, kind", [("42", "a number"), ('"four"', "a string"), ("true", "a boolean"),
                                        ("null", "null"), ("```json\n4.5\n```", "a number")])
def test_a_scalar_reply_must_be_an_object(text, kind):
    error = error_of(text)
    assert (error.kind, error.message) == ("schema", f"the reply must be a JSON object, got {kind}")


def test_non_ascii_content_is_kept():
    text = '<think>Größe?</think>Voilà : {"type": "final", "answer": "Größe: 5 m² — 東京 🚀"}'
    assert parse(text).value["answer"] == "Größe: 5 m² — 東京 🚀"
    error = error_of('{"type": "final", "answer": "東京" 🚀}')
    assert error.kind == "invalid_json" and "東京" in error.message


# --- repairs ------------------------------------------------------------------------------

@pytest.mark.parametrize("text, repair", [
    ("{'type': 'final', 'answer': '4'}", "single_quotes"),
    ('{"type": "final", "answer": "4",}', "trailing_commas"),
    ('[{"type": "tool_call", "tool": "read_file", "arguments": {"path": "a"}}, ]', "trailing_commas"),
    ('{"type": "final", "answer": "line 1\nline 2\tend"}', "control_characters"),
])
def test_each_repair_alone_is_applied_and_recorded(text, repair):
    assert parse(text).repairs == [repair]


FLAGS = action_schema({"flags": {"type": "object", "properties": {
    "a": {"type": "boolean"}, "b": {"type": "boolean"}, "c": {"type": "null"}, "d": {"type": "array"}}}})


def test_python_literals_become_json_literals_and_are_recorded():
    parsed = parse_action('{"type": "tool_call", "tool": "flags", "arguments": {"a": True, "b": False, "c": None}}',
                          FLAGS)
    assert parsed.value["arguments"] == {"a": True, "b": False, "c": None}
    assert parsed.repairs == ["python_literals"]


def test_all_repairs_together():
    parsed = parse_action("{'type': 'tool_call', 'tool': 'flags', 'arguments': {'a': True, 'd': [1.5e-3, None,],},}",
                          FLAGS)
    assert parsed.value["arguments"] == {"a": True, "d": [0.0015, None]}
    assert parsed.repairs == ["python_literals", "single_quotes", "trailing_commas"]


def test_single_quotes_with_escaped_quotes_and_embedded_double_quotes():
    parsed = parse(r"""{'type': 'final', 'answer': 'it\'s "quoted", a \\ and \n'}""")
    assert parsed.value["answer"] == 'it\'s "quoted", a \\ and \n'
    assert parsed.repairs == ["single_quotes"]


def test_repairs_do_not_touch_string_contents():
    answer = "True, it's None of False's business,] and 'so' on,}"
    parsed = parse(json.dumps({"type": "final", "answer": answer}))
    assert parsed == Parsed({"type": "final", "answer": answer}, [])
    repaired = parse("{'type': 'final', 'answer': " + json.dumps(answer) + ",}")
    assert repaired.value["answer"] == answer
    assert repaired.repairs == ["single_quotes", "trailing_commas"]
    assert parse("{'type': 'final', 'answer': 'True, None,] \"ok\"'}").value["answer"] == 'True, None,] "ok"'


def test_words_that_merely_start_like_literals_are_not_replaced():
    assert error_of('{"type": "final", "answer": Trueish}').kind == "invalid_json"


def test_a_repair_that_does_not_produce_valid_json_reports_the_original_error():
    error = error_of("{'type': 'final', 'answer': '4' 'x'}")
    assert error.kind == "invalid_json"
    assert "Expecting property name enclosed in double quotes at line 1 column 2" in error.message


@pytest.mark.parametrize("text, answer, repairs", [
    ('{"type": "final", "answer": "The title is "Dune"."}', 'The title is "Dune".', ["unescaped_quotes"]),
    ('  {"type":"final","answer":"say "hi"\nthen "bye""}\n', 'say "hi"\nthen "bye"',
     ["control_characters", "unescaped_quotes"]),
    ('<think>quotes</think>{"type": "final", "answer": "a "b" c \\"d\\""}', 'a "b" c "d"', ["unescaped_quotes"]),
    ('{"type": "final", "answer": "A man, a plan, a canal: Panama" is a palindrome."}',  # a quotation first
     'A man, a plan, a canal: Panama" is a palindrome.', ["unescaped_quotes"]),
    ('{"type": "final", "answer": "It is called "Dune"}', 'It is called "Dune', ["unescaped_quotes"]),  # last
])
def test_a_final_answer_with_unescaped_quotes_is_read_whole(text, answer, repairs):
    parsed = parse(text)
    assert parsed.value == {"type": "final", "answer": answer}
    assert parsed.repairs == repairs


@pytest.mark.parametrize("text", [
    '{"type": "final", "answer": "a "b" c"} and more',  # prose after it: not the whole reply
    '{"type": "final", "answer": "a "b" {"type": "tool_call", "x"}"}',  # an action inside it
    '{"type": "final", "answer": "4" "x"}',  # two strings, not a quotation
    '{"type": "final", "answer": "4", "answer": "x"}',  # a key
    '{"type": "final", "answer": "a"b"}',  # inside a word
    '{"type": "final", "answer": "one "two" "three"}',  # two openings in a row
    '{"type": "final", "answer": "ends in a backslash \\"}',
    '{"type": "final", "answer": "bad \\q escape "x""}',
    '{"type": "tool_call", "tool": "calculator", "arguments": {"expression": "2"+"2"}}',
])
def test_only_a_lone_final_answer_gets_its_quotes_repaired(text):
    assert error_of(text).kind == "invalid_json"


# --- duplicate keys and multiple actions --------------------------------------------------

def test_duplicate_keys_are_an_error():
    error = error_of('{"type": "tool_call", "tool": "calculator", "tool": "read_file", "arguments": {}}')
    assert (error.kind, error.message) == ("invalid_json", "duplicate key 'tool' in an object")


def test_duplicate_keys_in_nested_arguments_are_an_error():
    error = error_of('{"type": "tool_call", "tool": "read_file", "arguments": {"path": "a", "path": "b"}}')
    assert (error.kind, error.message) == ("invalid_json", "duplicate key 'path' in an object")


@pytest.mark.parametrize("text, count", [
    (f"{FINAL}\n{CALC}", 2),
    (f"```json\n{FINAL}\n```\nor\n```json\n{FINAL}\n```", 2),
    (f"{CALC}\n{FINAL}\n{READ}", 3),
    ("\n".join([CALC] * 9), 9),
])
def test_several_actions_that_are_not_one_batch_are_an_error(text, count):
    error = error_of(text)
    assert error.kind == "multiple_actions"
    assert error.message == (f"found {count} JSON actions; send exactly one "
                             "(or a JSON array of tool_call objects to run several calls)")


@pytest.mark.parametrize("text", [
    f"{CALC}\n{READ}",
    f"```json\n{CALC}\n{READ}\n```",
    f"First {CALC}, then\n```json\n[{READ}]\n```",
])
def test_calls_written_one_after_another_are_one_batch(text):
    parsed = parse(text)
    assert [call["tool"] for call in parsed.value] == ["calculator", "read_file"]
    assert parsed.repairs == ["joined_calls"]


def test_a_final_answer_written_after_calls_is_dropped_until_their_results_are_in():
    parsed = parse(f"{CALC}\n{READ}\n{FINAL}")
    assert [call["tool"] for call in parsed.value] == ["calculator", "read_file"]
    assert parsed.repairs == ["joined_calls", "dropped_early_final"]


def test_joined_calls_keep_the_repairs_their_pieces_needed():
    parsed = parse(CALC + "\n" + READ.replace('"notes.txt"', "'notes.txt'"))
    assert parsed.value[1]["arguments"] == {"path": "notes.txt"}
    assert parsed.repairs == ["single_quotes", "joined_calls"]


def test_calls_are_not_joined_where_a_batch_is_not_allowed():
    with pytest.raises(ParseError) as caught:
        parse_action(f"{CALC}\n{READ}", action_schema(TOOLS, batch=False))
    assert caught.value.kind == "multiple_actions"


@pytest.mark.parametrize("expression", ["119.0 * (1 + 0.19)", "3 - 1", "10/4"])
def test_arithmetic_in_the_json_is_answered_with_advice(expression):
    error = error_of('{"type": "tool_call", "tool": "calculator", "arguments": {"expression": ' + expression + "}}")
    assert error.kind == "invalid_json"
    assert error.message.endswith("JSON has no arithmetic: work the value out and write the number itself, "
                                  "not an expression")


def test_other_invalid_json_gets_no_arithmetic_advice():
    assert "arithmetic" not in error_of('{"type": "final", "answer": "4" "x"}').message


def test_an_action_followed_by_a_plain_json_value_is_fine():
    assert parse(f'{CALC}\nThe result should be 4 or {{"approx": 4}} or [4].').value == CALC_VALUE


# --- batches ------------------------------------------------------------------------------

def test_an_array_of_tool_calls():
    parsed = parse(f"```json\n[{CALC}, {READ}]\n```")
    assert [call["tool"] for call in parsed.value] == ["calculator", "read_file"]


@pytest.mark.parametrize("count", [0, 9])
def test_an_array_must_have_one_to_eight_calls(count):
    error = error_of(json.dumps([CALC_VALUE] * count))
    assert (error.kind, error.message) == ("schema", f"a JSON array of tool calls must have 1..8 items, got {count}")


def test_array_items_are_classified_with_their_index():
    error = error_of(f'[{CALC}, {{"type": "tool_call", "tool": "read_file", "arguments": {{"path": 7}}}}]')
    assert (error.kind, error.message) == (
        "bad_arguments", "arguments for read_file: $[1].arguments.path: 7 is not of type 'string'")
    assert error_of(f'[{CALC}, {{"type": "tool_call", "tool": "web", "arguments": {{}}}}]').kind == "unknown_tool"
    error = error_of(f"[{CALC}, {FINAL}]")
    assert error.kind == "schema" and error.message.startswith('$[1].type must be "tool_call"')
    assert error_of(f"[{CALC}, 3]").message == "$[1] must be a tool_call object, got a number"


def test_an_array_is_rejected_when_batches_are_off():
    with pytest.raises(ParseError) as caught:
        parse_action(f"[{CALC}]", action_schema(TOOLS, batch=False))
    error = caught.value
    assert (error.kind, error.message) == ("schema", "the reply must be a JSON object, got an array")


# --- validation errors --------------------------------------------------------------------

@pytest.mark.parametrize("text, kind, message", [
    ('{"tool": "calculator", "arguments": {"expression": "1"}}', "schema", '$.type must be "tool_call" or "final"'),
    ('{"type": "answer", "answer": "4"}', "schema", '$.type must be "tool_call" or "final"'),
    ('{"type": "final", "answer": 42}', "schema", "$.answer: 42 is not of type 'string'"),
    ('{"type": "final"}', "schema", "$: 'answer' is a required property"),
    ('{"type": "final", "answer": "4", "tool": "calculator"}', "schema",
     "$: additional property 'tool' is not allowed (allowed: type, answer)"),
    ('{"type": "tool_call", "tool": "websearch", "arguments": {"q": "x"}}', "unknown_tool",
     "unknown tool 'websearch'; available tools: calculator, read_file, current_time"),
    ('{"type": "tool_call", "arguments": {}}', "schema",
     "$.tool must be the name of a tool; available tools: calculator, read_file, current_time"),
    ('{"type": "tool_call", "tool": "calculator", "arguments": {"expression": 5}}', "bad_arguments",
     "arguments for calculator: $.arguments.expression: 5 is not of type 'string'"),
    ('{"type": "tool_call", "tool": "calculator", "arguments": {}}', "bad_arguments",
     "arguments for calculator: $.arguments: 'expression' is a required property"),
    ('{"type": "tool_call", "tool": "current_time", "arguments": {"tz": "UTC"}}', "bad_arguments",
     "arguments for current_time: $.arguments: additional property 'tz' is not allowed (allowed: timezone)"),
    ('{"type": "tool_call", "tool": "calculator", "arguments": "2+2"}', "bad_arguments",
     "arguments for calculator: $.arguments: \"2+2\" is not of type 'object'"),
    ('{"type": "tool_call", "tool": "calculator"}', "schema", "$: 'arguments' is a required property"),
    ('{"type": "tool_call", "tool": "calculator", "arguments": {"expression": "1"}, "why": "x"}', "schema",
     "$: additional property 'why' is not allowed (allowed: type, tool, arguments)"),
])
def test_validation_errors_are_classified_with_the_json_path(text, kind, message):
    error = error_of(text)
    assert (error.kind, error.message) == (kind, message)


def test_long_values_in_messages_are_shortened():
    error = error_of(json.dumps({"type": "final", "answer": {"text": "x" * 500}}))
    assert error.message.startswith('$.answer: {"text": "xxx')
    assert error.message.endswith("… is not of type 'string'")
    assert len(error.message) < 120


# --- truncation and pathological input ----------------------------------------------------

TRUNCATED = ("your reply was cut off (it hit the token limit) before the JSON was complete; "
             "reply with a shorter JSON action")


@pytest.mark.parametrize("text", [CALC[:40], "<think>still thinking", "Let me", '{"type": "final", "answer": 4}'])
def test_a_failure_at_the_token_limit_is_truncated(text):
    error = error_of(text, finish_reason="length")
    assert (error.kind, error.message) == ("truncated", TRUNCATED)


def test_a_complete_reply_at_the_token_limit_is_accepted():
    assert parse(CALC, finish_reason="length").value == CALC_VALUE


def test_other_finish_reasons_keep_the_real_error():
    assert error_of(CALC[:40], finish_reason="stop").kind == "invalid_json"


@pytest.mark.parametrize("text", ["[" * 100_000, "{" * 20_000, '{"type": "final", "answer": ' + "[" * 100_000,
                                  '{"a":' * 50_000], ids=["[", "{", "answer [", '{"a":'])
def test_huge_nesting_is_invalid_json_not_a_crash(text):
    error = error_of(text)
    assert error.kind == "invalid_json"


def test_deep_but_decodable_nesting_is_a_schema_error():
    error = error_of('{"type": "final", "answer": ' + "[" * 300 + "]" * 300 + "}")
    assert error.kind == "schema" and error.message.startswith("$.answer: [[[")


@pytest.mark.parametrize("text", ["{'x' [True, " * 2000 + CALC, "d = {'a': f(x), " * 2000 + CALC])
def test_a_long_reply_full_of_repairable_looking_brackets_still_finds_the_action(text):
    assert parse(text).value == CALC_VALUE


# --- hostile replies: every one is a ParseError of a known kind ----------------------------

from agent.parsing import MAX_REPLY_CHARS  # noqa: E402


def test_a_reply_over_the_size_limit_is_too_long_and_says_the_sizes():
    text = "[" + '{"a":1}, ' * 35_000 + '{"a":1}]'
    error = error_of(text)
    assert error.kind == "too_long"
    assert f"{len(text):,} characters" in error.message and f"{MAX_REPLY_CHARS:,}" in error.message
    assert error.message.endswith("send one short JSON action")


def test_a_reply_over_the_size_limit_at_the_token_limit_is_truncated():
    assert error_of("x" * (MAX_REPLY_CHARS + 1), finish_reason="length").kind == "truncated"


def test_a_reply_at_the_size_limit_is_still_read():
    text = CALC + " " * (MAX_REPLY_CHARS - len(CALC))
    assert parse(text).value == CALC_VALUE


def test_a_huge_batch_is_refused_by_its_count():
    count = 25_000
    error = error_of("[" + ", ".join(['{"a":1}'] * count) + "]")
    assert (error.kind, error.message) == ("schema", f"a JSON array of tool calls must have 1..8 items, got {count}")


@pytest.mark.parametrize("text", ["<think>" * 35_000, "<think> " + "lorem ipsum " * 20_000,
                                  "<think></thinking>" * 14_000, "<think><thinking>x</thinking>" * 8_000,
                                  "</think><think>" * 16_000], ids=range(5))
def test_unclosed_think_blocks_of_any_shape_are_all_reasoning(text):
    error = error_of(text + CALC)
    assert error.kind == "no_json"


def test_a_block_closes_at_the_first_closing_tag_of_its_name_however_many_openings():
    assert parse("<think>" * 10_000 + "</think>" + CALC).value == CALC_VALUE
    assert parse("<think>a<thinking>b" * 5_000 + "</think>" + CALC).value == CALC_VALUE


def test_many_broken_objects_report_the_first_one():
    error = error_of("{a" * 100_000)
    assert error.kind == "invalid_json"
    assert error.message.startswith(
        "invalid JSON: Expecting property name enclosed in double quotes at line 1 column 2:")


def test_many_broken_keys_report_the_first_one():
    error = error_of('{"' * 100_000)
    assert error.kind == "invalid_json"
    assert error.message.startswith("invalid JSON: Expecting ':' delimiter at line 1 column 5:")


def test_an_unclosed_fence_with_a_long_tag_is_no_json():
    assert error_of("```" + "a" * 200_000).kind == "no_json"


def test_the_repair_pass_stops_at_its_budget_and_reports_the_broken_value():
    error = error_of("{'x' [True, " * 20_000)
    assert error.kind == "invalid_json"
    assert "at line 1 column 2:" in error.message


HUGE = "1" * 5000


@pytest.mark.parametrize("text", [
    '{"type": "final", "answer": ' + HUGE + "}",
    '{"type": "tool_call", "tool": "calculator", "arguments": {"expression": "1", "n": [' + HUGE + "]}}",
    "{'type': 'final', 'answer': " + HUGE + "}",
    HUGE,
    "```json\n" + HUGE + "\n```",
    f"Here [{HUGE}] is a number, and {CALC}",
], ids=range(6))
def test_an_integer_too_long_for_python_is_invalid_json(text):
    error = error_of(text)
    assert error.kind == "invalid_json"
    assert error.message.startswith("a number in the JSON has too many digits")


@pytest.mark.parametrize("text", ['{"type": "final", "answer": ' + "[" * 900 + "]" * 900 + "}",
                                  "[" * 900 + "]" * 900, "```json\n" + "[" * 900 + "]" * 900 + "\n```",
                                  "[" * 100_000, '{"type": "final", "answer": ' + "{\"a\": " * 900 + "1" + "}" * 901],
                         ids=range(5))
def test_nesting_beyond_the_limit_is_invalid_json_with_a_clear_message(text):
    error = error_of(text)
    assert (error.kind, error.message) == ("invalid_json", "the JSON is nested too deeply (more than 500 levels)")


def test_lone_surrogates_are_replaced_in_answers_keys_and_arguments():
    assert parse('{"type": "final", "answer": "a\\ud800b\\udfff"}').value["answer"] == "a\ufffdb\ufffd"
    flags = parse_action('{"type": "tool_call", "tool": "flags", "arguments": {"d": ["\\udc00"]}}', FLAGS)
    assert flags.value["arguments"] == {"d": ["\ufffd"]}
    json.dumps(flags.value, ensure_ascii=False).encode()  # encodable: no lone surrogate left
    assert parse('{"type": "final", "answer": "\\ud83d\\ude80"}').value["answer"] == "🚀"  # a pair is kept


@pytest.mark.parametrize("tool", [[1], {"a": 1}, None, 3])
def test_a_tool_name_that_is_not_a_string_is_a_schema_error(tool):
    reply = json.dumps({"type": "tool_call", "tool": tool, "arguments": {}})
    with pytest.raises(ParseError) as caught:
        parse_action(reply, SCHEMA)
    assert caught.value.kind == "schema" and "must be the name of a tool" in caught.value.message


@pytest.mark.parametrize("answer", ["<THINK>", "a <think> b </think> c", "</thinking> then", "<think>"])
def test_a_reasoning_tag_inside_an_answer_is_text_not_reasoning(answer):
    """Found by hypothesis (tests/test_streaming.py): the tag was cut out of the JSON string, breaking it."""
    value = {"type": "final", "answer": answer}
    assert parse_action(json.dumps(value), SCHEMA).value == value
    assert parse_action(f'<think>{answer}</think>{FINAL}', SCHEMA).value == json.loads(FINAL)  # a block before it
