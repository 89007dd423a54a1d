"""Native tool calling end to end: the request carries tools, the reply's tool_calls are run."""
import json

import pytest

from agent.cli import main


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("Budget: 4,250 EUR\n")
    return tmp_path


def run(server, task, capsys, *args):
    code = main(["--base-url", server.url, "--model", "m", "--protocol", "native", "--timeout", "5", *args, task])
    out, err = capsys.readouterr()
    return code, out, err


def tool_messages(request) -> list[dict]:
    return [m for m in request["body"]["messages"] if m["role"] == "tool"]


def test_request_carries_the_registry_as_tools(server, workspace, capsys):
    server.reply("Paris.")
    code, out, _ = run(server, "Capital of France?", capsys)
    body = server.requests[0]["body"]
    assert (code, out) == (0, "Paris.\n")
    assert [t["function"]["name"] for t in body["tools"]] == \
        ["calculator", "read_file", "write_file", "list_dir", "current_time", "run_shell", "todo_write"]
    assert body["tools"][0]["function"]["parameters"]["required"] == ["expression"]
    assert "JSON" not in body["messages"][0]["content"]  # no prompt protocol in native mode


def test_several_calls_in_one_reply_are_answered_in_order_with_their_ids(server, workspace, capsys):
    server.reply(tool_calls=[
        {"id": "call_calc", "name": "calculator", "arguments": {"expression": "128*96 + 45**2 - 88/2"}},
        {"id": "call_read", "name": "read_file", "arguments": {"path": "notes.txt"}},
    ])
    server.reply("14269, and the budget is 4,250 EUR.")
    code, out, err = run(server, "Compute 128*96 + 45**2 - 88/2 and read the budget", capsys)
    second = server.requests[1]["body"]["messages"]
    assert code == 0 and "final · 1 step · 2 model calls" in err
    assert [c["id"] for c in second[2]["tool_calls"]] == ["call_calc", "call_read"]
    assert [(m["tool_call_id"], m["content"]) for m in second[3:]] == \
        [("call_calc", "14269.0"), ("call_read", "Budget: 4,250 EUR\n")]


def test_malformed_argument_json_is_answered_for_that_call_only(server, workspace, capsys):
    server.reply(tool_calls=[
        {"id": "call_bad", "name": "calculator", "arguments": '{"expression": "2+2"'},
        {"id": "call_ok", "name": "calculator", "arguments": {"expression": "3+3"}},
    ])
    server.reply("6")
    code, _, _ = run(server, "sums", capsys, "--json")
    results = tool_messages(server.requests[1])
    assert code == 0
    assert results[0]["tool_call_id"] == "call_bad" and results[0]["content"].startswith("error: the arguments")
    assert (results[1]["tool_call_id"], results[1]["content"]) == ("call_ok", "6")


def test_arguments_that_fail_the_schema_are_reasked(server, workspace, capsys):
    server.reply(tool_calls=[{"id": "call_1", "name": "calculator", "arguments": {"expr": "2+2"}}])
    server.reply(tool_calls=[{"id": "call_2", "name": "calculator", "arguments": {"expression": "2+2"}}])
    server.reply("4")
    code, out, _ = run(server, "2+2", capsys, "--json")
    result = json.loads(out)
    reask = tool_messages(server.requests[1])
    assert code == 0 and (result["reasks"], result["errors"], result["steps"]) == (1, {"bad_arguments": 1}, 1)
    assert reask[0]["tool_call_id"] == "call_1" and "expression" in reask[0]["content"]
    assert [m["tool_call_id"] for m in tool_messages(server.requests[2])] == ["call_2"]  # the failed try is gone


def test_unknown_tool_name_lists_the_tools(server, workspace, capsys):
    server.reply(tool_calls=[{"id": "call_w", "name": "web_search", "arguments": {"q": "weather"}}])
    server.reply("I cannot look that up.")
    code, out, _ = run(server, "Weather in Paris?", capsys)
    message = tool_messages(server.requests[1])[0]
    assert (code, out) == (0, "I cannot look that up.\n")
    assert message["tool_call_id"] == "call_w"
    assert "unknown tool 'web_search'" in message["content"] and "calculator" in message["content"]


def test_every_call_of_every_step_is_paired_with_its_result(server, workspace, capsys):
    server.reply(tool_calls=[{"id": "a1", "name": "list_dir", "arguments": {}}])
    server.reply(tool_calls=[{"id": "b1", "name": "read_file", "arguments": {"path": "notes.txt"}},
                             {"id": "b2", "name": "current_time", "arguments": {}}])
    server.reply("done")
    assert run(server, "look around", capsys)[0] == 0
    messages = server.requests[2]["body"]["messages"]
    asked = [c["id"] for m in messages if m["role"] == "assistant" for c in m.get("tool_calls", [])]
    answered = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    assert asked == answered == ["a1", "b1", "b2"]


# --- hostile replies, at the protocol and through the loop ---------------------------------

from agent import Agent, Reply, ScriptedModel  # noqa: E402
from agent.models import tool_call  # noqa: E402
from agent.protocols import Final, NativeProtocol, Reask, Step  # noqa: E402
from agent.tools import Registry  # noqa: E402
from agent.tools import tool as make_tool  # noqa: E402

NATIVE = NativeProtocol(Registry([make_tool(lambda **kw: json.dumps(kw, sort_keys=True), name="echo",
                                            description="Echo.", parameters={"type": "object"})]))


def calls_of(*tool_calls) -> Reply:
    return Reply(tool_calls=list(tool_calls), finish_reason="tool_calls")


def test_more_calls_than_a_batch_are_reasked_and_none_runs():
    ran = []
    registry = Registry([make_tool(lambda: ran.append(1), name="tick", description="Tick.",
                                   parameters={"type": "object"})])
    model = ScriptedModel([calls_of(*[tool_call(f"c{i}", "tick", "{}") for i in range(5000)]), Reply(content="ok")])
    result = Agent(model, registry, NativeProtocol(registry)).run("tick")
    assert (result.status, result.answer, result.errors, ran) == ("final", "ok", {"too_many_calls": 1}, [])
    reask = model.calls[1]["messages"][-1]
    assert reask["role"] == "user" and "5000 tool calls" in reask["content"] and "at most 8" in reask["content"]


def test_eight_calls_are_run():
    turn = NATIVE.parse(calls_of(*[tool_call(f"c{i}", "echo", {"i": i}) for i in range(8)]))
    assert isinstance(turn, Step) and [c.arguments for c in turn.calls] == [{"i": i} for i in range(8)]


@pytest.mark.parametrize("arguments", [None, "", "  "])
def test_missing_empty_or_null_arguments_mean_an_empty_object(arguments):
    item = {"id": "c1", "type": "function", "function": {"name": "echo", "arguments": arguments}}
    for call in (item, {"id": "c1", "type": "function", "function": {"name": "echo"}}):
        turn = NATIVE.parse(calls_of(call))
        assert isinstance(turn, Step) and turn.calls[0].arguments == {} and turn.calls[0].error is None
        assert turn.message["tool_calls"][0]["function"] == {"name": "echo", "arguments": "{}"}


def test_null_arguments_run_through_the_loop():
    registry = NATIVE.registry
    model = ScriptedModel([calls_of({"id": "c1", "type": "function", "function": {"name": "echo", "arguments": None}}),
                           Reply(content="done")])
    result = Agent(model, registry, NativeProtocol(registry)).run("echo")
    assert result.tool_calls == [{"tool": "echo", "arguments": {}, "ok": True}]
    assert model.calls[1]["messages"][-1] == {"role": "tool", "tool_call_id": "c1", "content": "{}"}


@pytest.mark.parametrize("item", [
    {"id": "c1"}, {"id": "c1", "function": None}, {"id": "c1", "function": "echo"}, {"id": "c1", "function": {}},
    {"id": "c1", "function": {"name": 7, "arguments": "{}"}}, {"id": "c1", "function": {"name": None}},
    "echo", None, {"id": "c1", "function": {"name": "echo", "arguments": 7}},
    {"id": "c1", "function": {"name": "echo", "arguments": "[1]"}},
], ids=range(10))
def test_a_tool_call_of_odd_shape_is_answered_with_an_error(item):
    turn = NATIVE.parse(calls_of(item))
    assert isinstance(turn, Reask) and turn.kind in ("schema", "bad_arguments")
    (tool_message,) = [m for m in turn.messages if m["role"] == "tool"]
    assert tool_message["content"].startswith("error: ")
    assert "echo" in tool_message["content"]  # names the tool, or lists the tools there are
    (sent,) = turn.messages[0]["tool_calls"]  # what goes back to the API is well-formed
    assert sent["id"] == tool_message["tool_call_id"] and sent["type"] == "function"
    assert isinstance(sent["function"]["name"], str) and isinstance(sent["function"]["arguments"], str)


@pytest.mark.parametrize("arguments, message", [
    ('{"n": ' + "1" * 5000 + "}", "a number in the JSON has too many digits"),
    ('{"n": ' + "[" * 100_000 + "}", "the JSON is nested too deeply"),
    ('{"n": ' + "[" * 900 + "]" * 900 + "}", "the JSON is nested too deeply (more than 500 levels)"),
    ('{"n": 1, "n": 2}', "duplicate key 'n' in an object"),
], ids=["huge int", "deep", "deep but decodable", "duplicate key"])
def test_arguments_that_python_cannot_decode_are_invalid_json(arguments, message):
    turn = NATIVE.parse(calls_of(tool_call("c1", "echo", arguments)))
    assert isinstance(turn, Reask) and turn.kind == "invalid_json"
    assert message in turn.problem and turn.problem.startswith("the arguments of echo are not valid JSON")


def test_lone_surrogates_are_replaced_in_arguments_and_answers():
    turn = NATIVE.parse(calls_of(tool_call("c1", "echo", '{"\\ud800k": "a\\udfffb"}')))
    assert turn.calls[0].arguments == {"\ufffdk": "a\ufffdb"}
    json.dumps(turn.message, ensure_ascii=False).encode()  # the history stays encodable
    final = NATIVE.parse(Reply(content="half a pair: \ud800"))
    assert isinstance(final, Final) and final.answer == "half a pair: \ufffd"
