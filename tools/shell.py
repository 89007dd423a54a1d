"""run_shell: one command, run without a shell in the workspace; read-only commands run at once, others ask first."""

from __future__ import annotations

import glob
import io
import os
import re
import shlex
import shutil
import signal
import stat
import subprocess
import threading
import time
from collections import deque
from pathlib import Path
from typing import Callable, Mapping, cast

from .files import Workspace
from .registry import Tool, ToolError, tool
from .shell_commands import READ_ONLY, read

TIMEOUT = 30.0  # seconds
MAX_COMMAND = 10_000  # characters of one command line
MAX_MATCHES = 1_000  # paths one wildcard may expand to
KEEP_HEAD, KEEP_TAIL = 750_000, 250_000  # bytes of output kept (the loop cuts it further, to --max-output)
MAX_OUTPUT = 20_000_000  # bytes of output after which the command is stopped

# variables that change how the read-only commands read their words (POSIXLY_CORRECT: options end at the first
# operand), left out of their environment
_PARSING = ("POSIXLY_CORRECT", "_POSIX2_VERSION", "GREP_OPTIONS")
_SECRET = re.compile(r"(^|_)(API_?KEY|TOKEN|SECRET|PASSWORD)(_|$)", re.IGNORECASE)
_WILDCARDS = {"*": "\ue000", "?": "\ue001", "[": "\ue002"}  # unquoted ones, marked before shlex splits the words
_HOME = "\ue003"  # an unquoted ~ that begins a word
_AFTER_HOME = ("", "/", " ", "\t")  # what may follow a ~ that stands for the home folder (~user is left alone)
_UNMARK = str.maketrans({mark: char for char, mark in _WILDCARDS.items()} | {_HOME: "~"})
_OPERATORS = {"|": "a pipe", "&": "a background job", ";": "a list of commands", "<": "a redirection",
              ">": "a redirection", "(": "a subshell", ")": "a subshell", "\n": "a list of commands"}
_EXPANSION = re.compile(r"`|\$\(|\$\{?[A-Za-z0-9_?$!#@*-]\w*")


def without_secrets(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment without the variables whose names say they hold a secret (*_API_KEY, *_TOKEN, ...)."""
    return {name: value for name, value in environ.items() if not _SECRET.search(name)}


class Shell:
    """Runs one command line at a time in a workspace: parsed with shlex, never by a shell."""

    def __init__(self, workspace: str | os.PathLike, approve: Callable[[str], bool] | None = None,
                 timeout: float = TIMEOUT, environ: Mapping[str, str] | None = None):
        self.space = Workspace(workspace)
        self.approve = approve  # None: only the read-only commands run, inside the workspace
        self.timeout = timeout
        self.environ = without_secrets(os.environ if environ is None else environ)

    def run_shell(self, command: str) -> str:
        argv, expanded = self.words(command)
        program = self.program(argv[0])
        reason, added = self.needs_approval(argv, program, expanded)
        if reason:
            if self.approve is None:
                raise ToolError(f"{command!r} was not run: {reason}, and this run allows only read-only commands "
                                f"inside the workspace ({', '.join(READ_ONLY)})")
            if not self.approve(f"run_shell to run `{command}` ({reason})"):
                raise ToolError(f"the user declined to run {command!r}; try another way, or ask the user to run it")
            return self.execute(argv, program, self.environ)
        environ = {name: value for name, value in self.environ.items() if name not in _PARSING}
        return self.execute([argv[0], *added, *argv[1:]], program, environ)

    def words(self, command: str) -> tuple[list[str], list[str]]:
        """The command's words, its wildcards and a leading ~ expanded as a shell would; and the words that came
        from a wildcard (paths, whatever the command). What only a shell could run (pipes, redirections, lists,
        substitutions, variables) is refused."""
        if not command.strip():
            raise ToolError("the command is empty; send one command, like ls -la")
        if len(command) > MAX_COMMAND:
            raise ToolError(f"the command is {len(command):,} characters long (the limit is {MAX_COMMAND:,})")
        if "\0" in command or not _encodable(command):
            raise ToolError("the command contains a null byte or characters no file name can hold; use plain text")
        try:
            words = shlex.split(_mark(command))
        except ValueError as error:
            raise ToolError(f"cannot parse the command ({error}): check its quotes") from None
        if not words:
            raise ToolError("the command is empty; send one command, like ls -la")
        argv, expanded = [], []
        for word in words:
            found, wild = self._expand(word)
            argv += found
            expanded += found if wild else []
        return argv, expanded

    def _expand(self, word: str) -> tuple[list[str], bool]:
        """The word's expansion, and whether it had wildcards. A pattern whose folder is outside the workspace is
        not expanded (nothing outside is listed before the user says so): the word stays as written."""
        home = str(Path.home()) if word.startswith(_HOME) else ""
        word = word[1:] if home else word
        literal = home + word.translate(_UNMARK)
        if not any(mark in word for mark in _WILDCARDS.values()):
            return [literal], False
        folder = os.path.dirname(re.split(f"[{''.join(_WILDCARDS.values())}]", home + word)[0])
        if self._outside(folder or "."):
            return [literal], True
        parts = re.split(f"([{''.join(_WILDCARDS.values())}])", word)
        pattern = glob.escape(home) + "".join(p.translate(_UNMARK) if p in _WILDCARDS.values() else glob.escape(p)
                                              for p in parts)
        matches = sorted(glob.glob(pattern, root_dir=self.space.root))
        if len(matches) > MAX_MATCHES:
            raise ToolError(f"{literal!r} matches {len(matches):,} paths (the limit is {MAX_MATCHES:,}); "
                            "narrow it down, or use find")
        return matches or [literal], True  # no match: the word as written, as a shell does

    def program(self, name: str) -> str:
        """The program a command's first word names (a relative path or PATH's folders, from the workspace)."""
        search = self.environ.get("PATH", os.defpath)
        if "/" in name:
            found = str(self.space.root / name) if os.access(self.space.root / name, os.X_OK) else None
        else:
            search = os.pathsep.join(str(self.space.root / folder) for folder in search.split(os.pathsep))
            found = shutil.which(name, path=search)
        if not found or os.path.isdir(found):
            raise ToolError(f"command not found: {name}; the read-only commands are {', '.join(READ_ONLY)}")
        return found

    def needs_approval(self, argv: list[str], program: str, expanded: list[str]) -> tuple[str | None, tuple]:
        """Why the command cannot run at once (None when it is read-only and stays in the workspace), and the
        options it runs with at once on top of its own (see shell_commands.read)."""
        name, args = argv[0], argv[1:]
        if name not in READ_ONLY:
            return "not a read-only command", ()
        if self.space.contains(Path(program).resolve()):
            return f"{name} here is a program of the workspace", ()
        reading = read(name, args, lambda path: not self._outside(path) and (self.space.root / path).is_dir())
        if reading.reason:
            return reading.reason, ()
        for path in [*(reading.paths or ()), *expanded]:
            if self._outside(path):
                return f"{path!r} is outside the workspace", ()
            if _special(self.space.root / path):
                return f"{path!r} is not a file or a folder (a FIFO or a device would keep it waiting)", ()
        return None, reading.added

    def _outside(self, path: str) -> bool:
        try:
            return not self.space.contains((self.space.root / path).resolve())
        except (OSError, RuntimeError, ValueError):
            return True

    def execute(self, argv: list[str], program: str, environ: Mapping[str, str]) -> str:
        """Run the command in its own process group, which is killed once it ends (or its time is up): nothing
        it started is left running."""
        try:
            child = subprocess.Popen(argv, executable=program, cwd=self.space.root,
                                     env={**environ, "PWD": str(self.space.root)},
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        except OSError as error:
            raise ToolError(f"cannot run {argv[0]}: {error.strerror or error}") from None
        output = _Output(child)
        try:
            finished = _wait(child.pid, self.timeout)
        finally:
            _kill_group(child.pid)
            child.wait()
            output.reader.join(timeout=5)  # a process that left the group may still hold the output open
        if not finished:
            so_far = f"; its output until then:\n{output.text()}" if output.size else "; it wrote nothing"
            raise ToolError(f"the command took longer than {self.timeout:g} s and was stopped, with everything it "
                            f"started{so_far}")
        if not output.size:
            return f"(no output; {_exit(child.returncode)})"
        return f"{output.text()}\n({_exit(child.returncode)})"


def _mark(command: str) -> str:
    """The command with its unquoted wildcards and leading ~ marked, so the words shlex makes still say which
    were quoted; raises ToolError for what only a shell could run."""
    out, quote, index = [], None, 0
    while index < len(command):
        char = command[index]
        if quote != "'" and char == "\\":
            out.append(command[index:index + 2])
            index += 2
            continue
        expansion = _EXPANSION.match(command, index) if quote != "'" else None
        if expansion:
            substitution = expansion.group() in ("`", "$(")
            if not substitution:
                raise ToolError(f"{expansion.group()!r} is a shell variable, and run_shell runs commands without a "
                                "shell, so nothing would expand it; write its value instead")
            raise _shell_syntax(expansion.group(), "a command substitution")
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in _OPERATORS:
            doubled = char in "&|" and command[index + 1:index + 2] == char
            raise _shell_syntax(char * 2 if doubled else char, "a list of commands" if doubled else _OPERATORS[char],
                                command[:index])
        elif char in _WILDCARDS:
            char = _WILDCARDS[char]
        elif (char == "~" and command[index - 1:index] in ("", " ", "\t")
              and command[index + 1:index + 2] in _AFTER_HOME):
            char = _HOME
        out.append(char)
        index += 1
    return "".join(out)


def _special(path: Path) -> bool:
    """Whether a path is a FIFO, a socket or a device (what is not there is not)."""
    try:
        mode = path.stat().st_mode
    except (OSError, ValueError):
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def _encodable(text: str) -> bool:
    try:
        os.fsencode(text)
    except UnicodeEncodeError:
        return False
    return True


def _shell_syntax(token: str, what: str, before: str = "") -> ToolError:
    """The refusal of shell syntax; when a command precedes the operator, it says to run that one alone first."""
    first = before.strip()
    step = (f"run `{first}` alone first, then send the next command using what it printed" if first and
            len(first) <= 200 else "send one command at a time and combine the results yourself")
    return ToolError(f"{token!r} is shell syntax ({what}), and run_shell runs one command without a shell; {step}")


def _wait(pid: int, timeout: float) -> bool:
    """Wait for the process to end, leaving it unreaped (so its group cannot be reused yet); False on timeout."""
    deadline, pause = time.monotonic() + timeout, 0.001
    while os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT | os.WNOHANG) is None:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(pause, left))
        pause = min(pause * 2, 0.05)
    return True


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _exit(code: int) -> str:
    if code >= 0:
        return f"exit code {code}"
    try:
        return f"killed by {signal.Signals(-code).name}"
    except ValueError:
        return f"killed by signal {-code}"


class _Output:
    """Reads a child's output as it comes: keeps its head and its tail, and stops a command that writes
    without end."""

    def __init__(self, child: subprocess.Popen):
        self.head, self.size, self.child = bytearray(), 0, child
        self.tail: deque[bytes] = deque()
        self.tail_size = 0
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        stdout = cast(io.BufferedReader, self.child.stdout)  # the pipe the child writes to, buffered
        while chunk := stdout.read1(65536):
            self.size += len(chunk)
            room = KEEP_HEAD - len(self.head)
            self.head += chunk[:room]
            if chunk[room:]:
                self.tail.append(chunk[room:])
                self.tail_size += len(chunk) - max(room, 0)
                while self.tail_size - len(self.tail[0]) >= KEEP_TAIL:
                    self.tail_size -= len(self.tail.popleft())
            if self.size > MAX_OUTPUT:
                _kill_group(self.child.pid)
        stdout.close()

    def text(self) -> str:
        tail = b"".join(self.tail)[-KEEP_TAIL:]
        if b"\0" in self.head or b"\0" in tail:
            return f"(binary output, {self.size:,} bytes, not shown)"
        cut = self.size - len(self.head) - len(tail)
        middle = f"\n[... {cut:,} bytes of output cut ...]\n" if cut else ""
        stopped = f"\n(stopped after {MAX_OUTPUT:,} bytes of output)" if self.size > MAX_OUTPUT else ""
        decode = lambda data: data.decode("utf-8", errors="replace")  # noqa: E731
        return (decode(bytes(self.head)) + middle + decode(tail)).rstrip("\n") + stopped


def shell_tool(workspace: str | os.PathLike, approve: Callable[[str], bool] | None = None, timeout: float = TIMEOUT,
               environ: Mapping[str, str] | None = None) -> Tool:
    """run_shell for one workspace folder. ``approve(request) -> bool`` is asked before a command that is not
    read-only (or leaves the workspace) runs; without it such commands are refused. The child's environment is
    ``environ`` (default: this process's), without its secrets."""
    shell = Shell(workspace, approve, timeout, environ)
    others = "any other command asks the user first" if approve else "no other command runs"
    return tool(
        shell.run_shell, name="run_shell",
        description=f"Run one command in the workspace folder, without a shell (no pipes, redirections, ; or &&), "
                    f"and get its output and exit code. Read-only commands ({', '.join(READ_ONLY)}) run at once "
                    f"while they stay in the workspace; {others}.",
        parameters={"type": "object", "properties": {"command": {
            "type": "string", "description": "one command line, like: grep -rn TODO --include=*.py ."}},
            "required": ["command"], "additionalProperties": False},
        hint="Use run_shell for what the file tools cannot do (search, count, sizes): one command per call, no "
             "pipes; combine the results yourself.",
        asks="before a command that is not read-only or leaves the workspace" if approve else "",
        writes=approve is not None,
    )
