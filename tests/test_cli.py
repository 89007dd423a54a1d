"""The `agent` command end to end, against the scripted OpenAI-compatible server."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from agent.cli import main
from tests.support import action, child_env

def run(server, *args, capsys):
    code = main(["--base-url", server.url, "--model", "test-model", "--timeout", "5", *args])
    out, err = capsys.readouterr()
    return code, out, err


def user_texts(request) -> str:
    return "\n".join(m["content"] for m in request["body"]["messages"] if m["role"] == "user")


def test_calculator_seed_prints_only_the_answer(server, workspace, capsys):
    server.reply(action("calculator", expression="128*96 + 45**2 - 88/2"))
    server.reply(action(answer="14269"))
    code, out, err = run(server, "Compute 128*96 + 45**2 - 88/2", capsys=capsys)
    assert (code, out) == (0, "14269\n")
    assert "calculator(expression=128*96 + 45**2 - 88/2) → 14269" in err
    assert "final · 1 step · 2 model calls · 0 re-asks" in err
    body = server.requests[0]["body"]
    assert body["model"] == "test-model"
    assert not {"tools", "tool_choice", "functions", "temperature"} & body.keys()
    assert "14269" in user_texts(server.requests[1])


def test_reads_notes_for_the_budget(server, workspace, capsys):
    (workspace / "notes.txt").write_text("Team offsite\nBudget: 4,250 EUR\nVenue: TBD\n")
    server.reply(action("read_file", path="notes.txt"))
    server.reply(action(answer="The budget is 4,250 EUR."))
    code, out, _ = run(server, "What is the budget in notes.txt?", capsys=capsys)
    assert (code, out) == (0, "The budget is 4,250 EUR.\n")
    assert "Budget: 4,250 EUR" in user_texts(server.requests[1])


def test_recovers_from_a_missing_file(server, workspace, capsys):
    (workspace / "notes.md").write_text("Budget: 300\n")
    server.reply(action("read_file", path="notes.txt"))
    server.reply(action("list_dir", path="."))
    server.reply(action("read_file", path="notes.md"))
    server.reply(action(answer="300"))
    code, out, err = run(server, "What is the budget in my notes?", capsys=capsys)
    assert (code, out) == (0, "300\n")
    assert "error: file not found: notes.txt" in user_texts(server.requests[1])
    assert "notes.md" in user_texts(server.requests[2])
    assert "final · 3 steps · 4 model calls" in err


def test_json_output_and_temperature(server, workspace, capsys):
    server.reply(action(answer="hi"), usage={"prompt_tokens": 11, "completion_tokens": 3})
    code, out, err = run(server, "--json", "--temperature", "0.2", "say hi", capsys=capsys)
    result = json.loads(out)
    assert code == 0 and err == ""
    assert (result["status"], result["answer"], result["prompt_tokens"], result["completion_tokens"]) == \
        ("final", "hi", 11, 3)
    assert server.requests[0]["body"]["temperature"] == 0.2


def test_quiet_keeps_stderr_empty(server, workspace, capsys):
    server.reply(action(answer="ok"))
    code, out, err = run(server, "--quiet", "x", capsys=capsys)
    assert (code, out, err) == (0, "ok\n", "")


def test_step_limit_exits_4(server, workspace, capsys):
    for i in range(3):
        server.reply(action("calculator", expression=f"{i}+1"))
    code, out, err = run(server, "--max-steps", "2", "count", capsys=capsys)
    assert (code, out) == (4, "")
    assert "step_limit" in err and "--max-steps" in err


def test_format_errors_exit_4(server, workspace, capsys):
    server.replies("no json here", "still none", "nope")
    code, _, err = run(server, "--max-reasks", "2", "x", capsys=capsys)
    assert code == 4 and "format_errors" in err and "no_json" in err
    assert len(server.requests) == 3


def test_endpoint_failure_exits_3_with_one_line(server, workspace, capsys):
    for _ in range(3):
        server.error(500, headers={"retry-after-ms": "10"})
    code, out, err = run(server, "x", capsys=capsys)
    assert (code, out) == (3, "")
    assert "model_error" in err and "500" in err and "Traceback" not in err


def test_flags_beat_environment_which_beats_dotenv(server, workspace, capsys, monkeypatch):
    (workspace / ".env").write_text("AGENT_MODEL=from-dotenv\nAGENT_BASE_URL=http://127.0.0.1:9/v1\n")
    monkeypatch.setenv("AGENT_MODEL", "from-env")
    server.replies(action(answer="a"), action(answer="b"))
    assert main(["--base-url", server.url, "--quiet", "x"]) == 0
    assert server.requests[0]["body"]["model"] == "from-env"
    monkeypatch.delenv("AGENT_MODEL")
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    os.environ.pop("AGENT_BASE_URL", None)
    (workspace / ".env").write_text("AGENT_MODEL=from-dotenv\n")
    assert main(["--quiet", "y"]) == 0
    assert server.requests[1]["body"]["model"] == "from-dotenv"
    capsys.readouterr()


@pytest.mark.parametrize("args, env, expected", [
    (["--base-url", "http://127.0.0.1:9/v1"], {}, "pass --model NAME (`agent models` lists what it serves)"),
    ([], {"AGENT_MODEL": "gpt-x"}, "set AGENT_BASE_URL (or --base-url)"),
    (["--model", "m", "--base-url", "http://x/v1", "--workspace", "missing-dir"], {}, "pass --workspace DIR"),
    (["--model", "m", "--base-url", "http://x/v1", "--protocol", "native", "--constrain"], {}, "drop it"),
])
def test_configuration_errors_exit_2_with_one_line(workspace, capsys, monkeypatch, args, env, expected):
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert main([*args, "task"]) == 2
    err = capsys.readouterr().err
    assert expected in err and len(err.strip().splitlines()) == 1


def test_tools_command_lists_the_tools(capsys):
    assert main(["tools"]) == 0
    out = capsys.readouterr().out
    for name in ["calculator", "read_file", "write_file", "list_dir", "current_time"]:
        assert name in out


def test_module_entry_point_reports_errors_without_traceback(workspace):
    done = subprocess.run([sys.executable, "-m", "agent", "--base-url", "http://127.0.0.1:9/v1", "x"],
                          capture_output=True, text=True, cwd=workspace, env=child_env(), timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip() == ("agent: no model named for http://127.0.0.1:9/v1: pass --model NAME (`agent models` "
                                   "lists what it serves) or set AGENT_MODEL; or pass --local for the embedded model")


def test_a_folder_with_its_own_tools_and_prompts_packages_does_not_shadow_ours(server, workspace):
    """The project installs as `agent` only: a user's `tools` or `prompts` package is not ours."""
    for name in ("tools", "prompts"):
        (workspace / name).mkdir()
        (workspace / name / "__init__.py").write_text(f"raise ImportError('the user\\'s own {name} package')\n")
    listed = subprocess.run([sys.executable, "-m", "agent", "tools"], capture_output=True, text=True,
                            cwd=workspace, env=child_env(), timeout=60)
    assert (listed.returncode, listed.stderr) == (0, "") and "calculator(expression: string)" in listed.stdout
    server.reply(action("calculator", expression="6*7"))
    server.reply(action(answer="42"))
    done = subprocess.run([sys.executable, "-m", "agent", "--base-url", server.url, "--model", "m", "--quiet", "6*7?"],
                          capture_output=True, text=True, cwd=workspace, env=child_env(), timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (0, "42\n", "")


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_or_a_termination_request_leaves_a_complete_trace(server, workspace, stop):
    server.reply(action("calculator", expression="1+1"))
    server.reply(action(answer="2"), delay=30)
    trace = workspace / "trace.jsonl"
    child = subprocess.Popen([sys.executable, "-m", "agent", "--base-url", server.url, "--model", "m",
                              "--trace", str(trace), "1+1"], cwd=workspace, env=child_env(),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while len(server.requests) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    child.send_signal(stop)
    out, err = child.communicate(timeout=30)
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    assert child.returncode == 130 and "Traceback" not in err and "interrupted" in err
    assert [e["event"] for e in events][:4] == ["run_start", "model_call", "tool_call", "tool_result"]
    assert events[-1]["event"] == "run_end" and events[-1]["status"] == "interrupted"


CALC = action("calculator", expression="2+2")


@pytest.mark.parametrize("reply, finish_reason, kind, detail", [
    ("Sure, I can help with that.", "stop", "no_json", "no JSON"),
    ('{"type": "final", "answer": "4" "5"}', "stop", "invalid_json", "line 1 column"),
    (action(answer="4") + "\n" + CALC, "stop", "multiple_actions", "exactly one"),
    ('{"type": "answer", "text": "4"}', "stop", "schema", "$.type"),
    (action("websearch", query="2+2"), "stop", "unknown_tool", "available tools: calculator"),
    (action("calculator", expr="2+2"), "stop", "bad_arguments", "expression"),
    ('{"type": "tool_call", "tool": "calcu', "length", "truncated", "cut off"),
])
def test_each_format_failure_is_reasked_with_its_type(server, workspace, capsys, reply, finish_reason, kind, detail):
    server.reply(reply, finish_reason=finish_reason)
    server.reply(action(answer="4"))
    code, out, err = run(server, "What is 2+2?", capsys=capsys)
    reask = server.requests[1]["body"]["messages"][-1]
    assert (code, out) == (0, "4\n")
    assert reask["role"] == "user" and f"({kind})" in reask["content"] and detail in reask["content"]
    assert '{"type": "tool_call", "tool": "<tool name>"' in reask["content"]
    assert f"re-ask ({kind})" in err and "1 re-ask" in err


def test_unwritable_trace_file_is_a_usage_error(server, workspace, capsys):
    code, out, err = run(server, "--trace", str(workspace / "no-such-dir" / "t.jsonl"), "x", capsys=capsys)
    assert (code, out) == (2, "")
    assert "cannot write the trace file" in err and "--trace" in err and server.requests == []


def test_every_status_has_an_exit_code():
    from agent.cli import EXIT_CODES
    from agent.loop import STATUSES

    assert set(EXIT_CODES) == set(STATUSES) and EXIT_CODES["final"] == 0
