"""`agent --output-schema FILE`: the answer is JSON valid against the schema, in both protocols; a reply whose
answer does not fit is re-asked with the precise error, and the run fails clearly once the re-asks are spent."""
import json

import jsonschema
import pytest

from agent.cli import main
from agent.protocols import PromptProtocol
from agent.tools import Registry
from agent.tools.calculator import calculator

CITY = {"type": "object", "properties": {"city": {"type": "string"}, "population": {"type": "integer"}},
        "required": ["city", "population"], "additionalProperties": False}
ANSWER = {"city": "Lyon", "population": 522250}


@pytest.fixture
def schema(workspace):
    path = workspace / "city.json"
    path.write_text(json.dumps(CITY))
    return str(path)


def run(server, capsys, *args):
    try:
        code = main(["--base-url", server.url, "--model", "m", "--timeout", "5", *args])
    except SystemExit as exit:  # a usage error, as argparse ends it
        code = exit.code
    out, err = capsys.readouterr()
    return code, out, err


def final(answer) -> str:
    return json.dumps({"type": "final", "answer": answer})


def call(**arguments) -> str:
    return json.dumps({"type": "tool_call", "tool": "calculator", "arguments": arguments})


def test_prompt_protocol_calls_a_tool_then_answers_json_valid_against_the_schema(server, schema, capsys):
    server.replies(call(expression="2 * 261125"), final("Lyon has 522,250 people"), final(ANSWER))
    code, out, err = run(server, capsys, "--output-schema", schema, "Population of Lyon, as JSON?")
    assert code == 0
    jsonschema.validate(json.loads(out), CITY)
    assert json.loads(out) == ANSWER and out == json.dumps(ANSWER) + "\n"  # stdout holds only the JSON
    assert "calculator(expression=2 * 261125) → 522250" in err
    assert "re-ask (schema): $.answer: \"Lyon has 522,250 people\" is not of type 'object'" in err
    system = server.requests[0]["body"]["messages"][0]["content"]
    assert system.endswith('When the task is done, reply with {"type": "final", "answer": <that JSON value>}.\n')
    assert json.dumps(CITY) in system
    reask = server.requests[2]["body"]["messages"][-1]["content"]
    assert reask.startswith("Your last reply could not be used (schema): $.answer: \"Lyon has 522,250 people\" is "
                            "not of type 'object' (the answer must be a JSON value valid against the answer schema)")
    assert "valid against the answer schema, not a text" in reask


def test_the_prompt_without_a_schema_is_the_same_as_before():
    """Another session measures the prompt: the option leaves it alone when it is not given."""
    registry = Registry([calculator])
    plain = PromptProtocol(registry).system_prompt()
    with_schema = PromptProtocol(registry, output_schema=CITY).system_prompt()
    assert with_schema.startswith(plain) and "Answer schema" not in plain and "Answer schema" in with_schema


def test_an_answer_that_never_fits_ends_the_run_with_the_last_error(server, schema, capsys):
    server.replies(final({"city": "Lyon"}), final({"city": "Lyon", "population": "many"}), final("Lyon"))
    code, out, err = run(server, capsys, "--output-schema", schema, "--max-reasks", "2", "Population of Lyon?")
    assert (code, out) == (4, "")
    assert "re-ask (schema): $.answer: 'population' is a required property" in err
    assert "re-ask (schema): $.answer.population: \"many\" is not of type 'integer'" in err
    assert ("agent: format_errors: 3 unusable replies in a row; the last one: schema: $.answer: \"Lyon\" is not of "
            "type 'object'") in err


def test_native_protocol_checks_the_answers_json_and_re_asks_it(server, schema, capsys):
    server.reply(tool_calls=[{"name": "calculator", "arguments": {"expression": "2 * 261125"}}])
    server.reply("Lyon has 522,250 people.")
    server.reply("```json\n" + json.dumps(ANSWER) + "\n```")
    code, out, err = run(server, capsys, "--protocol", "native", "--output-schema", schema, "Population of Lyon?")
    assert (code, json.loads(out)) == (0, ANSWER)
    assert "re-ask (invalid_json): invalid JSON: Expecting value at line 1 column 1" in err
    body = server.requests[0]["body"]
    assert "response_format" not in body and body["tools"]  # checked here, not sent: see NativeProtocol
    assert "a JSON value valid against this JSON Schema, and nothing else:\n" + json.dumps(CITY) in \
        body["messages"][0]["content"]
    assert server.requests[2]["body"]["messages"][-1]["content"].startswith(
        "Your last reply could not be used (invalid_json): invalid JSON")


def test_native_answer_against_the_schema_is_re_asked_with_the_path(server, schema, capsys):
    server.replies('{"city": "Lyon", "population": 5.5}', json.dumps(ANSWER))
    code, out, err = run(server, capsys, "--protocol", "native", "--output-schema", schema, "Population of Lyon?")
    assert (code, json.loads(out)) == (0, ANSWER)
    assert "re-ask (schema): $.population: 5.5 is not of type 'integer'" in err


def test_with_constrained_replies_the_answer_schema_is_in_the_grammars_schema(server, schema, capsys):
    server.reply(final(ANSWER))
    code, out, _ = run(server, capsys, "--constrain", "--output-schema", schema, "Population of Lyon?")
    assert (code, json.loads(out)) == (0, ANSWER)
    constraint = server.requests[0]["body"]["response_format"]["json_schema"]["schema"]
    final_branch = next(b for b in constraint["anyOf"] if b["properties"]["type"].get("const") == "final")
    assert final_branch["properties"]["answer"] == CITY


def test_a_schema_with_refs_is_inlined_and_json_output_carries_the_answer_text(server, workspace, capsys):
    path = workspace / "cities.json"
    path.write_text(json.dumps({"$defs": {"City": CITY}, "type": "array", "items": {"$ref": "#/$defs/City"}}))
    server.replies(final([ANSWER]))
    code, out, _ = run(server, capsys, "--output-schema", str(path), "--json", "Cities?")
    assert code == 0 and json.loads(json.loads(out)["answer"]) == [ANSWER]
    assert "$ref" not in server.requests[0]["body"]["messages"][0]["content"]


def test_a_spawned_helper_answers_in_text_while_the_run_answers_json(server, schema, capsys):
    server.replies(json.dumps({"type": "tool_call", "tool": "spawn_agent", "arguments": {"task": "Find Lyon's size"}}),
                   final("about half a million"), final(ANSWER))
    code, out, _ = run(server, capsys, "--tools", "spawn_agent,calculator", "--output-schema", schema, "Lyon?")
    assert (code, json.loads(out)) == (0, ANSWER)
    helper_system = server.requests[1]["body"]["messages"][0]["content"]
    assert "Answer schema" not in helper_system


@pytest.mark.parametrize("content, says", [
    (None, "cannot read"),
    ("[1", "is not JSON: Expecting ',' delimiter"),
    ("[]", "must hold a JSON Schema object"),
    ('{"type": "objekt"}', "is not a valid JSON Schema: ['type']: 'objekt' is not valid"),
    ('{"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}, "$defs": {"A": {"$ref": "#/$defs/A"}}}',
     "is recursive"),
    ('{"type": "object", "properties": {"a": {"$ref": "https://example.com/s.json"}}}', "only local references"),
    ("{" + '"properties": {"x": {' * 100 + "}" * 201, "nested more than 64 levels deep"),
    ('{"description": "' + "d" * 1_100_000 + '"}', "over 1,000,000 bytes"),
    (b"\xff\xfe", "is not JSON: not UTF-8 text"),
])
def test_a_bad_schema_file_is_one_line_and_exit_2(server, workspace, capsys, content, says):
    path = workspace / "schema.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    code, out, err = run(server, capsys, "--output-schema", str(path), "hi")
    assert (code, out) == (2, "")
    assert err.startswith("agent: argument --output-schema: ") and says in err and err.count("\n") == 1
    assert not server.requests
