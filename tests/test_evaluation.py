"""`agent eval`: the suite format and its checks, the runner, the table, and the command against a real server."""
import json
import re
from datetime import datetime, timezone
from pathlib import Path

import pytest

from agent.cli import main
from agent.config import ConfigError
from agent.cli.eval import eval_command
from agent.evaluation.reports import render_table, summarize, table_rows
from agent.evaluation.runner import run_eval
from agent.models import ModelError, Reply, ScriptedModel
from agent.protocols import NativeProtocol, PromptProtocol
from agent.evaluation.suites import Task, check_run, load_suite, numbers_in
from agent.tools import builtin_registry

CATEGORIES = {"calculator", "no_tool", "read_file", "list_then_read", "write_file", "time", "multi_step",
              "missing_file", "impossible"}
PROMPT = {"prompt": PromptProtocol}
BOTH = {"prompt": PromptProtocol, "native": NativeProtocol}


def call(tool: str, **arguments) -> str:
    return json.dumps({"type": "tool_call", "tool": tool, "arguments": arguments})


def final(answer: str) -> str:
    return json.dumps({"type": "final", "answer": answer})


def native_call(tool: str, **arguments) -> Reply:
    return Reply(tool_calls=[{"id": "call_1", "type": "function",
                              "function": {"name": tool, "arguments": json.dumps(arguments)}}],
                 finish_reason="tool_calls")


def suite_file(tmp_path: Path, *lines) -> str:
    path = tmp_path / "suite.jsonl"
    path.write_text("\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n")
    return str(path)


def task(**fields) -> dict:
    return {"id": "t1", "task": "What is 2+2?", "checks": {"answer_number": 4}, **fields}


# --- the suite file ---------------------------------------------------------------------------------

def test_builtin_suite_has_every_category_and_only_real_tools():
    tasks = load_suite(None, set(builtin_registry(".").names))
    assert len(tasks) >= 25
    assert {t.category for t in tasks} == CATEGORIES
    seed = next(t for t in tasks if t.id == "calc-seed")
    assert seed.checks == {"answer_number": 14269, "tools_called": ["calculator"]}
    assert "128*96 + 45**2 - 88/2" in seed.task


def test_blank_lines_are_skipped_and_line_numbers_kept(tmp_path):
    path = suite_file(tmp_path, task(id="a"), "", task(id="b", files={"docs/x.txt": "hi"}, category="read_file"))
    first, second = load_suite(path)
    assert (first.id, first.line, second.id, second.line) == ("a", 1, "b", 3)
    assert second.files == {"docs/x.txt": "hi"} and second.category == "read_file"


@pytest.mark.parametrize("line, problem", [
    ('{"id": "x", "task": "t", ', "not valid JSON"),
    (task(checks={"answer_contain": ["4"]}), "'answer_contain' was unexpected"),
    (task(checks={"answer_number": "four"}), "checks/answer_number"),
    (task(checks={}), "checks: {} should be non-empty"),
    ({"id": "x", "checks": {"answer_number": 4}}, "'task' is a required property"),
    (task(id="has space"), "id: 'has space' does not match"),
    (task(files={"/etc/passwd": "x"}), "'/etc/passwd' must be relative"),
    (task(files={"C:\\x.txt": "x"}), "must be relative"),
    (task(files={"a/../../b.txt": "x"}), "must stay inside the workspace"),
    (task(checks={"file_equals": {"../out.txt": "x"}}), "'../out.txt' must stay inside"),
    (task(checks={"tools_called": ["calculater"]}), "unknown tool calculater"),
])
def test_a_bad_task_is_reported_with_its_line_number(tmp_path, line, problem):
    path = suite_file(tmp_path, task(id="fine"), line)
    with pytest.raises(ConfigError) as caught:
        load_suite(path, {"calculator", "read_file"})
    assert f"{path}, line 2: " in str(caught.value)
    assert problem in str(caught.value)


def test_duplicate_ids_empty_suites_and_missing_files_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="line 2: task id 't1' already used on line 1"):
        load_suite(suite_file(tmp_path, task(), task()))
    with pytest.raises(ConfigError, match="no tasks"):
        load_suite(suite_file(tmp_path, ""))
    with pytest.raises(ConfigError, match="cannot read suite"):
        load_suite(str(tmp_path / "missing.jsonl"))


# --- checks ---------------------------------------------------------------------------------------

def check(name, expected, answer="", tools=(), workspace=Path("."), now=None) -> dict:
    calls = [{"tool": tool, "arguments": {}, "ok": True} for tool in tools]
    [result] = check_run({name: expected}, answer, calls, workspace, now)
    return result


@pytest.mark.parametrize("answer", ["14269", "The result is 14,269.", "14 269", "14\u202f269", "14269.0",
                                    "= 14,269.00 in total", "1.4269e4", "It's 14269!"])
def test_answer_number_tolerates_formatting(answer):
    assert check("answer_number", 14269, answer)["ok"]


@pytest.mark.parametrize("answer", ["14268", "1426.9", "142690", "no number at all", "v14269"])
def test_answer_number_fails_on_other_numbers(answer):
    result = check("answer_number", 14269, answer)
    assert not result["ok"]
    assert result["detail"].startswith("expected 14269; numbers in the answer:")


def test_answer_number_with_tolerance_and_signs():
    assert check("answer_number", {"value": 142.857, "tolerance": 0.0005}, "about 142.857142857")["ok"]
    assert not check("answer_number", {"value": 142.857, "tolerance": 0.0005}, "142.86")["ok"]
    assert check("answer_number", -3, "it is \u22123")["ok"]
    assert numbers_in("5-3 = 2") == [5.0, 3.0, 2.0]
    assert numbers_in("1,234,567 and 1, 2") == [1234567.0, 1.0, 2.0]
    assert numbers_in("1,234,567", grouped=False) == [1.0, 234.0, 567.0]


def test_answer_contains_needs_all_case_insensitively():
    assert check("answer_contains", ["b.txt", "2031-06-30"], "B.TXT says 2031-06-30")["ok"]
    result = check("answer_contains", ["b.txt", "2031-06-30"], "b.txt, June 30")
    assert (result["ok"], result["detail"]) == (False, "missing '2031-06-30'")


def test_answer_any_needs_one_and_reads_curly_apostrophes():
    assert check("answer_any", ["can't", "unable"], "I can\u2019t know that")["ok"]
    assert not check("answer_any", ["can't", "unable"], "It is sunny, 21 degrees")["ok"]


def test_answer_current_accepts_any_time_zone_around_now():
    now = datetime(2031, 12, 31, 23, 30, tzinfo=timezone.utc)
    assert check("answer_current", "year", "It is 2031.", now=now)["ok"]
    assert check("answer_current", "year", "It is already 2032 in Auckland.", now=now)["ok"]
    assert check("answer_current", "date", "Today is 2031-12-31.", now=now)["ok"]
    result = check("answer_current", "date", "Today is 2031-12-29.", now=now)
    assert not result["ok"]
    assert result["detail"] == "expected the current date: 2031-12-31 or 2032-01-01"
    assert check("answer_current", "year", str(datetime.now(timezone.utc).year))["ok"]


def test_file_equals_ignores_one_trailing_newline(tmp_path):
    (tmp_path / "out.txt").write_text("eggs\nmilk\n")
    assert check("file_equals", {"out.txt": "eggs\nmilk"}, workspace=tmp_path)["ok"]
    wrong = check("file_equals", {"out.txt": "eggs", "gone.txt": "x"}, workspace=tmp_path)
    assert not wrong["ok"]
    assert wrong["detail"] == "out.txt: expected 'eggs', found 'eggs\\nmilk\\n'; gone.txt: missing"


def test_tools_called_and_not_called():
    assert check("tools_called", ["list_dir", "read_file"], tools=["list_dir", "read_file", "read_file"])["ok"]
    assert check("tools_called", ["calculator"], tools=["read_file"])["detail"] == "not called: calculator"
    assert check("tools_not_called", ["write_file"], tools=["read_file"])["ok"]
    assert check("tools_not_called", ["write_file"], tools=["write_file"])["detail"] == "called: write_file"


def test_checks_without_an_answer_fail_rather_than_crash():
    assert [c["ok"] for c in check_run({"answer_contains": ["x"], "answer_number": 1}, None, [], Path("."))] == [
        False, False]


# --- running tasks ----------------------------------------------------------------------------------

WRITE = Task("write", "Write hi to out.txt", {"file_equals": {"out.txt": "hi"}, "tools_called": ["write_file"]})
READ = Task("read", "What is the budget?", {"answer_number": 4250, "tools_called": ["read_file"]},
            files={"notes/budget.txt": "Budget: 4,250 EUR\n"}, category="read_file")


def test_a_passing_and_a_failing_task_end_to_end():
    model = ScriptedModel([call("write_file", path="out.txt", content="hi"), final("done"),
                           call("read_file", path="notes/budget.txt"), final("The budget is 4,200 EUR.")])
    evaluation = run_eval([WRITE, READ], PROMPT, model)
    passing, failing = evaluation.runs
    assert (passing["task"], passing["protocol"], passing["status"]) == ("write", "prompt", "final")
    assert passing["passed"]
    assert [c["check"] for c in passing["checks"]] == ["file_equals", "tools_called"]
    assert (failing["task"], failing["category"], failing["status"]) == ("read", "read_file", "final")
    assert not failing["passed"]
    assert failing["checks"][0] == {"check": "answer_number", "ok": False,
                                    "detail": "expected 4250; numbers in the answer: 4200"}
    assert failing["checks"][1]["ok"]
    assert failing["tool_calls"] == [{"tool": "read_file", "arguments": {"path": "notes/budget.txt"}, "ok": True}]
    assert (evaluation.planned, evaluation.interrupted) == (2, False)


def test_each_run_gets_a_fresh_workspace():
    model = ScriptedModel([call("write_file", path="out.txt", content="hi"), final("done"),
                           call("list_dir"), final("done")])
    runs = run_eval([WRITE], PROMPT, model, repeat=2).runs
    second_listing = model.calls[3]["messages"][-1]["content"]
    assert "out.txt" not in second_listing
    assert [(r["repeat"], r["passed"]) for r in runs] == [(0, True), (1, False)]


def test_both_protocols_run_each_task_in_order():
    model = ScriptedModel([call("read_file", path="notes/budget.txt"), final("4250"),
                           native_call("read_file", path="notes/budget.txt"), Reply(content="4,250 EUR")])
    runs = run_eval([READ], BOTH, model).runs
    assert [(r["protocol"], r["passed"]) for r in runs] == [("prompt", True), ("native", True)]
    assert "tools" in model.calls[2]["options"] and "tools" not in model.calls[0]["options"]


def test_runs_that_do_not_end_in_a_final_answer_fail_and_a_crash_is_recorded():
    model = ScriptedModel(["not json"] * 4 + [ModelError("HTTP 500"), RuntimeError("boom")])
    runs = run_eval([WRITE] * 3, PROMPT, model).runs
    assert [r["status"] for r in runs] == ["format_errors", "model_error", "error"]
    assert not any(r["passed"] for r in runs)
    assert runs[0]["errors"] == {"no_json": 4} and runs[0]["reasks"] == 3
    assert runs[2]["error"] == "internal error: RuntimeError: boom"


def test_workers_share_the_model_and_runs_come_back_in_task_order():
    tasks = [Task(f"t{i}", "capital of France?", {"answer_contains": ["paris"]}) for i in range(8)]
    runs = run_eval(tasks, PROMPT, ScriptedModel([final("Paris")] * 8), workers=4).runs
    assert [r["task"] for r in runs] == [f"t{i}" for i in range(8)]
    assert all(r["passed"] for r in runs)


def test_ctrl_c_stops_the_eval_and_keeps_what_finished():
    def interrupt(record, done, total):
        assert (done, total) == (1, 3)
        raise KeyboardInterrupt

    evaluation = run_eval([WRITE] * 3, PROMPT, ScriptedModel([final("x")] * 3), on_done=interrupt)
    assert evaluation.interrupted
    assert len(evaluation.runs) == 1


# --- the table ------------------------------------------------------------------------------------

def record(protocol="prompt", **fields) -> dict:
    base = {"task": "t", "category": "", "protocol": protocol, "status": "final", "passed": True, "steps": 1, "model_calls": 2,
            "reasks": 0, "errors": {}, "prompt_tokens": 100, "completion_tokens": 10, "usage_missing": 0,
            "seconds": 1.0, "checks": []}
    return {**base, **fields}


def cells(table: str) -> dict[str, list[str]]:
    """The plain table (the first, before a blank line) as {row label: cells}; cells are separated by two spaces
    or more."""
    rows = [re.split(r" {2,}", line.strip()) for line in table.split("\n\n")[0].splitlines()]
    return {"": rows[0], **{row[0]: row[1:] for row in rows[1:]}}


def test_summary_and_table():
    runs = [record(), record(passed=False, steps=3, reasks=2, errors={"no_json": 1, "bad_arguments": 1},
                             checks=[{"check": "answer_number", "ok": False, "detail": ""}], seconds=2.0),
            record("native", passed=False, status="step_limit", usage_missing=2, prompt_tokens=0, completion_tokens=0),
            record("native", usage_missing=1)]
    summary = summarize(runs, ["prompt", "native"])
    prompt = summary["prompt"]
    assert (prompt["runs"], prompt["passed"], prompt["pass_rate"], prompt["mean_steps"]) == (2, 1, 0.5, 2.0)
    assert (prompt["reasks"], prompt["argument_errors"], prompt["seconds"], prompt["mean_seconds"]) == (2, 1, 3.0, 1.5)
    assert prompt["failed_checks"] == {"answer_number": 1} and summary["native"]["statuses"] == {"step_limit": 1}

    table = cells(render_table(table_rows(summary)))
    assert table[""] == ["prompt", "native"]
    assert table["passed"] == ["1 (50.0%)", "1 (50.0%)"]
    assert table["mean steps"] == ["2.0", "1.0"]
    assert table["re-asks"] == ["2", "0"] and table["argument errors"] == ["1", "0"]
    assert table["unusable replies"] == ["2 (50.0% of replies)", "0 (0.0% of replies)"]
    assert "passed, by category" not in table  # no task has a category
    assert table["prompt tokens"] == ["200", "100 (3 calls unreported)"]
    assert table["wall seconds"] == ["3.0 (mean 1.5)", "2.0 (mean 1.0)"]
    assert table["failed runs, by cause"] == []
    assert table["ended step_limit"] == ["0", "1"] and table["ended model_error"] == ["0", "0"]
    assert table["failed answer_number"] == ["1", "0"]
    assert table["no_json"] == ["1", "0"] and table["bad_arguments"] == ["1", "0"]


def test_tokens_not_reported_at_all_say_so_and_markdown_renders():
    summary = summarize([record(usage_missing=2, prompt_tokens=0, completion_tokens=0)], ["prompt"])
    table = cells(render_table(table_rows(summary)))
    assert table["prompt tokens"] == ["n/a (not reported)"]
    assert table["(none)"] == []
    markdown = render_table(table_rows(summary), markdown=True).splitlines()
    assert markdown[:2] == ["|  | prompt |", "|---|---:|"]
    assert "| passed | 1 (100.0%) |" in markdown and "| **failed runs, by cause** | |" in markdown


# --- the command, against a real OpenAI-compatible server ---------------------------------------------

def endpoint(server) -> list[str]:
    return ["--base-url", server.url, "--model", "test-model", "--workers", "1"]


def test_eval_command_compares_both_protocols(server, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    server.reply(call("calculator", expression="128*96 + 45**2 - 88/2"))
    server.reply(final("The result is 14269."))
    server.reply(tool_calls=[{"name": "calculator", "arguments": {"expression": "128*96 + 45**2 - 88/2"}}])
    server.reply("14,269", usage=None)
    code = eval_command(["--tasks", "calc-seed", "--out", "results.json", *endpoint(server)])
    assert code == 0
    out, err = capsys.readouterr()
    assert "[1/2] prompt  calc-seed  pass  1 step" in err and "[2/2] native  calc-seed  pass  1 step" in err
    table = cells(out)
    assert table[""] == ["prompt", "native"]
    assert table["passed"] == ["1 (100.0%)", "1 (100.0%)"]
    assert table["mean steps"] == ["1.0", "1.0"] and table["mean model calls"] == ["2.0", "2.0"]
    assert table["prompt tokens"][1].endswith("(1 call unreported)")
    bodies = [r["body"] for r in server.requests]
    assert [("tools" in b) for b in bodies] == [False, False, True, True]

    results = json.loads((tmp_path / "results.json").read_text())
    assert set(results) == {"suite", "source", "model", "started", "finished", "settings", "interrupted", "runs",
                            "summary", "comparisons"}
    assert results["suite"] == results["source"] == "built-in"
    assert results["model"] == {"backend": "openai-compatible", "base_url": server.url, "model": "test-model"}
    assert results["settings"]["protocols"] == ["prompt", "native"] and results["settings"]["max_steps"] == 15
    prompt_run, native_run = results["runs"]
    assert (prompt_run["protocol"], prompt_run["answer"]) == ("prompt", "The result is 14269.")
    assert prompt_run["passed"] and native_run["passed"]
    assert native_run["checks"][0] == {"check": "answer_number", "ok": True, "detail": "14269 found"}
    assert native_run["usage_missing"] == 1
    assert results["summary"]["native"]["passed"] == 1
    assert not list(tmp_path.glob(".results.json.*"))


def test_constrained_prompt_protocol_is_labelled_and_sent(server, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    suite = suite_file(tmp_path, task(id="four", checks={"answer_number": 4}))
    server.reply(final("4"))
    code = eval_command([suite, "--protocol", "prompt", "--constrain", "--quiet", "--markdown", *endpoint(server)])
    out, err = capsys.readouterr()
    assert code == 0 and err == ""
    assert out.splitlines()[0] == "|  | prompt-constrained |"
    assert server.requests[0]["body"]["response_format"]["type"] == "json_schema"


def test_every_run_failing_with_a_model_error_exits_3(server, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    server.error(401)
    server.error(401)
    code = eval_command(["--limit", "1", "--quiet", *endpoint(server)])
    out, err = capsys.readouterr()
    assert code == 3
    assert cells(out)["ended model_error"] == ["1", "1"]
    assert "every run failed with a model error" in err and "HTTP 401" in err


def test_config_errors_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    bad = suite_file(tmp_path, task(), task(id="t2", checks={"answer_numbr": 4}))
    assert main(["eval", bad, "--base-url", "http://127.0.0.1:9/v1", "--model", "m"]) == 2
    assert f"{bad}, line 2: " in capsys.readouterr().err
    assert main(["eval", "--tasks", "nope", "--base-url", "http://127.0.0.1:9/v1", "--model", "m"]) == 2
    assert "no task nope" in capsys.readouterr().err
    assert main(["eval", "--protocol", "native", "--constrain", "--base-url", "http://127.0.0.1:9/v1",
                 "--model", "m"]) == 2
    assert "--constrain applies to the prompt protocol only" in capsys.readouterr().err
