"""Real work from the command line: a shell with the user's approval, a choice of tools, a plan, a memory file."""
import json
import os
import pty
import re
import resource
import select
import subprocess
import sys
import time

import pytest

from agent.cli import main
from tests.support import action, child_env
from tests.test_shell import gone


def run(server, *args, capsys):
    code = main(["--base-url", server.url, "--model", "m", "--timeout", "5", *args])
    out, err = capsys.readouterr()
    return code, out, err


def agent(server, *args, cwd, **options):
    """`agent` in a child process with no terminal at all (its own session), so nothing can ask the user."""
    return subprocess.run([sys.executable, "-m", "agent", "--base-url", server.url, "-m", "m", *args], cwd=cwd,
                          env=child_env(), capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
                          start_new_session=True, **options)


def on_terminal(server, *args, answers, cwd) -> tuple[int, str, str]:
    """`agent` with a pseudo-terminal as its standard input and error, typing the next answer at each question;
    its exit code, stdout, and everything the terminal showed."""
    leader, follower = pty.openpty()
    child = subprocess.Popen([sys.executable, "-m", "agent", "--base-url", server.url, "-m", "m", *args],
                             stdin=follower, stdout=subprocess.PIPE, stderr=follower, env=child_env(), cwd=cwd,
                             start_new_session=True)
    os.close(follower)
    shown, answers, deadline = b"", list(answers), time.monotonic() + 60
    while time.monotonic() < deadline:
        if not select.select([leader], [], [], 0.1)[0]:
            if child.poll() is not None:
                break
            continue
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the child has gone, and the terminal with it
            break
        shown += chunk
        if shown.count(b"[y/N] ") > 0 and answers and shown.rstrip().endswith(b"[y/N]"):
            os.write(leader, answers.pop(0).encode() + b"\n")
    os.close(leader)
    code = child.wait(timeout=30)
    return code, child.stdout.read().decode(), shown.decode(errors="replace")


def sent_results(request) -> str:
    return "\n".join(m["content"] or "" for m in request["body"]["messages"][2:] if m["role"] in ("user", "tool"))


def system_prompt(request) -> str:
    return request["body"]["messages"][0]["content"]


def test_a_run_lists_the_files_with_run_shell(server, workspace, capsys):
    (workspace / "notes.txt").write_text("hi\n")
    (workspace / "report.py").write_text("print(1)\n")
    server.reply(action("run_shell", command="ls -la"))
    server.reply(action(answer="There are two files: notes.txt and report.py."))
    code, out, err = run(server, "Which files are here?", capsys=capsys)
    assert (code, out) == (0, "There are two files: notes.txt and report.py.\n")
    listing = sent_results(server.requests[1])
    assert "notes.txt" in listing and "report.py" in listing and listing.endswith("(exit code 0)\n")
    assert "  run_shell(command=ls -la) → total " in err
    prompt = system_prompt(server.requests[0])
    assert "run_shell(command: string)" in prompt and "Use run_shell for what the file tools cannot do" in prompt


def test_on_a_terminal_the_user_approves_one_command_and_declines_another(server, workspace):
    (workspace / "notes.txt").write_text("keep me\n")
    server.reply(action("run_shell", command="touch made.txt"))
    server.reply(action("run_shell", command="rm notes.txt"))
    server.reply(action(answer="Made made.txt; notes.txt stays."))
    code, out, shown = on_terminal(server, "Make made.txt, remove notes.txt", answers=["y", "n"], cwd=workspace)
    assert (code, out) == (0, "Made made.txt; notes.txt stays.\n")
    assert "agent: allow run_shell to run `touch made.txt` (not a read-only command)? [y/N] y" in shown
    assert "agent: allow run_shell to run `rm notes.txt` (not a read-only command)? [y/N] n" in shown
    assert (workspace / "made.txt").exists() and (workspace / "notes.txt").read_text() == "keep me\n"
    assert "(no output; exit code 0)" in sent_results(server.requests[1])
    assert "error: the user declined to run 'rm notes.txt'; try another way" in sent_results(server.requests[2])


def test_without_a_terminal_or_yes_a_command_is_refused_and_the_user_told_how_to_approve(server, workspace):
    server.reply(action("run_shell", command="touch made.txt"))
    server.reply(action(answer="I could not."))
    done = agent(server, "Make made.txt", cwd=workspace)
    assert done.returncode == 0 and not (workspace / "made.txt").exists()
    assert ("agent: refused, with no terminal to ask: run_shell to run `touch made.txt` (not a read-only command) "
            "(pass --yes to approve everything)") in done.stderr
    assert "error: the user declined to run 'touch made.txt'" in sent_results(server.requests[1])


def test_yes_approves_everything_and_a_timed_out_command_leaves_nothing_running(server, workspace):
    server.reply(action("run_shell", command="touch made.txt"))
    server.reply(action("run_shell", command="sh -c 'echo $$; sleep 100 & echo $!; sleep 100'"))
    server.reply(action(answer="done"))
    started = time.monotonic()
    done = agent(server, "--yes", "--shell-timeout", "1", "go", cwd=workspace)
    assert done.returncode == 0 and (workspace / "made.txt").exists() and time.monotonic() - started < 30
    stopped = sent_results(server.requests[2])
    assert "error: the command took longer than 1 s and was stopped, with everything it started" in stopped
    pids = [int(n) for n in re.findall(r"^\d+$", stopped, re.M)]
    assert len(pids) == 2 and gone(pids)


def test_replacing_a_file_asks_first(server, workspace):
    (workspace / "notes.txt").write_text("old\n")
    server.reply(action("write_file", path="notes.txt", content="new"))
    server.reply(action("write_file", path="other.txt", content="new"))
    server.reply(action(answer="done"))
    done = agent(server, "rewrite notes.txt", cwd=workspace)
    assert done.returncode == 0 and (workspace / "notes.txt").read_text() == "old\n"
    assert "no terminal to ask: write_file to replace notes.txt (4 bytes) with 3 characters" in done.stderr
    assert "error: the user declined to replace notes.txt" in sent_results(server.requests[1])
    assert (workspace / "other.txt").read_text() == "new"  # a new file is written without asking
    server.reply(action("write_file", path="notes.txt", content="new"))
    server.reply(action(answer="done"))
    code, _, shown = on_terminal(server, "rewrite notes.txt", answers=["y"], cwd=workspace)
    assert code == 0 and "allow write_file to replace notes.txt (4 bytes) with 3 characters? [y/N] y" in shown
    assert (workspace / "notes.txt").read_text() == "new"


@pytest.mark.parametrize("protocol", ["prompt", "native"])
def test_tools_chooses_what_the_model_is_offered(server, workspace, capsys, protocol):
    server.reply(action("write_file", path="x.txt", content="x") if protocol == "prompt" else None,
                 tool_calls=[{"name": "write_file", "arguments": {"path": "x.txt", "content": "x"}}]
                 if protocol == "native" else None)
    server.reply(action(answer="4") if protocol == "prompt" else "4")
    code, _, _ = run(server, "--protocol", protocol, "--tools", "calculator, read_file", "2+2", capsys=capsys)
    assert code == 0 and not (workspace / "x.txt").exists()
    first = server.requests[0]["body"]
    if protocol == "native":
        assert [t["function"]["name"] for t in first["tools"]] == ["calculator", "read_file"]
        assert "unknown tool 'write_file'; available tools: calculator, read_file" in sent_results(server.requests[1])
    else:
        assert "Tools (the only ones: calculator, read_file):" in system_prompt(server.requests[0])
        assert "(unknown_tool)" in server.requests[1]["body"]["messages"][-1]["content"]
    assert "run_shell" not in json.dumps(first) and "list_dir" not in system_prompt(server.requests[0])


def test_an_unknown_tool_name_is_a_usage_error_that_lists_the_tools(server, workspace, capsys):
    code, out, err = run(server, "--tools", "calculator,shell", "x", capsys=capsys)
    assert (code, out, server.requests) == (2, "", [])
    assert err == ("agent: --tools: no tool named shell (did you mean run_shell?); the tools are calculator, "
                   "read_file, write_file, list_dir, current_time, run_shell, todo_write, spawn_agent, remember\n")
    for args, expected in [(["--tools", "remember"], "--tools remember needs --memory FILE"),
                           (["--read-only", "--tools", "read_file,write_file"], "drop one of them")]:
        code, _, err = run(server, *args, "x", capsys=capsys)
        assert code == 2 and expected in err
    with pytest.raises(SystemExit) as usage:
        run(server, "--tools", " , ", "x", capsys=capsys)
    assert usage.value.code == 2 and "--tools: names no tool" in capsys.readouterr().err


def test_read_only_offers_nothing_that_writes_and_runs_read_only_commands_only(server, workspace):
    (workspace / "notes.txt").write_text("keep\n")
    server.reply(action("run_shell", command="rm notes.txt"))
    server.reply(action("run_shell", command="wc -l notes.txt"))
    server.reply(action(answer="1 line"))
    done = agent(server, "--read-only", "count the lines", cwd=workspace)
    assert done.returncode == 0 and (workspace / "notes.txt").exists() and "refused" not in done.stderr
    prompt = system_prompt(server.requests[0])
    assert "write_file" not in prompt and "remember" not in prompt and "no other command runs" in prompt
    assert "'rm notes.txt' was not run: not a read-only command" in sent_results(server.requests[1])
    assert "1 notes.txt" in sent_results(server.requests[2])


def test_agent_tools_shows_what_is_on_and_what_asks_first(capsys, workspace):
    assert main(["tools"]) == 0
    out = capsys.readouterr().out
    assert "on: calculator, read_file, write_file, list_dir, current_time, run_shell, todo_write" in out
    assert "off: spawn_agent (not in --tools), remember (needs --memory FILE)" in out
    assert "  write_file, before replacing a file\n  run_shell, before a command that" in out
    assert main(["tools", "--read-only", "--memory", "memory.md"]) == 0
    out = capsys.readouterr().out
    assert "off: write_file (--read-only), spawn_agent (not in --tools), remember (--read-only)" in out
    assert "asks first" not in out
    assert main(["tools", "--json", "--tools", "todo_write,run_shell"]) == 0
    assert [t["function"]["name"] for t in json.loads(capsys.readouterr().out)] == ["run_shell", "todo_write"]
    assert main(["--tools", "calculator", "tools", "--yes"]) == 0  # an option's value is not a command
    assert "on: calculator (choose with --tools)" in capsys.readouterr().out


def plan(*statuses: str) -> str:
    steps = ["find the Python files of this folder and of every folder below it, with find",
             "count the lines of each of them, reading them one by one",
             "write the report, the total and the count per file, to report.txt"]
    return action("todo_write", todos=[{"content": s, "status": st} for s, st in zip(steps, statuses)])


def test_a_multi_step_run_keeps_its_plan_up_to_date_through_compaction(server, workspace, capsys):
    for name in ("a.py", "b.py"):
        (workspace / name).write_text("x = 1\n" * 300)
    server.reply(plan("in_progress", "pending", "pending"))
    server.reply(action("run_shell", command="find . -name '*.py'"))
    server.reply(plan("completed", "in_progress", "pending"))
    server.reply(action("read_file", path="a.py"))
    server.reply(action("read_file", path="b.py"))
    server.reply(action("write_file", path="report.txt", content="600 lines"))
    server.reply(plan("completed", "completed", "completed"))
    server.reply(action(answer="600 lines, in report.txt"))
    trace = workspace / "trace.jsonl"
    code, out, err = run(server, "--max-history", "5000", "--trace", str(trace), "Count the lines of the Python "
                         "files into report.txt", capsys=capsys)
    assert (code, out) == (0, "600 lines, in report.txt\n")
    assert "  todo_write(todos=" in err and "→ Plan, 1 of 3 done:\n    [x] find the Python files of this folder " \
        "and of every folder below it, with find\n    [ ] count the lines of each of them, reading them one by one " \
        "(in progress)\n    [ ] write the report" in err
    plans = [e["todos"] for e in map(json.loads, trace.read_text().splitlines()) if e["event"] == "plan"]
    assert [[t["status"] for t in p] for p in plans] == [["in_progress", "pending", "pending"],
                                                        ["completed", "in_progress", "pending"],
                                                        ["completed", "completed", "completed"]]
    before_the_end = sent_results(server.requests[6])  # the files read and the first plan dropped, the latest kept
    assert before_the_end.count("was dropped to keep the conversation short") == 3
    assert "Plan, 1 of 3 done:\n[x] find the Python files" in before_the_end and "x = 1" not in before_the_end
    assert "Plan, 0 of 3 done" not in before_the_end
    assert "When a task needs three or more steps, first write a plan with todo_write" in \
        system_prompt(server.requests[0])


def test_a_second_run_sees_what_the_first_remembered(server, workspace, capsys):
    server.reply(action("remember", note="The budget figures are in docs/budget.txt"))
    server.reply(action(answer="Noted."))
    assert run(server, "--memory", "memory.md", "Remember where the budget is", capsys=capsys)[0] == 0
    first = system_prompt(server.requests[0])
    assert "Notes kept from earlier runs in the memory file memory.md" in first and "(none yet)" in first
    assert re.fullmatch(r"- \d{4}-\d\d-\d\d: The budget figures are in docs/budget.txt\n",
                        (workspace / "memory.md").read_text())
    server.reply(action(answer="In docs/budget.txt."))
    assert run(server, "--memory", "memory.md", "Where is the budget?", capsys=capsys)[:2] == \
        (0, "In docs/budget.txt.\n")
    assert ": The budget figures are in docs/budget.txt\n" in system_prompt(server.requests[2])
    server.reply(action(answer="?"))
    assert run(server, "Where is the budget?", capsys=capsys)[0] == 0  # without --memory: no notes, no tool
    assert "budget.txt" not in system_prompt(server.requests[3]) and "remember" not in system_prompt(server.requests[3])


@pytest.mark.parametrize("special", ["/dev/zero", "fifo", "link to /dev/zero"])
def test_a_memory_file_that_is_a_device_or_a_fifo_is_a_usage_error_at_once(server, workspace, special):
    """/dev/zero once read until memory ran out, and a FIFO waited for a writer: both end at once, in a child
    whose memory is capped."""
    if special == "fifo":
        os.mkfifo(workspace / "fifo")
    elif special.startswith("link"):
        (workspace / "link").symlink_to("/dev/zero")
    path = {"fifo": "fifo", "/dev/zero": "/dev/zero"}.get(special, "link")

    def small_memory():
        resource.setrlimit(resource.RLIMIT_AS, (2 * 2**30, 2 * 2**30))

    started = time.monotonic()
    done = agent(server, "--memory", path, "task", cwd=workspace, preexec_fn=small_memory)
    assert time.monotonic() - started < 30
    assert (done.returncode, done.stdout, server.requests) == (2, "", [])
    assert done.stderr == f"agent: --memory {path!r} is not a regular file (a device or a FIFO): its notes cannot be " \
                          "read or kept there; pass a file, like --memory memory.md\n"


def test_a_memory_file_in_a_missing_folder_or_a_folder_is_a_usage_error(server, workspace, capsys):
    (workspace / "notes").mkdir()
    for path in ("no-such-folder/memory.md", "notes"):
        code, out, err = run(server, "--memory", path, "x", capsys=capsys)
        assert (code, server.requests) == (2, []) and "--memory" in err and err.count("\n") == 1
