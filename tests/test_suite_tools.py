"""Suites that bring their own tools: scripted results, the calls_match and no_call checks, pass rates by
category, and the function-calling suite in examples/."""
import json
import runpy
from collections import Counter
from pathlib import Path

import pytest

from agent.config import ConfigError
from agent.cli.eval import eval_command
from agent.evaluation.reports import render_table, summarize, table_rows
from agent.evaluation.runner import run_eval
from agent.models import Reply, ScriptedModel
from agent.protocols import NativeProtocol, PromptProtocol
from agent.evaluation.scripted_tools import same, scripted_registry
from agent.evaluation.suites import check_run, load_suite
from tests.test_evaluation import call, cells, endpoint, final, native_call, record, suite_file

EXAMPLES = Path(__file__).parent.parent / "examples"
BUILTIN_NAMES = {"calculator", "read_file"}

CONVERT = {"type": "function", "function": {
    "name": "convert_length", "description": "Convert a length between units.",
    "parameters": {"type": "object", "required": ["value", "from_unit", "to_unit"], "additionalProperties": False,
                   "properties": {"value": {"type": "number", "description": "The length to convert."},
                                  "from_unit": {"type": "string", "enum": ["m", "km", "mi"]},
                                  "to_unit": {"type": "string", "enum": ["m", "km", "mi"]},
                                  "precision": {"type": "integer", "default": 2}}}}}
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city.",
    "parameters": {"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}}}}
RESULTS = {"convert_length": [{"when": {"value": [5], "from_unit": ["km"]}, "result": "5000 m"},
                              {"when": {"from_unit": ["mi"]}, "result": {"value": 19312.13, "unit": "m"}},
                              {"result": "conversion done"}],
           "get_weather": [{"when": {"city": ["Oslo", "Oslo, Norway"]}, "result": "rain, 8 °C"}]}


def line(**fields) -> dict:
    base = {"id": "t1", "category": "single", "task": "Convert 5 km to meters.", "tools": [CONVERT, WEATHER],
            "results": RESULTS, "checks": {"calls_match": [
                {"tool": "convert_length", "arguments": {"value": [5], "from_unit": ["km"], "to_unit": ["m"]},
                 "optional": ["precision"]}]}}
    return {**base, **fields}


def expect(tool: str, optional=(), **arguments) -> dict:
    return {"tool": tool, "arguments": arguments, **({"optional": list(optional)} if optional else {})}


def made(*calls) -> list[dict]:
    return [{"tool": tool, "arguments": arguments, "ok": True} for tool, arguments in calls]


def calls_match(expected: list[dict], calls: list[dict]) -> dict:
    [result] = check_run({"calls_match": expected}, "", calls, Path("."))
    return result


# --- loading lines with tools -----------------------------------------------------------------------

def test_a_line_with_tools_keeps_them_and_their_results(tmp_path):
    [task] = load_suite(suite_file(tmp_path, line()), BUILTIN_NAMES)
    assert [t["function"]["name"] for t in task.tools] == ["convert_length", "get_weather"]
    assert task.results == RESULTS and task.category == "single"
    assert task.checks["calls_match"][0]["tool"] == "convert_length"


def bad_tool(**function) -> dict:
    return {"type": "function", "function": {"name": "f", "description": "d", **function}}


@pytest.mark.parametrize("fields, problem", [
    ({"tools": [bad_tool(name="has space")]}, "tools/0/function/name: 'has space' does not match"),
    ({"tools": [bad_tool(description="")]}, "tools/0/function/description"),
    ({"tools": [{"type": "function", "function": {"name": "f"}}]}, "'description' is a required property"),
    ({"tools": [bad_tool(parameters={"type": "array"})]}, "tools/0/function/parameters/type: 'object' was expected"),
    ({"tools": [bad_tool(parameters={"type": "object", "properties": {"x": {"type": "strng"}}})]},
     "tools: tool 'f' has an invalid parameters schema"),
    ({"tools": [bad_tool(), bad_tool()], "results": {}}, "tools: a tool named 'f' is already registered"),
    ({"tools": [bad_tool(paramters={})]}, "'paramters' was unexpected"),
    ({"results": {"get_wether": [{"result": "x"}]}}, "results: no tool 'get_wether' in tools"),
    ({"results": {"get_weather": []}}, "results/get_weather: [] should be non-empty"),
    ({"results": {"get_weather": [{"when": {"town": ["Oslo"]}, "result": "x"}]}},
     "results/get_weather/0/when: no parameter 'town'; parameters: city"),
    ({"results": {"convert_length": [{"when": {"from_unit": ["yards"]}, "result": "x"}]}},
     "results/convert_length/0/when/from_unit: the acceptable value \"yards\" does not fit"),
    ({"results": {"get_weather": [{"when": {"city": "Oslo"}, "result": "x"}]}}, "'Oslo' is not of type 'array'"),
    ({"checks": {"calls_match": [expect("calculator", expression=["1+1"])]}}, "unknown tool calculator; tools: "
                                                                              "convert_length, get_weather"),
    ({"checks": {"tools_called": ["read_file"]}}, "unknown tool read_file"),
    ({"checks": {"calls_match": [expect("get_weather", cty=["Oslo"])]}}, "calls_match/0/arguments: no parameter 'cty'"),
    ({"checks": {"calls_match": [expect("convert_length", value=["5"], from_unit=["km"], to_unit=["m"])]}},
     "calls_match/0/arguments/value: the acceptable value \"5\" does not fit the parameter: '5' is not of type"),
    ({"checks": {"calls_match": [expect("convert_length", value=[5], from_unit=["km"])]}},
     "required parameter to_unit of convert_length is neither in arguments nor optional"),
    ({"checks": {"calls_match": [expect("get_weather", ["units"], city=["Oslo"])]}},
     "calls_match/0/optional: get_weather has no parameter 'units'"),
    ({"checks": {"calls_match": [expect("get_weather", city=[])]}}, "calls_match/0/arguments/city: [] should be"),
    ({"checks": {"calls_match": []}}, "checks/calls_match: [] should be non-empty"),
    ({"checks": {"no_call": False}}, "checks/no_call: True was expected"),
    ({"checks": {"no_call": True, "calls_match": [expect("get_weather", city=["Oslo"])]}},
     "no_call and calls_match contradict each other"),
    ({"tools": None}, "tools: None is not of type 'array'"),
    ({"tools": []}, "tools: [] should be non-empty"),
])
def test_a_bad_line_with_tools_is_reported_with_its_line_number(tmp_path, fields, problem):
    path = suite_file(tmp_path, line(id="fine"), line(**fields))
    with pytest.raises(ConfigError) as caught:
        load_suite(path, BUILTIN_NAMES)
    assert f"{path}, line 2: " in str(caught.value)
    assert problem in str(caught.value)


def test_results_without_tools_are_refused_and_lines_without_tools_use_the_builtins(tmp_path):
    plain = {"id": "calc", "task": "2+2?", "checks": {"calls_match": [expect("calculator", expression=["2+2"])]}}
    [task] = load_suite(suite_file(tmp_path, plain), BUILTIN_NAMES)
    assert task.tools == [] and task.results == {}
    with pytest.raises(ConfigError, match="line 1: results script the line's own tools"):
        load_suite(suite_file(tmp_path, {**plain, "results": {"calculator": [{"result": "4"}]}}), BUILTIN_NAMES)


# --- scripted results ---------------------------------------------------------------------------------

def test_scripted_tools_answer_by_pattern_then_default_then_ok():
    registry = scripted_registry([CONVERT, WEATHER], RESULTS)
    assert registry.names == ["convert_length", "get_weather"]
    assert registry.call("convert_length", {"value": 5.0, "from_unit": "km", "to_unit": "m"}).text == "5000 m"
    assert registry.call("convert_length", {"value": 12, "from_unit": "mi", "to_unit": "m"}).text == (
        '{"value": 19312.13, "unit": "m"}')
    assert registry.call("convert_length", {"value": 7, "from_unit": "km", "to_unit": "m"}).text == "conversion done"
    assert registry.call("get_weather", {"city": " oslo, norway"}).text == "rain, 8 °C"
    assert registry.call("get_weather", {"city": "Bergen"}).text == "ok"  # no pattern fits, no default
    refused = registry.call("convert_length", {"value": 5, "from_unit": "yards", "to_unit": "m"})
    assert not refused.ok and "arguments for convert_length: $.from_unit" in refused.text


def test_a_tool_without_parameters_takes_none():
    registry = scripted_registry([{"type": "function", "function": {"name": "now", "description": "The time."}}],
                                 {"now": [{"result": "12:00"}]})
    assert registry.call("now", {}).text == "12:00"


@pytest.mark.parametrize("expected, actual, equal", [
    (5, 5.0, True), (0.05, 0.050000000000000001, True), (5, 5.5, False), ("km", " KM ", True),
    ("5", 5, False), (True, 1, False), (1, True, False), (False, False, True), (None, None, True),
    (["a", "b"], ["A", "b"], True), (["a", "b"], ["b", "a"], False),
    ({"round": 2, "mode": "up"}, {"mode": "UP", "round": 2.0}, True), ({"round": 2}, {"round": 2, "x": 1}, False),
])
def test_values_compare_by_value_case_and_order(expected, actual, equal):
    assert same(expected, actual) is equal


# --- calls_match and no_call ------------------------------------------------------------------------

KM, MILES = expect("convert_length", value=[5], from_unit=["km"], to_unit=["m"]), \
    expect("convert_length", value=[12], from_unit=["mi"], to_unit=["m"])


def test_calls_match_in_any_order_with_values_normalised():
    calls = made(("convert_length", {"value": 12.0, "from_unit": "MI", "to_unit": "m"}),
                 ("convert_length", {"value": 5, "from_unit": " km", "to_unit": "M"}))
    assert calls_match([KM, MILES], calls) == {"check": "calls_match", "ok": True,
                                               "detail": "2 of 2 expected calls made"}


def test_each_expected_call_needs_its_own_call():
    either = expect("convert_length", value=[5, 12], from_unit=["km", "mi"], to_unit=["m"])
    calls = made(("convert_length", {"value": 5, "from_unit": "km", "to_unit": "m"}))
    assert calls_match([either, KM], calls)["ok"] is False  # one call cannot stand for two
    assert calls_match([either, KM], calls)["detail"].startswith("convert_length: no call left for")
    # a first fit of the general expectation must not take the only call the specific one can use
    calls += made(("convert_length", {"value": 12, "from_unit": "mi", "to_unit": "m"}))
    assert calls_match([either, KM], calls)["ok"]


def test_optional_arguments_may_be_absent_but_must_fit_when_given():
    rounded = expect("convert_length", ["precision"], value=[5], from_unit=["km"], to_unit=["m"], precision=[0, 1])
    plain = {"value": 5, "from_unit": "km", "to_unit": "m"}
    assert calls_match([rounded], made(("convert_length", plain)))["ok"]
    assert calls_match([rounded], made(("convert_length", {**plain, "precision": 1})))["ok"]
    wrong = calls_match([rounded], made(("convert_length", {**plain, "precision": 3})))
    assert wrong["detail"] == "convert_length: precision=3, expected one of [0, 1]"
    any_value = expect("convert_length", ["precision"], value=[5], from_unit=["km"], to_unit=["m"])
    assert calls_match([any_value], made(("convert_length", {**plain, "precision": 3})))["ok"]


def test_missing_wrong_and_unexpected_arguments_are_named():
    calls = made(("convert_length", {"value": 5, "to_unit": "km", "precision": 2}))
    result = calls_match([KM], calls)
    assert not result["ok"]
    assert result["detail"] == ('convert_length: from_unit missing, to_unit="km", expected one of ["m"], '
                                'unexpected argument precision')


def test_extra_calls_pass_only_as_identical_repeats():
    right = ("convert_length", {"value": 5, "from_unit": "km", "to_unit": "m"})
    assert calls_match([KM], made(right, ("convert_length", {"to_unit": "M", "from_unit": "km", "value": 5.0})))["ok"]
    other = calls_match([KM], made(right, ("convert_length", {"value": 6, "from_unit": "km", "to_unit": "m"})))
    assert other["detail"] == 'unexpected call convert_length({"value": 6, "from_unit": "km", "to_unit": "m"})'
    weather = calls_match([KM], made(("get_weather", {"city": "Oslo"}), right))
    assert weather["detail"] == 'unexpected call get_weather({"city": "Oslo"})'


def test_a_call_not_made_is_named():
    assert calls_match([KM, expect("get_weather", city=["Oslo"])], made())["detail"] == (
        "convert_length not called; get_weather not called")


def test_no_call():
    [passed] = check_run({"no_call": True}, "No tool can do that.", [], Path("."))
    [failed] = check_run({"no_call": True}, "", made(("get_weather", {"city": "x"}), ("get_weather", {})), Path("."))
    assert (passed["ok"], passed["detail"]) == (True, "no call made")
    assert (failed["ok"], failed["detail"]) == (False, "called: get_weather")


# --- running tasks with their own tools ------------------------------------------------------------

def test_a_run_sees_only_the_tasks_tools_and_their_scripted_results(tmp_path):
    [task] = load_suite(suite_file(tmp_path, line()), BUILTIN_NAMES)
    model = ScriptedModel([call("convert_length", value=5, from_unit="km", to_unit="m"), final("5000 m"),
                           native_call("convert_length", value=5, from_unit="km", to_unit="m"), Reply(content="5 km")])
    prompt, native = run_eval([task], {"prompt": PromptProtocol, "native": NativeProtocol}, model).runs
    assert prompt["passed"] and native["passed"]
    assert prompt["tool_calls"] == [{"tool": "convert_length", "arguments": {"value": 5, "from_unit": "km",
                                                                             "to_unit": "m"}, "ok": True}]
    system = model.calls[0]["messages"][0]["content"]
    assert "Convert a length between units." in system and "Current weather in a city." in system
    assert "Evaluate an arithmetic expression" not in system  # the calculator's description
    assert "5000 m" in model.calls[1]["messages"][-1]["content"]
    assert model.calls[2]["options"]["tools"] == [CONVERT, WEATHER]
    assert model.calls[3]["messages"][-1] == {"role": "tool", "tool_call_id": "call_1", "content": "5000 m"}


def test_a_call_to_a_builtin_tool_in_a_task_with_its_own_tools_is_unknown(tmp_path):
    [task] = load_suite(suite_file(tmp_path, line()), BUILTIN_NAMES)
    model = ScriptedModel([call("calculator", expression="5*1000"), final("5000 m")])
    [run] = run_eval([task], {"prompt": PromptProtocol}, model).runs
    assert run["errors"] == {"unknown_tool": 1} and run["tool_calls"] == []
    assert run["checks"] == [{"check": "calls_match", "ok": False, "detail": "convert_length not called"}]


# --- pass rates by category -------------------------------------------------------------------------

def test_pass_rates_by_category_in_suite_order():
    runs = [record(category="single"), record(category="single", passed=False), record(category="none"),
            record("native", category="single"), record("native", category="none", passed=False),
            record("native", category="parallel")]
    summary = summarize(runs, ["prompt", "native"])
    assert summary["prompt"]["categories"] == {"single": {"runs": 2, "passed": 1, "pass_rate": 0.5},
                                               "none": {"runs": 1, "passed": 1, "pass_rate": 1.0}}
    rows = table_rows(summary)
    start = rows.index(["passed, by category"])
    assert rows[start + 1:start + 5] == [["  single", "1/2 (50.0%)", "1/1 (100.0%)"],
                                         ["  none", "1/1 (100.0%)", "0/1 (0.0%)"],
                                         ["  parallel", "-", "1/1 (100.0%)"],
                                         ["  all", "2/3 (66.7%)", "2/3 (66.7%)"]]
    assert "| **passed, by category** | | |" in render_table(rows, markdown=True)


# --- the command, against a real OpenAI-compatible server ---------------------------------------------

def test_eval_of_a_suite_with_tools_in_both_protocols(server, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    suite = suite_file(tmp_path, line(id="km"), line(
        id="both", category="parallel", task="Convert 5 km and 12 miles to meters.",
        checks={"calls_match": [KM, MILES]}), line(
        id="poem", category="none", task="Write a haiku about rain.", checks={"no_call": True}))
    server.reply(call("convert_length", value=5, from_unit="km", to_unit="m"))  # prompt: km
    server.reply(final("5 km is 5000 m."))
    server.reply(tool_calls=[{"name": "convert_length", "arguments": {"value": 5, "from_unit": "km",
                                                                      "to_unit": "mi"}}])  # native: km, wrong unit
    server.reply("about 3.1 miles")
    # the second task starts with the second arm (the arms take turns to go first)
    server.reply(tool_calls=[{"name": "convert_length", "arguments": {"value": 5, "from_unit": "km", "to_unit": "m"}},
                             {"name": "convert_length", "arguments": {"value": 12, "from_unit": "mi", "to_unit": "m"}}])
    server.reply("5000 m and 19312 m.")
    server.reply(json.dumps([{"type": "tool_call", "tool": "convert_length",  # prompt: both, at once
                              "arguments": {"value": 12, "from_unit": "mi", "to_unit": "m"}},
                             {"type": "tool_call", "tool": "convert_length",
                              "arguments": {"value": 5, "from_unit": "km", "to_unit": "m"}}]))
    server.reply(final("5000 m and 19312 m."))
    server.reply(final("Rain on the roof..."))  # prompt: poem, no call
    server.reply(tool_calls=[{"name": "get_weather", "arguments": {"city": "Oslo"}}])  # native: poem, a call
    server.reply("Rain in Oslo...")
    code = eval_command([suite, "--out", "results.json", *endpoint(server)])
    out, err = capsys.readouterr()
    assert code == 0
    assert "[3/6] native  both  pass" in err and "[2/6] native  km    FAIL  1 step" in err
    table = cells(out)
    assert table["passed"] == ["3 (100.0%)", "1 (33.3%)"]
    assert (table["single"], table["parallel"]) == (["1/1 (100.0%)", "0/1 (0.0%)"], ["1/1 (100.0%)", "1/1 (100.0%)"])
    assert (table["none"], table["all"]) == (["1/1 (100.0%)", "0/1 (0.0%)"], ["3/3 (100.0%)", "1/3 (33.3%)"])
    assert table["failed calls_match"] == ["0", "1"] and table["failed no_call"] == ["0", "1"]
    assert table["(none)"] == []  # no malformed replies; the category "none" has its own row
    tools_sent = [r["body"].get("tools") for r in server.requests]
    assert tools_sent[2] == [CONVERT, WEATHER] and tools_sent[0] is None
    assert "5000 m" in server.requests[1]["body"]["messages"][-1]["content"]

    runs = json.loads((tmp_path / "results.json").read_text())["runs"]
    assert [(r["task"], r["category"], r["protocol"], r["passed"]) for r in runs] == [
        ("km", "single", "prompt", True), ("km", "single", "native", False), ("both", "parallel", "prompt", True),
        ("both", "parallel", "native", True), ("poem", "none", "prompt", True), ("poem", "none", "native", False)]
    assert runs[1]["checks"][0]["detail"] == 'convert_length: to_unit="mi", expected one of ["m"]'
    assert runs[5]["checks"] == [{"check": "no_call", "ok": False, "detail": "called: get_weather"}]


# --- the function-calling suite in examples/ ------------------------------------------------------------

def test_the_function_calling_suite_validates_and_covers_each_category():
    tasks = load_suite(str(EXAMPLES / "function_calling.jsonl"))
    counts = Counter(t.category for t in tasks)
    assert set(counts) == {"single", "choose", "parallel", "none"}
    assert len(tasks) >= 120 and min(counts.values()) >= 30
    for task in tasks:
        expected = task.checks.get("calls_match", [])
        shape = {"single": (1, 1, 1, 1), "choose": (2, 5, 1, 1), "parallel": (1, 5, 2, 4), "none": (1, 3, 0, 0)}
        fewest_tools, most_tools, fewest_calls, most_calls = shape[task.category]
        assert fewest_tools <= len(task.tools) <= most_tools, task.id
        assert fewest_calls <= len(expected) <= most_calls, task.id
        assert task.checks.get("no_call", False) is (task.category == "none"), task.id


def test_every_tool_in_the_suite_documents_every_parameter():
    for task in load_suite(str(EXAMPLES / "function_calling.jsonl")):
        for spec in task.tools:
            for name, schema in spec["function"]["parameters"].get("properties", {}).items():
                assert schema.get("description"), f"{task.id}: {spec['function']['name']}.{name}"


def test_every_item_of_the_suite_passes_with_the_calls_it_expects_in_both_protocols():
    tasks = load_suite(str(EXAMPLES / "function_calling.jsonl"))
    prompt_replies, native_replies = [], []
    for task in tasks:
        calls = [(c["tool"], {name: values[0] for name, values in c.get("arguments", {}).items()})
                 for c in task.checks.get("calls_match", [])]
        registry = scripted_registry(task.tools, task.results)
        assert all(registry.call(tool, arguments).text != "ok" for tool, arguments in calls), task.id
        if calls:
            actions = [{"type": "tool_call", "tool": tool, "arguments": arguments} for tool, arguments in calls]
            prompt_replies.append(json.dumps(actions if len(actions) > 1 else actions[0]))
            native_replies.append(Reply(tool_calls=[
                {"id": f"call_{i}", "type": "function", "function": {"name": tool, "arguments": json.dumps(arguments)}}
                for i, (tool, arguments) in enumerate(calls)], finish_reason="tool_calls"))
        prompt_replies.append(final("done"))
        native_replies.append(Reply(content="done"))
    for protocol, replies in (("prompt", prompt_replies), ("native", native_replies)):
        runs = run_eval(tasks, {protocol: {"prompt": PromptProtocol, "native": NativeProtocol}[protocol]},
                        ScriptedModel(replies)).runs
        failed = [(r["task"], r["status"], [c["detail"] for c in r["checks"] if not c["ok"]]) for r in runs
                  if not r["passed"]]
        assert failed == [], protocol
        scripted = [r for r in runs if r["tool_calls"]]
        assert len(scripted) == sum(1 for t in tasks if t.category != "none")


def test_the_suite_file_is_what_its_generator_writes():
    items = runpy.run_path(str(EXAMPLES / "make_function_calling.py"))["ITEMS"]
    written = (EXAMPLES / "function_calling.jsonl").read_text(encoding="utf-8")
    assert written == "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in items), (
        "run python3 examples/make_function_calling.py")


def test_an_argument_given_its_documented_default_counts_as_left_out(tmp_path):
    strict = {"tool": "convert_length", "arguments": {"value": [5], "from_unit": ["km"], "to_unit": ["m"]}}
    [task] = load_suite(suite_file(tmp_path, line(checks={"calls_match": [strict]})), BUILTIN_NAMES)
    plain = {"value": 5, "from_unit": "km", "to_unit": "m"}
    assert calls_match(task.checks["calls_match"], made(("convert_length", {**plain, "precision": 2})))["ok"]
    other = calls_match(task.checks["calls_match"], made(("convert_length", {**plain, "precision": 3})))
    assert other == {**other, "ok": False, "detail": "convert_length: unexpected argument precision"}
