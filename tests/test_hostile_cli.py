"""What a hostile model, file, environment or user can throw at the `agent` command, and how each ends.

Cleanly means: the documented exit code, one line on stderr that says what to do, no traceback, a complete
trace (every line JSON, `run_end` last).
"""
import importlib.util
import json
import os
import pty
import resource
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from agent import Agent, ScriptedModel, Settings
from agent.cli import main
from agent.protocols import PromptProtocol
from agent.trace import Trace
from tests.support import action, child_env
from agent.tools import Registry

def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def trace_events(path: Path) -> list[dict]:
    events = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert events[-1]["event"] == "run_end"
    return events


# --- configuration mistakes: exit 2 before any request ------------------------------------------------

@pytest.mark.parametrize("args, expected", [
    (["--base-url", "ftp://127.0.0.1/v1"], "not an http:// or https:// URL"),
    (["--base-url", "127.0.0.1:8080"], "not an http:// or https:// URL"),
    (["--base-url", "http://"], "not an http:// or https:// URL"),
    (["--base-url", "http://host:port/v1"], "not an http:// or https:// URL"),
    (["--timeout", "inf"], "--timeout: must be a number of seconds"),
    (["--timeout", "nan"], "--timeout: must be a number of seconds"),
    (["--temperature", "nan"], "--temperature: must be a number from 0 to 2"),
    (["--temperature", "-1"], "--temperature: must be a number from 0 to 2"),
    (["--workspace", ""], "--workspace: must name a folder"),
    (["--trace", ""], "is not a file name"),
    (["--trace", "."], "is not a file name"),
    (["--api-key", "sk-\u00e9"], "an HTTP header cannot carry"),
    (["--api-key", "sk-a b"], "an HTTP header cannot carry"),
    (["--max-steps", "1e3"], "--max-steps: invalid"),
])
def test_bad_flags_are_usage_errors_before_any_request(server, workspace, capsys, args, expected):
    try:
        code = main(["--base-url", server.url, "--model", "m", *args, "task"])
    except SystemExit as exit:  # argparse's own way out
        code = exit.code
    err = capsys.readouterr().err
    assert code == 2 and server.requests == []
    assert expected in err and "Traceback" not in err


@pytest.mark.parametrize("name, value", [("AGENT_BASE_URL", "file:///etc/passwd"),
                                         ("OPENAI_BASE_URL", "localhost:11434")])
def test_a_bad_base_url_from_the_environment_names_its_source(workspace, capsys, monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    assert main(["--model", "m", "task"]) == 2
    line = one_line(capsys.readouterr().err)
    assert repr(value) in line and "the environment" in line and "--base-url" in line


def test_dotenv_never_beats_the_process_environment_across_families(server, workspace, capsys, monkeypatch):
    (workspace / ".env").write_text("AGENT_BASE_URL=http://127.0.0.1:9/v1\nAGENT_MODEL=from-dotenv\n")
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    server.reply(action(answer="ok"))
    assert main(["--quiet", "task"]) == 0
    assert server.requests[0]["body"]["model"] == "from-dotenv"  # .env still fills what the environment lacks
    assert "AGENT_BASE_URL" not in os.environ  # read, never loaded into the process


def test_a_key_from_the_environment_never_goes_to_a_base_url_from_dotenv(server, workspace, capsys, monkeypatch):
    (workspace / ".env").write_text(f"AGENT_BASE_URL={server.url}\nAGENT_MODEL=m\n")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-real-secret")
    server.reply(action(answer="ok"))
    assert main(["task"]) == 0
    err = capsys.readouterr().err
    assert "sk-real-secret" not in json.dumps(server.requests[0]["headers"])
    assert "not sent to" in err and "./.env" in err


def test_a_dotenv_that_chooses_the_endpoint_says_so_once(server, workspace, capsys):
    (workspace / ".env").write_text(f"AGENT_BASE_URL={server.url}\nAGENT_MODEL=m\n")
    server.reply(action(answer="ok"))
    assert main(["--quiet", "task"]) == 0
    line = one_line(capsys.readouterr().err)
    assert line == (f"agent: note: the endpoint {server.url} is chosen by AGENT_BASE_URL in ./.env, a file of this "
                    "folder that may have come with a cloned repository: the task and what the tools read go there; "
                    "pass --base-url or --local to choose")
    server.reply(action(answer="ok"))
    assert main(["--quiet", "--base-url", server.url, "task"]) == 0  # a flag chose it: nothing to say
    assert capsys.readouterr().err == ""


def test_a_dotenv_cannot_copy_your_key_beside_its_base_url(server, workspace, capsys, monkeypatch):
    (workspace / ".env").write_text(f"AGENT_BASE_URL={server.url}\nAGENT_MODEL=m\nAGENT_API_KEY=${{OPENAI_API_KEY}}\n"
                                    "OPENAI_BASE_URL=${AGENT_BASE_URL}\n")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-real-secret")
    server.reply(action(answer="ok"))
    assert main(["--quiet", "task"]) == 0
    assert "sk-real-secret" not in json.dumps(server.requests[0]["headers"])
    assert server.requests[0]["headers"]["authorization"] == "Bearer ${OPENAI_API_KEY}"  # the text, not expanded


@pytest.mark.parametrize("kind", ["huge", "fifo", "folder"])
def test_a_dotenv_that_is_no_settings_file_ends_cleanly(server, workspace, capsys, kind):
    path = workspace / ".env"
    if kind == "huge":
        path.write_text("# padding\n" * 200_000)
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    server.reply(action(answer="ok"))
    code = main(["--quiet", "--base-url", server.url, "--model", "m", "task"])
    err = capsys.readouterr().err
    if kind == "huge":
        assert code == 2 and one_line(err) == f"agent: {path} is larger than 1,000,000 bytes, which is no settings " \
                                              "file; fix or remove it" and server.requests == []
    else:  # not read (a FIFO would wait for a writer)
        assert code == 0 and err == ""


def test_a_dotenv_chooses_neither_the_model_file_nor_the_cache_folder(workspace, capsys, monkeypatch):
    """A cloned repository's ./.env may not pick the GGUF file llama.cpp loads, nor where the model is assembled;
    the environment may (checked before llama-cpp-python is needed)."""
    if importlib.util.find_spec("llama_cpp"):
        pytest.skip("with the local extra installed, this would load the embedded model")
    (workspace / ".env").write_text(f"AGENT_MODEL_PATH={workspace / 'theirs.gguf'}\n"
                                    f"AGENT_CACHE_DIR={workspace / 'their-cache'}\n")
    assert main(["--local", "task"]) == 2
    assert "needs llama-cpp-python" in one_line(capsys.readouterr().err)
    monkeypatch.setenv("AGENT_MODEL_PATH", str(workspace / "yours.gguf"))
    assert main(["--local", "task"]) == 2
    assert "yours.gguf' does not exist" in one_line(capsys.readouterr().err)
    assert sorted(p.name for p in workspace.iterdir()) == [".env"]


def test_a_key_beside_its_base_url_is_sent(server, workspace, capsys, monkeypatch):
    (workspace / ".env").write_text("AGENT_API_KEY=sk-from-dotenv\nAGENT_MODEL=m\n")
    monkeypatch.setenv("AGENT_BASE_URL", server.url)
    server.reply(action(answer="ok"))
    assert main(["--quiet", "task"]) == 0
    assert server.requests[0]["headers"]["authorization"] == "Bearer sk-from-dotenv"


def test_eval_out_naming_a_folder_is_refused_before_anything_runs(server, workspace, capsys):
    (workspace / "results").mkdir()
    code = main(["eval", "--out", "results", "--base-url", server.url, "--model", "m"])
    line = one_line(capsys.readouterr().err)
    assert code == 2 and server.requests == [] and "is a folder" in line


def test_an_empty_task_is_a_usage_error(server, workspace, capsys):
    code = main(["--base-url", server.url, "--model", "m", "  "])
    line = one_line(capsys.readouterr().err)
    assert code == 2 and server.requests == [] and line.startswith("agent: no task; say what the agent should do")


@pytest.mark.parametrize("args, expected", [
    (["--out", ""], "--out is empty"),
    (["--repeat", "1000000000"], "--repeat: must be at most 1000"),
    (["--workers", "100000"], "--workers: must be at most 64"),
])
def test_eval_limits_and_empty_names_are_refused(server, workspace, capsys, args, expected):
    try:
        code = main(["eval", *args, "--base-url", server.url, "--model", "m"])
    except SystemExit as exit:
        code = exit.code
    err = capsys.readouterr().err
    assert code == 2 and server.requests == [] and expected in err and "Traceback" not in err


def test_eval_tasks_naming_nothing_is_refused(server, workspace, capsys):
    code = main(["eval", "--tasks", ",", "--base-url", server.url, "--model", "m"])
    line = one_line(capsys.readouterr().err)
    assert code == 2 and server.requests == [] and "names no task" in line


@pytest.mark.parametrize("line, expected", [
    ("[" * 100_000, "nested too deeply"),
    ('{"id": "a", "task": "t", "checks": {"answer_number": NaN}}', "NaN is not a JSON number"),
    ('{"id": "a", "task": "t", "checks": {"answer_number": 1e999}}', "too large"),
    ('{"id": "a", "task": "t", "checks": {"answer_number": -Infinity}}', "-Infinity is not a JSON number"),
    ('{"id": "a", "task": "t", "checks": {"answer_number": 1' + "0" * 5000 + "}}", "too long"),
])
def test_hostile_suite_lines_are_usage_errors(server, workspace, capsys, line, expected):
    (workspace / "suite.jsonl").write_text(line + "\n")
    code = main(["eval", "suite.jsonl", "--base-url", server.url, "--model", "m"])
    text = one_line(capsys.readouterr().err)
    assert code == 2 and server.requests == [] and "line 1" in text and expected in text


# --- the shell's read-only commands: nothing written, nothing read outside the workspace -----------------

@pytest.mark.parametrize("flags", [["--read-only"], []])  # without --read-only: no terminal to ask either
def test_read_only_shell_commands_neither_write_nor_read_outside_the_workspace(server, workspace, tmp_path_factory,
                                                                               flags):
    outside = tmp_path_factory.mktemp("outside")
    (outside / "secret.txt").write_text("the secret outside")
    (workspace / "-xx").symlink_to(outside)
    (workspace / "empty").mkdir()
    (workspace / "victim.txt").write_text("keep me\n")
    (workspace / "in.txt").write_text("a\n")
    commands = ["uniq - victim.txt", "uniq -- in.txt -victim", "cat -- -xx/secret.txt", "uniq -- in.txt -xx/out.txt",
                "diff -rN . empty", "wc -c -- -xx/secret.txt victim.txt"]
    for command in commands:
        server.reply(action("run_shell", command=command))
    server.reply(action(answer="done"))
    done = subprocess.run([sys.executable, "-m", "agent", "--base-url", server.url, "--model", "m", *flags, "task"],
                          cwd=workspace, env=child_env(), capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL, start_new_session=True)
    assert (done.returncode, done.stdout) == (0, "done\n") and "Traceback" not in done.stderr
    assert (workspace / "victim.txt").read_text() == "keep me\n" and not (workspace / "-victim").exists()
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    sent = json.dumps([r["body"] for r in server.requests])
    assert "the secret outside" not in sent and "< keep me" in sent  # diff ran, on the workspace's own files
    last = json.dumps(server.requests[-1]["body"]["messages"])
    assert last.count("was not run" if flags else "the user declined") == 5


@pytest.mark.parametrize("path", ["/dev/zero", "fifo"])
def test_a_suite_that_is_a_device_or_a_fifo_is_a_usage_error_at_once(server, workspace, path):
    if path == "fifo":
        os.mkfifo(workspace / "fifo")

    def small_memory():
        resource.setrlimit(resource.RLIMIT_AS, (2 * 2**30, 2 * 2**30))

    done = subprocess.run([sys.executable, "-m", "agent", "eval", path, "--list"], cwd=workspace, env=child_env(),
                          capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL, preexec_fn=small_memory)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"agent: suite {path!r} is not a regular file (a folder, a device or a FIFO); pass a JSONL " \
                          "file\n"


# --- odd text from the model: lone surrogates, escape sequences ---------------------------------------

LONE = '{"type": "final", "answer": "broken \\ud800 text"}'


@pytest.mark.parametrize("flags", [[], ["--json"], ["--quiet"]])
def test_a_lone_surrogate_in_the_answer_prints_and_traces(server, workspace, capsys, flags):
    server.reply(LONE)
    code = main(["--base-url", server.url, "--model", "m", "--trace", "t.jsonl", *flags, "task"])
    out, err = capsys.readouterr()
    assert code == 0 and "broken \ufffd text" in (json.loads(out)["answer"] if flags == ["--json"] else out)
    assert trace_events(workspace / "t.jsonl")[-2] == {**trace_events(workspace / "t.jsonl")[-2],
                                                       "answer": "broken \ufffd text"}


def test_a_lone_surrogate_in_arguments_does_not_break_the_next_request(server, workspace, capsys):
    server.reply('{"type": "tool_call", "tool": "write_file", "arguments": {"path": "a\\udc80.txt", "content": "x"}}')
    server.reply(action(answer="done"))
    code = main(["--base-url", server.url, "--model", "m", "--quiet", "task"])
    out, err = capsys.readouterr()
    assert (code, out) == (0, "done\n") and len(server.requests) == 2
    assert "\ufffd" in json.dumps(server.requests[1]["body"]["messages"], ensure_ascii=False)


def test_escape_sequences_in_progress_lines_are_neutralised(server, workspace, capsys):
    server.reply(action("calculator", expression="\x1b[2J\x1b]0;pwned\x07 1+1"))
    server.reply(action(answer="2"))
    code = main(["--base-url", server.url, "--model", "m", "task"])
    err = capsys.readouterr().err
    assert code == 0 and "\x1b" not in err and "\x07" not in err and "\\x1b[2J" in err


def test_escape_sequences_in_the_answer_are_neutralised_on_a_terminal(server, workspace):
    server.reply(action(answer="clear\x1b[2J\x1b]8;;http://evil\x07link"))
    primary, secondary = pty.openpty()
    child = subprocess.run([sys.executable, "-m", "agent", "--base-url", server.url, "--model", "m", "--quiet",
                            "task"], stdout=secondary, stderr=subprocess.PIPE, cwd=workspace, env=child_env(),
                           timeout=60)
    os.close(secondary)
    shown = os.read(primary, 4096).decode()
    os.close(primary)
    assert child.returncode == 0 and "\x1b" not in shown and "\x07" not in shown
    assert "clear\\x1b[2J\\x1b]8;;http://evil\\x07link" in shown


def test_the_answer_goes_unchanged_to_a_pipe(server, workspace, capsys):
    server.reply(action(answer="red \x1b[31mtext\x1b[0m"))
    assert main(["--base-url", server.url, "--model", "m", "--quiet", "task"]) == 0
    assert capsys.readouterr().out == "red \x1b[31mtext\x1b[0m\n"


# --- the trace: a write that fails mid-run, a crash ---------------------------------------------------

@pytest.mark.parametrize("room", [900, 1800])  # fails mid-run; fails at the last event, after the answer
def test_a_trace_that_cannot_be_written_ends_the_run_cleanly(server, workspace, room):
    server.reply(action("calculator", expression="1+1"))
    server.reply(action("calculator", expression="2+2"))
    server.reply(action(answer="4"))

    def small_files():  # the file system refuses writes past `room` bytes, as a full disk would
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (room, room))

    child = subprocess.run([sys.executable, "-m", "agent", "--base-url", server.url, "--model", "m",
                            "--trace", "t.jsonl", "task"], capture_output=True, text=True, cwd=workspace,
                           env=child_env(), timeout=60, preexec_fn=small_files)
    assert child.returncode == 4 and child.stdout in ("", "4\n")  # an answer already given is not lost
    assert "agent: error: cannot write the trace file t.jsonl" in child.stderr and "Traceback" not in child.stderr
    assert len(server.requests) == (3 if child.stdout else len(server.requests))
    lines = (workspace / "t.jsonl").read_text().splitlines()
    assert lines and all(json.loads(line) for line in lines[:-1])  # what was written is whole


def test_a_trace_on_a_full_disk_is_refused_at_the_first_event(server, workspace, capsys):
    code = main(["--base-url", server.url, "--model", "m", "--trace", "/dev/full", "task"])
    out, err = capsys.readouterr()
    assert (code, out) == (4, "") and "cannot write the trace file /dev/full" in err and server.requests == []


def test_a_crash_records_why_in_run_end(tmp_path):
    registry = Registry()
    model = ScriptedModel([RuntimeError("boom")])
    path = tmp_path / "t.jsonl"
    with Trace(path) as trace:
        result = Agent(model, registry, PromptProtocol(registry), emit=trace).run("task")
    end = trace_events(path)[-1]
    assert (result.status, end["status"]) == ("error", "error") and end["error"] == "internal error: RuntimeError: boom"


# --- Ctrl-C --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("delay", [0.15, 0.3, 0.6])
def test_ctrl_c_during_start_up_prints_no_traceback(server, workspace, delay):
    server.reply(action(answer="late"), delay=30)
    child = subprocess.Popen([sys.executable, "-m", "agent", "--base-url", server.url, "--model", "m", "task"],
                             cwd=workspace, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(delay)
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=30)
    assert child.returncode in (130, -signal.SIGINT) and "Traceback" not in err and out == ""


def test_ctrl_c_during_a_batch_of_tools_stops_waiting_at_once():
    registry, release, finished = Registry(), threading.Event(), threading.Event()

    @registry.tool
    def slow(n: int) -> str:
        """Wait until released."""
        release.wait(30)
        finished.set()
        return "done"

    batch = json.dumps([{"type": "tool_call", "tool": "slow", "arguments": {"n": n}} for n in (1, 2)])
    agent = Agent(ScriptedModel([batch]), registry, PromptProtocol(registry), Settings())
    threading.Timer(0.3, os.kill, [os.getpid(), signal.SIGINT]).start()
    try:
        result = agent.run("wait")
        still_running = not finished.is_set()
    finally:
        release.set()
    assert result.status == "interrupted" and still_running


def test_ctrl_c_during_the_sdks_import_is_not_swallowed():
    """The SDK's import is where a KeyboardInterrupt was once swallowed (pydantic: 'Exception ignored in ...',
    and the run went on): Ctrl-C pressed during it arrives once the import is done."""
    script = ("import os, signal, threading, sys\n"
              "from agent.cli.setup import interrupts_deferred\n"
              "def pressed(): os.kill(os.getpid(), signal.SIGINT)\n"
              "try:\n"
              "    with interrupts_deferred():\n"
              "        pressed()\n"
              "        import openai\n"
              "    print('went on')\n"
              "except KeyboardInterrupt:\n"
              "    print('interrupted after the import:', 'openai' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=child_env(), timeout=60)
    assert done.stdout == "interrupted after the import: True\n" and "Traceback" not in done.stderr
