"""`--session NAME` and `agent sessions`: conversations saved as plain JSON after every turn, resumed by name."""
import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent.cli import main
from agent.sessions import FORMAT, Session, SessionError, Sessions
from tests.support import action, child_env


def agent(server, *args) -> int:
    return main(["--base-url", server.url, "-m", "m", "--timeout", "5", *args])


def sessions_folder() -> Path:
    return Path(os.environ["XDG_DATA_HOME"]) / "prompt-protocol-agent" / "sessions"


def test_a_session_is_resumed_by_name_and_listed(server, workspace, capsys):
    server.reply(action("calculator", expression="6*7"))
    server.reply(action(answer="42"))
    server.reply(action(answer="I asked the calculator for 6*7."))
    assert agent(server, "--quiet", "--session", "maths", "What is 6*7?") == 0
    assert agent(server, "--quiet", "--session", "maths", "How did you get it?") == 0
    assert capsys.readouterr().out == "42\nI asked the calculator for 6*7.\n"
    sent = server.requests[-1]["body"]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert sent[1]["content"] == "What is 6*7?" and "42" in sent[3]["content"] and sent[-1]["content"] == "How did you get it?"
    path = sessions_folder() / "maths.json"
    saved = json.loads(path.read_text())
    assert (saved["format"], saved["turns"], saved["model"], saved["protocol"]) == (FORMAT, 2, "m", "prompt")
    assert saved["messages"][1:] == sent[1:] + [{"role": "assistant", "content": json.dumps(
        {"type": "final", "answer": "I asked the calculator for 6*7."})}]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert main(["sessions"]) == 0
    header, row = capsys.readouterr().out.splitlines()
    assert header.split() == ["NAME", "TURNS", "LAST", "USED", "MODEL"]
    assert row.split()[:2] == ["maths", "2"] and row.split()[-1] == "m" and row.split()[2] == saved["updated"]
    assert main(["sessions", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"name": "maths", "turns": 2, "last_used": saved["updated"],
                                                    "model": "m", "protocol": "prompt"}]


def test_sessions_rm_removes_one_and_an_unknown_name_is_a_usage_error(server, workspace, capsys):
    server.reply(action(answer="hi"))
    assert agent(server, "--quiet", "--session", "short-lived", "hello") == 0
    assert main(["sessions", "rm", "short-lived"]) == 0
    assert not (sessions_folder() / "short-lived.json").exists()
    assert main(["sessions", "rm", "short-lived"]) == 2
    assert "no session named 'short-lived'; `agent sessions` lists them" in capsys.readouterr().err
    assert main(["sessions"]) == 0
    out, err = capsys.readouterr()
    assert out == "" and "no sessions in" in err


def test_a_native_session_keeps_its_tool_call_ids_and_resumes_only_in_native(server, workspace, capsys):
    server.reply(tool_calls=[{"id": "call_a", "name": "calculator", "arguments": {"expression": "2+2"}}])
    server.reply("4")
    server.reply("It was 2+2.")
    assert agent(server, "--quiet", "--protocol", "native", "--session", "n", "2+2?") == 0
    assert agent(server, "--quiet", "--session", "n", "and?") == 2
    assert "held in the native protocol; resume it with --protocol native" in capsys.readouterr().err
    assert agent(server, "--quiet", "--protocol", "native", "--session", "n", "How?") == 0
    sent = server.requests[-1]["body"]["messages"]
    assert sent[2]["tool_calls"][0]["id"] == "call_a" and sent[3] == {"role": "tool", "tool_call_id": "call_a",
                                                                      "content": "4"}


@pytest.mark.parametrize("content, expected", [
    ("{not json", "session 'bad' cannot be read: the file is not JSON"),
    ('{"messages": []}', "it has no format version"),
    (json.dumps({"format": 1, "model": "m", "protocol": "prompt", "created": "", "updated": "", "turns": 1,
                 "messages": [{"role": "wizard", "content": "hi"}]}), "messages[0].role"),
    (json.dumps({"format": FORMAT + 1, "messages": []}), "saved by a newer version of agent"),
])
def test_a_corrupt_or_newer_session_is_a_clear_error_and_never_overwritten(server, workspace, capsys, content,
                                                                           expected):
    folder = sessions_folder()
    folder.mkdir(parents=True)
    (folder / "bad.json").write_text(content)
    assert agent(server, "--session", "bad", "hello") == 2
    err = capsys.readouterr().err
    assert expected in err and err.count("\n") == 1 and server.requests == []
    assert (folder / "bad.json").read_text() == content
    assert main(["sessions"]) == 0
    assert capsys.readouterr().out.splitlines()[1].split()[:3] == ["bad", "-", "unreadable"]


@pytest.mark.parametrize("name", ["../escape", "a/b", ".hidden", "", "x" * 65])
def test_a_session_name_is_a_plain_name(server, workspace, capsys, name):
    assert agent(server, "--session", name, "hello") == 2
    assert "is not a session name" in capsys.readouterr().err and server.requests == []


def test_agent_sessions_dir_comes_from_the_environment_not_from_dotenv(server, workspace, capsys, monkeypatch):
    (workspace / ".env").write_text(f"AGENT_SESSIONS_DIR={workspace / 'from-dotenv'}\n")
    server.replies(action(answer="a"), action(answer="b"))
    assert agent(server, "--quiet", "--session", "s", "x") == 0
    assert (sessions_folder() / "s.json").is_file() and not (workspace / "from-dotenv").exists()
    monkeypatch.setenv("AGENT_SESSIONS_DIR", str(workspace / "mine"))
    assert agent(server, "--quiet", "--session", "s", "x") == 0
    assert json.loads((workspace / "mine" / "s.json").read_text())["turns"] == 1


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs /proc, where no folder can be made")
def test_a_sessions_folder_that_cannot_be_made_is_a_usage_error_before_any_request(server, workspace, capsys,
                                                                                    monkeypatch):
    monkeypatch.setenv("AGENT_SESSIONS_DIR", "/proc/self/sessions")
    assert agent(server, "--quiet", "--session", "s", "x") == 2
    assert "cannot use the sessions folder /proc/self/sessions" in capsys.readouterr().err and server.requests == []
    with pytest.raises(SessionError, match="cannot save session 's' to /proc/self/sessions/s.json"):
        Sessions("/proc/self/sessions").write(Session("s"))  # what a run that cannot save says after its answer


def test_a_session_in_use_by_another_agent_is_refused(server, workspace, capsys):
    server.reply(action(answer="quick"))
    assert agent(server, "--quiet", "--session", "busy", "w") == 0
    server.reply(action(answer="slow"), delay=30)
    env = child_env()
    first = subprocess.Popen([sys.executable, "-m", "agent", "--base-url", server.url, "-m", "m", "--session", "busy",
                              "x"], env=env, cwd=workspace, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while len(server.requests) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        for argv in (["--base-url", server.url, "-m", "m", "--session", "busy", "y"], ["sessions", "rm", "busy"]):
            done = subprocess.run([sys.executable, "-m", "agent", *argv], env=env, cwd=workspace, capture_output=True,
                                  text=True, timeout=60)
            assert done.returncode == 2 and "session 'busy' is in use by another agent" in done.stderr
        assert len(server.requests) == 2 and (sessions_folder() / "busy.json").is_file()
    finally:
        first.kill()
        first.wait()


def test_the_store_lists_the_latest_used_first(tmp_path):
    from agent.sessions import Session

    sessions = Sessions(tmp_path)
    for name in ("old", "new"):
        session = Session(name)
        session.add_turn([{"role": "user", "content": name}], model="m", protocol="prompt")
        sessions.save(session)
        session.updated = {"old": "2020-01-01T00:00:00+00:00", "new": "2030-01-01T00:00:00+00:00"}[name]
        sessions.write(session)
    assert [name for name, _ in sessions.all()] == ["new", "old"]
    assert sessions.load("old").messages == [{"role": "user", "content": "old"}]
