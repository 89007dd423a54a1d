"""The run log: every run kept in SQLite and read back by `agent logs`; runs written at once by several
processes all kept; a log that cannot be written never costs the answer; what the trace's run_start says."""
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

import pytest

from agent import Agent, ScriptedModel
from agent.cli import main
from agent.cli.setup import url_without_secrets
from agent.runlog import RunLog, one, recent
from agent.tools import builtin_registry
from tests.support import action, child_env


def run(server, capsys, *args):
    code = main(["--base-url", server.url, "-m", "m", "--timeout", "5", *args])
    out, err = capsys.readouterr()
    return code, out, err


def logs(capsys, *args):
    code = main(["logs", *args])
    out, err = capsys.readouterr()
    return code, out, err


def default_log() -> Path:
    return Path(os.environ["XDG_DATA_HOME"]) / "prompt-protocol-agent" / "logs" / "runs.db"


def is_iso(text: str) -> bool:
    moment = datetime.fromisoformat(text)
    return moment.tzinfo is not None and abs(time.time() - moment.timestamp()) < 600


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_a_run_is_logged_and_shown_as_a_list_a_transcript_and_json(server, workspace, capsys):
    (workspace / "notes.txt").write_text("Budget: 4,250 EUR\n")
    server.replies(action("read_file", path="notes.txt"), action(answer="The budget is 4,250 EUR."))
    assert run(server, capsys, "--temperature", "0.3", "What is the budget?")[:2] == (0, "The budget is 4,250 EUR.\n")
    server.replies("no JSON here", action(answer="4"))
    assert run(server, capsys, "What is 2+2?")[0] == 0

    code, out, err = logs(capsys)
    header, second, first = out.splitlines()
    assert (code, err) == (0, "") and header.split() == ["ID", "STARTED", "(UTC)", "STATUS", "STEPS", "TOKENS",
                                                         "SECONDS", "MODEL", "TASK"]
    assert second.split()[:1] + second.split()[3:5] == ["2", "final", "0"] and second.endswith("  What is 2+2?")
    assert first.split()[:1] + first.split()[3:5] == ["1", "final", "1"] and first.endswith("  What is the budget?")

    code, out, err = logs(capsys, "show", "1")
    assert (code, err) == (0, "")
    assert out.startswith("run 1 · final · started 20")
    assert f"model: m at {server.url} (prompt protocol, temperature 0.3, not constrained)" in out
    assert "task: What is the budget?\nanswer: The budget is 4,250 EUR.\n1 step · 2 model calls · 0 re-asks" in out
    assert 'read_file(path="notes.txt") → ok\n      Budget: 4,250 EUR\n' in out
    assert "final answer\n      The budget is 4,250 EUR.\n" in out and out.rstrip().endswith("run ended: final")
    assert "re-ask (no_json)" in logs(capsys, "show", "2")[1]

    code, out, err = logs(capsys, "show", "1", "--json")
    shown = json.loads(out)
    assert (code, shown["id"], shown["status"], shown["answer"]) == (0, 1, "final", "The budget is 4,250 EUR.")
    assert (shown["model"], shown["base_url"], shown["temperature"], shown["constrained"]) == ("m", server.url, 0.3,
                                                                                             False)
    assert shown["prompt_tokens"] > 0 and shown["steps"] == 1 and shown["model_calls"] == 2
    assert [e["event"] for e in shown["events"]] == ["run_start", "model_call", "tool_call", "tool_result",
                                                     "model_call", "final", "run_end"]
    assert all(is_iso(e["time"]) for e in shown["events"]) and is_iso(shown["started"]) and is_iso(shown["finished"])
    listed = json.loads(logs(capsys, "--json", "-n", "1")[1])
    assert [r["id"] for r in listed] == [2] and listed[0]["task"] == "What is 2+2?" and "events" not in listed[0]


def test_no_log_keeps_a_run_out_and_an_empty_log_says_so(server, workspace, capsys):
    server.reply(action(answer="4"))
    assert run(server, capsys, "--no-log", "2+2?")[:2] == (0, "4\n")
    assert not default_log().exists()
    code, out, err = logs(capsys)
    assert (code, out) == (0, "") and one_line(err).startswith("agent: no runs logged yet in ")
    assert json.loads(logs(capsys, "--json")[1]) == []


def test_agent_logs_dir_chooses_the_folder_and_dotenv_cannot(server, workspace, capsys, monkeypatch, tmp_path):
    (workspace / ".env").write_text(f"AGENT_LOGS_DIR={tmp_path / 'from-dotenv'}\n")
    monkeypatch.setenv("AGENT_LOGS_DIR", str(tmp_path / "chosen"))
    server.reply(action(answer="4"))
    assert run(server, capsys, "2+2?")[0] == 0
    assert [r["task"] for r in recent(tmp_path / "chosen" / "runs.db", 5)] == ["2+2?"]
    assert not (tmp_path / "from-dotenv").exists() and not default_log().exists()
    assert json.loads(logs(capsys, "--json")[1])[0]["task"] == "2+2?"
    assert (tmp_path / "chosen" / "runs.db").stat().st_mode & 0o077 == 0  # the user's own
    monkeypatch.delenv("AGENT_LOGS_DIR")
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "prompt-protocol-agent" / "config.env"
    config.parent.mkdir(parents=True)
    config.write_text(f"AGENT_LOGS_DIR={tmp_path / 'configured'}\n")
    server.reply(action(answer="5"))
    assert run(server, capsys, "2+3?")[0] == 0
    assert [r["task"] for r in recent(tmp_path / "configured" / "runs.db", 5)] == ["2+3?"]


def test_runs_of_agents_at_once_are_all_logged(server, workspace):
    """Four `agent` processes at once: the first replies wait until all four runs have started, so their runs
    and their writes overlap."""
    agents, everyone = 4, threading.Event()
    for n in range(agents):
        def first(body, n=n):
            return f"task {n}" in body["messages"][1]["content"] and len(body["messages"]) == 2

        def later(body, n=n):
            return f"task {n}" in body["messages"][1]["content"] and len(body["messages"]) > 2

        server.answer_when(first, action("calculator", expression=f"{n}*10"), gate=everyone)
        server.answer_when(later, action(answer=f"answer {n}"), delay=0.2)
    children = [subprocess.Popen([sys.executable, "-m", "agent", "--base-url", server.url, "-m", "m", f"task {n}"],
                                 cwd=workspace, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True) for n in range(agents)]
    deadline = time.monotonic() + 60
    while len(server.requests) < agents and time.monotonic() < deadline:
        time.sleep(0.05)
    everyone.set()
    outputs = [child.communicate(timeout=60) for child in children]
    assert [child.returncode for child in children] == [0] * agents
    assert [out for out, _ in outputs] == [f"answer {n}\n" for n in range(agents)]
    assert all("warning" not in err for _, err in outputs)
    runs = recent(default_log(), 10)
    assert sorted(r["task"] for r in runs) == [f"task {n}" for n in range(agents)]
    for r in runs:
        shown = one(default_log(), r["id"])
        assert shown["status"] == "final" and shown["answer"] == f"answer {r['task'][-1]}"
        assert [e["event"] for e in shown["events"]] == ["run_start", "model_call", "tool_call", "tool_result",
                                                         "model_call", "final", "run_end"]
    starts = sorted(r["started"] for r in runs)
    assert min(r["finished"] for r in runs) > starts[-1]  # they did run at once


def test_a_run_waits_for_another_writer_and_is_logged(server, workspace):
    default_log().parent.mkdir(parents=True)
    holder = sqlite3.connect(default_log(), isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another process in the middle of a write: even reading waits
    server.reply(action(answer="4"))
    child = subprocess.Popen([sys.executable, "-m", "agent", "--base-url", server.url, "-m", "m", "2+2?"],
                             cwd=workspace, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.5)
    holder.execute("COMMIT")
    holder.close()
    out, err = child.communicate(timeout=60)
    assert (child.returncode, out) == (0, "4\n") and "warning" not in err
    assert [(r["task"], r["status"]) for r in recent(default_log(), 5)] == [("2+2?", "final")]


def test_a_log_locked_beyond_the_busy_timeout_costs_one_warning_and_not_the_answer(tmp_path):
    path = tmp_path / "runs.db"
    RunLog(path, print)("run_start", task="first")  # the database exists
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    warnings = []
    log = RunLog(path, warnings.append, busy_timeout=0.2)
    agent = Agent(ScriptedModel([action("calculator", expression="6*7"), action(answer="42")]),
                  builtin_registry(str(tmp_path)), emit=log)
    started = time.monotonic()
    result = agent.run("6*7?")
    holder.execute("COMMIT")
    assert (result.status, result.answer) == ("final", "42") and time.monotonic() - started < 5
    assert len(warnings) == 1 and "database is locked" in warnings[0] and "the run goes on, unlogged" in warnings[0]


def test_a_corrupt_log_costs_a_run_one_warning_and_agent_logs_says_how_to_fix_it(server, workspace, capsys):
    default_log().parent.mkdir(parents=True)
    default_log().write_bytes(b"this is not a database\n" * 100)
    server.reply(action(answer="4"))
    code, out, err = run(server, capsys, "--quiet", "2+2?")
    warning = one_line(err)
    assert (code, out) == (0, "4\n") and warning.startswith(f"agent: warning: the run log {default_log()} cannot be "
                                                            "written (file is not a database)")
    assert f"move it away (mv {default_log()} {default_log()}.broken)" in warning
    for args in ([], ["show", "1"], ["--json"]):
        code, out, err = logs(capsys, *args)
        assert (code, out) == (2, "") and "file is not a database" in one_line(err) and "move it away" in err


def test_an_unwritable_log_folder_costs_one_warning_and_not_the_answer(server, workspace, capsys, monkeypatch):
    (workspace / "a-file").write_text("")
    monkeypatch.setenv("AGENT_LOGS_DIR", str(workspace / "a-file" / "logs"))
    server.replies(action("calculator", expression="6*7"), action(answer="42"))
    code, out, err = run(server, capsys, "--quiet", "6*7?")
    assert (code, out) == (0, "42\n") and "Not a directory" in one_line(err) and "AGENT_LOGS_DIR" in err


def test_a_log_failure_in_chat_is_said_once_and_every_turn_is_answered(server, workspace):
    (workspace / "a-file").write_text("")
    server.replies(action(answer="one"), action(answer="two"))
    done = subprocess.run([sys.executable, "-m", "agent", "chat", "--base-url", server.url, "-m", "m", "--quiet"],
                          input="first\nsecond\n", capture_output=True, text=True, cwd=workspace, timeout=60,
                          env=child_env(AGENT_LOGS_DIR=str(workspace / "a-file")))
    assert (done.returncode, done.stdout) == (0, "one\ntwo\n") and done.stderr.count("agent: warning:") == 1


def test_each_chat_turn_is_a_run_of_its_own_with_its_session(server, workspace):
    server.replies(action(answer="hello"), action("calculator", expression="6*7"), action(answer="42"))
    done = subprocess.run([sys.executable, "-m", "agent", "chat", "--base-url", server.url, "-m", "m", "--quiet"],
                          input="hi\n/save talk\nWhat is 6*7?\n", capture_output=True, text=True, cwd=workspace,
                          env=child_env(), timeout=60)
    assert (done.returncode, done.stdout) == (0, "hello\n42\n")
    runs = recent(default_log(), 5)
    assert [(r["task"], r["answer"], r["session"], r["steps"]) for r in runs] == [("What is 6*7?", "42", "talk", 1),
                                                                                ("hi", "hello", None, 0)]


def test_an_interrupted_run_is_logged_as_interrupted(server, workspace):
    server.reply(action("calculator", expression="1+1"))
    server.reply(action(answer="2"), delay=30)
    child = subprocess.Popen([sys.executable, "-m", "agent", "--base-url", server.url, "-m", "m", "1+1"],
                             cwd=workspace, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while len(server.requests) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    child.send_signal(signal.SIGINT)
    child.communicate(timeout=30)
    [logged] = recent(default_log(), 5)
    assert child.returncode == 130 and (logged["status"], logged["steps"]) == ("interrupted", 1)


def test_big_tool_output_is_logged_cut_as_the_model_saw_it(server, workspace, capsys):
    (workspace / "big.txt").write_text("x" * 900_000)
    server.replies(action("read_file", path="big.txt"), action(answer="done"))
    assert run(server, capsys, "--max-output", "1000", "Read big.txt")[0] == 0
    [result] = [e for e in one(default_log(), 1)["events"] if e["event"] == "tool_result"]
    assert len(result["result"]) < 1200 and "characters cut" in result["result"]


def test_the_log_keeps_the_newest_runs_only(tmp_path):
    path = tmp_path / "runs.db"
    log = RunLog(path, print, keep=3)
    for n in range(5):
        Agent(ScriptedModel([action(answer=str(n))]), builtin_registry(str(tmp_path)), emit=log).run(f"task {n}")
    assert [(r["id"], r["answer"]) for r in recent(path, 10)] == [(5, "4"), (4, "3"), (3, "2")]
    with sqlite3.connect(path) as db:
        assert {run_id for (run_id,) in db.execute("SELECT run_id FROM events")} == {3, 4, 5}


def test_tools_reporting_from_threads_at_once_are_all_logged(tmp_path):
    path = tmp_path / "runs.db"
    log = RunLog(path, print)
    log("run_start", task="t")
    threads = [threading.Thread(target=lambda n=n: [log("tool_result", n=n, i=i) for i in range(40)])
               for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    log("run_end", status="final", answer="a")
    events = one(path, 1)["events"]
    assert len(events) == 2 + 8 * 40 and events[-1]["event"] == "run_end"


@pytest.mark.parametrize("args", [["show"], ["show", "x"], ["rm", "1"], ["show", "1", "2"]])
def test_agent_logs_refuses_odd_words_in_one_line(capsys, args):
    with pytest.raises(SystemExit) as exit:
        main(["logs", *args])
    assert exit.value.code == 2 and "agent logs show ID" in one_line(capsys.readouterr().err)


def test_agent_logs_show_of_a_run_not_kept_is_a_usage_error(server, workspace, capsys):
    server.reply(action(answer="4"))
    run(server, capsys, "2+2?")
    for number in ("7", "9" * 40):
        code, out, err = logs(capsys, "show", number)
        assert (code, out) == (2, "") and one_line(err).startswith(f"agent: no run {number} in the run log")


# --- the trace: run_start, ISO times, no overwriting without --force ------------------------------------------


def test_run_start_says_the_model_the_endpoint_without_secrets_and_the_times_are_iso(server, workspace, capsys):
    server.reply(action(answer="4"))
    address = server.url.replace("http://", "http://user:sk-secret-1@")
    code = main(["--base-url", address, "-m", "m", "--api-key", "sk-secret-3", "--temperature", "0",
                 "--constrain", "--trace", "t.jsonl", "2+2?"])
    capsys.readouterr()
    events = [json.loads(line) for line in (workspace / "t.jsonl").read_text().splitlines()]
    start = events[0]
    assert code == 0 and start["event"] == "run_start"
    assert (start["model"], start["base_url"], start["temperature"], start["constrained"]) == ("m", server.url, 0,
                                                                                             True)
    assert all(is_iso(e["time"]) for e in events)
    for stored in (workspace / "t.jsonl", default_log()):
        assert b"sk-secret" not in stored.read_bytes()
    assert url_without_secrets("https://me:sk-4@example.com:8443/v1?key=sk-5#x") == "https://example.com:8443/v1"


def test_an_existing_trace_file_is_kept_unless_force(server, workspace, capsys):
    (workspace / "t.jsonl").write_text("precious\n")
    code, out, err = run(server, capsys, "--trace", "t.jsonl", "2+2?")
    assert (code, out, server.requests) == (2, "", []) and (workspace / "t.jsonl").read_text() == "precious\n"
    assert one_line(err) == ("agent: --trace 't.jsonl': the file exists already; pass --force to overwrite it, or "
                             "choose another name")
    server.reply(action(answer="4"))
    assert run(server, capsys, "--trace", "t.jsonl", "--force", "2+2?")[0] == 0
    assert json.loads((workspace / "t.jsonl").read_text().splitlines()[0])["event"] == "run_start"
    server.reply(action(answer="4"))
    assert run(server, capsys, "--trace", os.devnull, "2+2?")[0] == 0  # a device is written, not replaced


def test_chat_and_eval_keep_existing_files_unless_force(server, workspace, capsys):
    (workspace / "t.jsonl").write_text("precious\n")
    assert main(["chat", "--trace", "t.jsonl", "--base-url", server.url, "-m", "m"]) == 2
    assert "pass --force" in one_line(capsys.readouterr().err)
    assert main(["eval", "--out", "t.jsonl", "--base-url", server.url, "-m", "m"]) == 2
    assert "pass --force" in one_line(capsys.readouterr().err)
    assert (workspace / "t.jsonl").read_text() == "precious\n" and server.requests == []


def test_a_native_run_and_a_helper_show_in_the_transcript(server, workspace, capsys):
    server.reply(tool_calls=[{"id": "c1", "name": "spawn_agent", "arguments": {"task": "compute 6*7"}}])
    server.reply(tool_calls=[{"id": "c2", "name": "calculator", "arguments": {"expression": "6*7"}}])
    server.reply("It is 42.")  # the helper's answer
    server.reply("The helper says 42.")
    code, out, err = run(server, capsys, "--protocol", "native", "--tools", "spawn_agent,calculator", "6*7?")
    assert (code, out) == (0, "The helper says 42.\n")
    shown = logs(capsys, "show", "1")[1]
    assert '"name": "spawn_agent"' in shown and "(native protocol, temperature not set, not constrained)" in shown
    assert '[helper 1] calculator(expression="6*7") → ok\n      42\n' in shown
    assert re.search(r"\d  (\[helper 1\] )?calls ", shown) is None  # a call shows with its result
    assert 'spawn_agent(task="compute 6*7") → ok\n      It is 42.\n' in shown


def test_a_lone_surrogate_and_escape_sequences_are_logged_safely(server, workspace, capsys):
    server.reply(action(answer="half \ud800 and \x1b[2J clear"))
    code, out, err = run(server, capsys, "--quiet", "task \x1b[31m red")
    assert code == 0 and "warning" not in err
    [logged] = recent(default_log(), 5)
    assert logged["answer"] == "half \ufffd and \x1b[2J clear" and logged["task"] == "task \x1b[31m red"
    listed = logs(capsys)[1]
    assert "task \x1b[31m red" in listed  # a pipe gets the text unchanged, as `agent` prints an answer
