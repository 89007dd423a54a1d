"""run_shell: one command without a shell, read-only commands at once, everything else only when approved."""
import os
import re
import sys
import time
from pathlib import Path

import pytest

from agent.tools import Registry, shell_tool
from agent.tools.shell import READ_ONLY, without_secrets

PYTHON = sys.executable


@pytest.fixture
def ws(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.py").write_text("# TODO: one\nprint(1)\n")
    (root / "b.py").write_text("# TODO: two\n")
    (root / "notes.txt").write_text("hello\n")
    return root


class Approver:
    """Records what it was asked and answers with ``answer``."""

    def __init__(self, answer: bool):
        self.answer, self.asked = answer, []

    def __call__(self, request: str) -> bool:
        self.asked.append(request)
        return self.answer


def shell(ws, approve=None, **options):
    registry = Registry([shell_tool(ws, approve, **options)])
    return lambda command: registry.call("run_shell", {"command": command}).text


def alive(pid: int) -> bool:
    """Whether a process runs (a zombie, dead but not yet reaped by its parent, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


def gone(pids: list[int]) -> bool:
    """Whether every process is gone within a few seconds (a killed process takes a moment to die)."""
    deadline = time.monotonic() + 5
    while any(map(alive, pids)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not any(map(alive, pids))


def test_read_only_commands_run_at_once_in_the_workspace(ws):
    approve = Approver(False)
    run = shell(ws, approve)
    assert run("ls") == "a.py\nb.py\nnotes.txt\n(exit code 0)"
    assert run("pwd") == f"{ws}\n(exit code 0)"
    assert run("grep -rn TODO --include=*.py .").splitlines()[:2] == ["./a.py:1:# TODO: one", "./b.py:1:# TODO: two"]
    assert run("wc -l *.py").split() == ["2", "a.py", "1", "b.py", "3", "total", "(exit", "code", "0)"]  # expanded
    assert run("wc -l '*.py'").startswith("wc: '*.py': No such file")  # quoted ones do not
    assert run("grep -c nothing notes.txt") == "0\n(exit code 1)"
    assert run("cat empty.txt missing.txt").endswith("(exit code 1)")
    assert approve.asked == []


def test_an_empty_output_and_a_command_that_dies_say_so(ws):
    run = shell(ws, Approver(True))
    assert run("find . -name '*.md'") == "(no output; exit code 0)"
    assert run(f"{PYTHON} -c 'import os, signal; os.kill(os.getpid(), signal.SIGKILL)'") == \
        "(no output; killed by SIGKILL)"


@pytest.mark.parametrize("command, token, first", [
    ("ls | wc -l", "'|' is shell syntax (a pipe)", "ls"),
    ("ls > out.txt", "'>' is shell syntax (a redirection)", "ls"),
    ("cat < notes.txt", "'<' is shell syntax (a redirection)", "cat"),
    ("ls; rm a.py", "';' is shell syntax (a list of commands)", "ls"),
    ("ls && rm a.py", "'&&' is shell syntax (a list of commands)", "ls"),
    ("grep -l x *.py || true", "'||' is shell syntax (a list of commands)", "grep -l x *.py"),
    ("sleep 5 &", "'&' is shell syntax (a background job)", "sleep 5"),
    ("echo `id`", "'`' is shell syntax (a command substitution)", ""),
    ("echo \"$(id)\"", "'$(' is shell syntax (a command substitution)", ""),
    ("ls\nrm a.py", "'\\n' is shell syntax (a list of commands)", "ls"),
    ("(ls)", "'(' is shell syntax (a subshell)", ""),
    ("x" * 300 + " | wc", "'|' is shell syntax (a pipe)", ""),
])
def test_shell_syntax_is_refused_with_a_suggestion(ws, command, token, first):
    approve = Approver(True)
    text = shell(ws, approve)(command)
    advice = f"run `{first}` alone first" if first else "send one command at a time"
    assert text.startswith(f"error: {token}") and advice in text, text
    assert approve.asked == [] and sorted(p.name for p in ws.iterdir()) == ["a.py", "b.py", "notes.txt"]


def test_quoted_or_escaped_syntax_is_plain_text(ws):
    run = shell(ws, Approver(False))
    assert run("grep -c 'TODO|FIXME' a.py") == "0\n(exit code 1)"
    assert run("echo 'a | b; c > d' \"$\" \\$HOME '$(x)'") == "a | b; c > d $ $HOME $(x)\n(exit code 0)"
    assert run("echo $HOME").startswith("error: '$HOME' is a shell variable") and "write its value" in run("echo $X")


@pytest.mark.parametrize("command", ["", "   ", "\t\n"])
def test_an_empty_command_is_an_error(ws, command):
    assert shell(ws)(command) == "error: the command is empty; send one command, like ls -la"


def test_hostile_commands_end_in_clean_errors(ws):
    run = shell(ws, Approver(True))
    assert run("echo 'unbalanced") == "error: cannot parse the command (No closing quotation): check its quotes"
    assert run("no-such-command --flag").startswith("error: command not found: no-such-command; the read-only")
    assert run("./missing.sh").startswith("error: command not found: ./missing.sh")
    assert run("echo a\0b").startswith("error: the command contains a null byte")
    assert run("echo \ud800").startswith("error: the command contains a null byte or characters")
    assert run("x" * 10_001).startswith("error: the command is 10,001 characters long")
    (ws / "script.sh").write_text("#!/bin/sh\necho hi\n")  # not executable
    assert run("./script.sh").startswith("error: command not found: ./script.sh")


def test_huge_and_binary_output_is_cut_or_summarised(ws):
    run = shell(ws, Approver(True))
    huge = run(f"{PYTHON} -c 'print(\"x\" * 3_000_000)'")
    assert len(huge) < 1_100_000 and re.search(r"\[\.\.\. 2,000,001 bytes of output cut \.\.\.\]", huge)
    assert huge.endswith("x\n(exit code 0)")
    (ws / "blob.bin").write_bytes(bytes(range(256)) * 40)
    assert run("cat blob.bin") == "(binary output, 10,240 bytes, not shown)\n(exit code 0)"
    assert run("head -c 5 blob.bin") == "(binary output, 5 bytes, not shown)\n(exit code 0)"


def test_other_commands_run_only_when_approved(ws):
    declined = Approver(False)
    assert shell(ws, declined)("rm a.py") == \
        "error: the user declined to run 'rm a.py'; try another way, or ask the user to run it"
    assert declined.asked == ["run_shell to run `rm a.py` (not a read-only command)"] and (ws / "a.py").exists()
    approved = Approver(True)
    assert shell(ws, approved)("rm a.py") == "(no output; exit code 0)" and not (ws / "a.py").exists()


def test_without_an_approver_only_read_only_commands_run(ws):
    text = shell(ws)("touch new.txt")
    assert text.startswith("error: 'touch new.txt' was not run: not a read-only command, and this run allows only")
    assert not (ws / "new.txt").exists()


@pytest.fixture
def outside(ws):
    """A folder beside the workspace with a secret in it, and links to it from the workspace: `link` and `-xx`."""
    folder = ws.parent / "outside"
    folder.mkdir(exist_ok=True)
    (folder / "secret.txt").write_text("secret")
    (ws / "link").symlink_to(folder)
    (ws / "-xx").symlink_to(folder)
    (ws / "empty").mkdir()
    return folder


@pytest.mark.parametrize("command, reason", [
    ("cat /etc/hostname", "'/etc/hostname' is outside the workspace"),
    ("cat ../outside.txt", "'../outside.txt' is outside the workspace"),
    ("ls sub/../..", "'sub/../..' is outside the workspace"),
    ("ls ~", "is outside the workspace"),
    ("ls link/", "'link/' is outside the workspace"),
    ("cat link/secret.txt", "'link/secret.txt' is outside the workspace"),
    ("cat -- -xx/secret.txt", "'-xx/secret.txt' is outside the workspace"),  # after --, an operand
    ("head -n 3 -- -xx/secret.txt", "'-xx/secret.txt' is outside the workspace"),
    ("grep -r secret -- -xx", "'-xx' is outside the workspace"),
    ("echo link/*", "'link/*' is outside the workspace"),  # a wildcard is not expanded outside
    ("echo /etc/host*", "'/etc/host*' is outside the workspace"),
    ("wc -c l*", "'link' is outside the workspace"),  # nor used when it names a link that leads out
    ("find . -newer /etc/hostname", "'/etc/hostname' is outside the workspace"),
    ("grep -r x --exclude-from=/etc/hostname .", "grep --exclude-from can change files, run programs, read a file"),
    ("grep -f /etc/hostname a.py", "grep -f can change files, run programs, read a file it names"),
    ("find . -exec rm {} +", "find -exec can change files"),
    ("find . -delete", "find -delete can change files"),
    ("find -L . -name x", "find -L can change files, run programs, read a file it names or leave the workspace"),
    ("find . -fprint out.txt", "find -fprint can change files"),
    ("find . -xtype f", "find -xtype can change files, run programs, read a file it names or leave the workspace"),
    ("find . -printf %Y", "find -printf %Y follows links"),
    ("sort -o a.py b.py", "sort -o can change files"),
    ("sort -mo a.py b.py", "sort -o can change files"),  # in a cluster
    ("sort --output=a.py b.py", "sort --output can change files"),
    ("sort --out=a.py b.py", "sort --out is not an option run_shell knows to be read-only"),  # abbreviations ask
    ("sort -T /tmp b.py", "sort -T can change files"),
    ("grep -Rn TODO .", "grep -R can change files"),
    ("uniq a.py b.py", "uniq writes to its operand 'b.py'"),
    ("uniq - b.py", "uniq writes to its operand 'b.py'"),  # - is the (empty) standard input
    ("uniq -- a.py -b.py", "uniq writes to its operand '-b.py'"),
    ("uniq -- a.py -xx/out.txt", "uniq writes to its operand '-xx/out.txt'"),
    ("tail -f a.py", "tail -f can change files"),
    ("du -L .", "du -L can change files"),
    ("ls -L link", "ls -L can change files"),
    ("diff -l a.py b.py", "diff -l can change files, run programs"),
    ("file -z a.py", "file -z can change files, run programs"),
    ("cat --number=3 a.py", "cat --number takes no value"),
    ("cat -x a.py", "cat -x is not an option run_shell knows to be read-only"),
    ("cut --delimiter a.py fifo", "'fifo' is not a file or a folder (a FIFO"),  # a.py is the delimiter
    ("pwd -P a.py", "pwd takes no operands here"),
])
def test_read_only_commands_that_leave_the_workspace_write_or_are_not_understood_ask_first(ws, outside, command,
                                                                                          reason):
    os.mkfifo(ws / "fifo")
    approve = Approver(False)
    text = shell(ws, approve)(command)
    assert text.startswith(f"error: the user declined to run {command!r}")
    assert len(approve.asked) == 1 and approve.asked[0].startswith(f"run_shell to run `{command}` (")
    assert reason in approve.asked[0], approve.asked
    assert (ws / "a.py").exists() and (ws / "b.py").read_text() == "# TODO: two\n"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


@pytest.mark.parametrize("command, output", [
    ("head -1 a.py", "# TODO: one"),
    ("head -n1 -- a.py", "# TODO: one"),
    ("tail -n +2 a.py", "print(1)"),
    ("grep -c /etc a.py", "0"),  # the first operand is grep's pattern, not a file
    ("grep -e /etc -c a.py", "0"),
    ("grep -rn3 --include=*.py print .", "./a.py-1-# TODO: one\n./a.py:2:print(1)"),
    ("grep --color=never -h two b.py", "# TODO: two"),
    ("sort -r -k 1 -t : notes.txt a.py", "print(1)\nhello\n# TODO: one"),
    ("uniq -c notes.txt", "      1 hello"),
    ("cut -c1-3 notes.txt", "hel"),
    ("wc -l -- a.py", "2 a.py"),
    ("find . -name '*.py' -type f -newer notes.txt -o -name none -print", ""),
    ("ls -1r --sort=extension a.py notes.txt", "notes.txt\na.py"),
    ("echo ~ '*' link/x", f"{os.path.expanduser('~')} * link/x"),  # echo opens nothing: its words are text
    ("stat -c %s notes.txt", "6"),
    ("cat ~root/notes.txt", "cat: '~root/notes.txt': No such file or directory"),  # no shell: a name like any
])
def test_read_only_commands_with_options_they_are_known_to_read_with_run_at_once(ws, outside, command, output):
    approve = Approver(False)
    text = shell(ws, approve)(command)
    assert approve.asked == [] and text.rsplit("\n(", 1)[0] == output or text.startswith("(no output") and not output


def test_recursing_commands_do_not_follow_a_link_out_of_the_workspace(ws, outside):
    (outside / "secret.txt").write_text("the secret outside")
    (ws / "flink").symlink_to(outside / "secret.txt")
    run, approve = shell(ws, Approver(False)), Approver(False)
    for command in ["diff -rN . empty", "diff -N . empty", "diff --recursive --new-file . empty", "grep -r secret .",
                    "grep -rl secret", "find . -name secret.txt", "ls -R", "du -a"]:
        text = run(command)
        assert "secret outside" not in text and "secret.txt" not in text, (command, text)
    assert "< # TODO: one" in run("diff -rN . empty")  # the workspace's own files are compared
    assert approve.asked == []


@pytest.mark.parametrize("words, reason", [
    (["-o", "out.html"], "tree -o can change files"),
    (["-R"], "tree -R can change files"),
    (["-l", "."], "tree -l can change files, run programs, read a file it names or leave the workspace"),
    (["--fromfile", "list.txt"], "tree --fromfile can change files"),
    (["-L", "2", "-P", "*.py", "--dirsfirst", "src"], None),
])
def test_tree_is_read_as_its_manual_says(words, reason):
    """tree is not installed everywhere: how its words are read, without running it."""
    from agent.tools.shell_commands import read

    reading = read("tree", words, lambda path: True)
    assert reading.reason == reason or reason in reading.reason
    assert reason or reading.paths == ["src"]


def options_row(name: str) -> str:
    """docs/tools.md's row for a read-only command: its short options, then its long ones."""
    from agent.tools.shell_commands import COMMANDS, FIND_LEADING, FIND_PATHS, FIND_WORDS

    if name == "find":
        words = [w if n == 0 else f"{w} X" for w, n in FIND_WORDS.items()] + [f"{w} FILE" for w in FIND_PATHS]
        return f"| `find` | `{' '.join(FIND_LEADING)}` | `{' '.join(words)}` |"
    command = COMMANDS[name]
    short = ([f"-{command.flags}"] if command.flags else []) + [f"-{letter} X" for letter in command.takes]
    short += ["-N"] if command.counts else []
    long = ([f"--{option}" for option in command.long.split()] + [f"--{o}=X" for o in command.long_takes.split()]
            + [f"--{option}[=X]" for option in command.long_may_take.split()])
    return f"| `{name}` | {' '.join(f'`{o}`' for o in short) or '(none)'} | {' '.join(long) or '(none)'} |"


def test_the_docs_list_exactly_the_options_each_read_only_command_runs_with_unasked():
    readme = (Path(__file__).resolve().parent.parent / "docs" / "tools.md").read_text(encoding="utf-8")
    rows = [line for line in readme.splitlines() if re.match(r"\| `[a-z]+` \| ", line)]
    shown = {row.split("`")[1]: "|".join(row.split("|")[:4]) + "|" for row in rows}
    assert set(shown) == set(READ_ONLY)
    for name in READ_ONLY:
        assert shown[name] == options_row(name), name


def test_a_program_of_the_workspace_named_like_a_read_only_one_asks_first(ws):
    fake = ws / "bin" / "ls"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho pwned\n")
    fake.chmod(0o755)
    approve = Approver(False)
    run = shell(ws, approve, environ={"PATH": f"bin{os.pathsep}{os.environ['PATH']}"})
    assert run("ls").startswith("error: the user declined to run 'ls'")
    assert approve.asked == ["run_shell to run `ls` (ls here is a program of the workspace)"]


def test_a_timed_out_command_is_stopped_with_everything_it_started(ws):
    run = shell(ws, Approver(True), timeout=1)
    started = time.monotonic()
    text = run("sh -c 'echo $$; sleep 100 & echo $!; sleep 100'")
    assert time.monotonic() - started < 10
    assert text.startswith("error: the command took longer than 1 s and was stopped, with everything it started")
    pids = [int(n) for n in re.findall(r"^\d+$", text, re.M)]
    assert len(pids) == 2 and gone(pids)


def test_a_forking_command_leaves_nothing_behind_when_stopped_or_done(ws):
    forks = "import os, time; os.fork(); os.fork(); open(str(os.getpid()), 'w').close(); time.sleep({})"
    for seconds, expected in [(100, "error: the command took longer than 1 s"), (0, "(no output; exit code 0)")]:
        for pid_file in ws.glob("[0-9]*"):
            pid_file.unlink()
        text = shell(ws, Approver(True), timeout=1)(f"{PYTHON} -c \"{forks.format(seconds)}\"")
        assert text.startswith(expected)
        pids = [int(p.name) for p in ws.glob("[0-9]*")]
        assert len(pids) == 4 and gone(pids)


def test_a_command_that_leaves_a_background_job_returns_and_the_job_is_stopped(ws):
    started = time.monotonic()
    text = shell(ws, Approver(True))("sh -c 'sleep 100 & echo $!'")
    assert time.monotonic() - started < 10
    assert gone([int(text.splitlines()[0])])


def test_secrets_stay_out_of_the_commands_environment(ws):
    environ = {"PATH": os.environ["PATH"], "OPENAI_API_KEY": "sk-1", "AGENT_API_KEY": "sk-2", "GITHUB_TOKEN": "t",
               "AWS_SECRET_ACCESS_KEY": "s", "DB_PASSWORD": "p", "HF_TOKEN": "h", "LANG": "C.UTF-8",
               "TOKENIZERS_PARALLELISM": "false"}
    text = shell(ws, Approver(True), environ=environ)("env")
    assert sorted(line.split("=")[0] for line in text.splitlines()[:-1]) == \
        ["LANG", "PATH", "PWD", "TOKENIZERS_PARALLELISM"]
    assert f"PWD={ws}\n" in text
    assert without_secrets({"my_api_key": "x", "api_key": "y", "MONKEY": "z"}) == {"MONKEY": "z"}


def test_the_description_lists_the_read_only_commands_and_what_others_do(ws):
    asking, read_only = shell_tool(ws, Approver(True)), shell_tool(ws)
    assert all(name in asking.description for name in READ_ONLY)
    assert "any other command asks the user first" in asking.description and asking.asks and asking.writes
    assert "no other command runs" in read_only.description and not read_only.asks and not read_only.writes
