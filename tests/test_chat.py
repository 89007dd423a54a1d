"""`agent chat`, driven through a pseudo-terminal (as a user types) and through a pipe, against the scripted server."""
import fcntl
import json
import os
import pty
import select
import signal
import subprocess
import sys
import termios
import time
from pathlib import Path

from tests.support import action, child_env


class Terminal:
    """`agent chat` on a pseudo-terminal of its own: its controlling terminal, so Ctrl-C typed there interrupts it."""

    def __init__(self, *args, cwd):
        leader, follower = pty.openpty()
        self.child = subprocess.Popen([sys.executable, "-m", "agent", "chat", *args], stdin=follower, stdout=follower,
                                      stderr=follower, env=child_env(), cwd=cwd, start_new_session=True,
                                      preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0))
        os.close(follower)
        self.leader, self.seen, self.read_to = leader, b"", 0

    def expect(self, text: str, timeout: float = 30) -> str:
        """Everything shown since the last expected text, up to and including ``text``."""
        deadline = time.monotonic() + timeout
        while text.encode() not in self.seen[self.read_to:]:
            assert time.monotonic() < deadline, f"never showed {text!r}; showed: {self.seen[self.read_to:]!r}"
            if select.select([self.leader], [], [], 0.1)[0]:
                try:
                    self.seen += os.read(self.leader, 4096)
                except OSError:  # the child has gone
                    break
        end = self.seen.index(text.encode(), self.read_to) + len(text.encode())
        shown, self.read_to = self.seen[self.read_to:end], end
        return shown.decode(errors="replace")

    def wait_at_prompt(self, timeout: float = 10) -> None:
        """Wait until the child sleeps in readline's wait for a key (Linux: its /proc wchan). readline shows the
        prompt a moment before it waits, and a signal that comes in between is acted on at the next key."""
        wchan = Path(f"/proc/{self.child.pid}/wchan")
        deadline = time.monotonic() + timeout
        while wchan.exists() and "poll" not in wchan.read_text() and time.monotonic() < deadline:
            time.sleep(0.02)

    def type(self, text: str) -> None:
        os.write(self.leader, text.encode())

    def close(self) -> int:
        try:
            return self.child.wait(timeout=30)
        finally:
            os.close(self.leader)


def test_a_chat_on_a_terminal_keeps_the_conversation_through_ctrl_c(server, workspace):
    server.reply(action("calculator", expression="6*7"))
    server.reply(action(answer="42"))
    server.reply(action(answer="never shown"), delay=30)  # the turn interrupted with Ctrl-C
    server.reply(action(answer="You asked for 6*7."))
    terminal = Terminal("--base-url", server.url, "-m", "m", "--session", "talk", cwd=workspace)
    assert "/help for commands" in terminal.expect("> ")
    terminal.type("What is 6*7?\r")
    shown = terminal.expect("> ")
    assert "calculator(expression=6*7) → 42" in shown and "\r\n42\r\n" in shown and "final · 1 step" in shown
    terminal.type("Tell me a long story\r")
    while len(server.requests) < 3:
        time.sleep(0.05)
    terminal.type("\x03")  # Ctrl-C
    assert "interrupted; the conversation is as it was before this turn" in terminal.expect("> ")
    terminal.type("What did I ask first?\r")
    assert "You asked for 6*7." in terminal.expect("> ")
    sent = [m["content"] for m in server.requests[-1]["body"]["messages"][1:]]
    assert sent[0] == "What is 6*7?" and sent[-1] == "What did I ask first?"
    assert "Tell me a long story" not in sent and len(sent) == 5
    terminal.type("/tools\r")
    assert "on: calculator, read_file" in terminal.expect("> ")
    terminal.type("/help\r")
    assert "/save NAME" in terminal.expect("> ")
    terminal.type("/nonsense\r")
    assert "unknown command /nonsense; /help lists the commands" in terminal.expect("> ")
    terminal.type("\x04")  # Ctrl-D
    assert terminal.close() == 0
    saved = json.loads((Path(os.environ["XDG_DATA_HOME"]) / "prompt-protocol-agent/sessions/talk.json").read_text())
    assert saved["turns"] == 2 and [m["content"] for m in saved["messages"][1:-1]] == sent


def test_readline_recalls_an_earlier_line_with_the_up_arrow(server, workspace):
    server.replies(action(answer="first"), action(answer="second"))
    terminal = Terminal("--base-url", server.url, "-m", "m", "--quiet", cwd=workspace)
    terminal.expect("> ")
    terminal.type("say something\r")
    terminal.expect("first")
    terminal.expect("> ")
    terminal.type("\x1b[A\r")  # up arrow: the line before, again
    terminal.expect("second")
    terminal.expect("> ")
    terminal.type("half a li\x03")  # Ctrl-C at the prompt: the line is dropped, a fresh prompt
    terminal.expect("> ")
    terminal.type("/exit\r")
    assert terminal.close() == 0
    assert [r["body"]["messages"][-1]["content"] for r in server.requests] == ["say something"] * 2


def test_piped_lines_are_turns_and_stdout_holds_only_the_answers(server, workspace):
    server.replies(action(answer="Hello!"), action(answer="Saved."))
    done = subprocess.run([sys.executable, "-m", "agent", "chat", "--base-url", server.url, "-m", "m"],
                          input="hi\n/save kept\n\nbye\n/reset\n", capture_output=True, text=True,
                          env=child_env(), cwd=workspace, timeout=60)
    assert (done.returncode, done.stdout) == (0, "Hello!\nSaved.\n")
    assert "saved as session kept (1 turn); every turn from now on is saved there too" in done.stderr
    assert "a new conversation (session kept is saved empty)" in done.stderr
    listed = subprocess.run([sys.executable, "-m", "agent", "sessions", "--json"], capture_output=True, text=True,
                            env=child_env(), cwd=workspace, timeout=60)
    [kept] = json.loads(listed.stdout)
    assert (kept["name"], kept["turns"]) == ("kept", 0)


def test_save_refuses_another_sessions_name_and_a_bad_one(server, workspace):
    server.replies(action(answer="one"), action(answer="two"))
    subprocess.run([sys.executable, "-m", "agent", "--base-url", server.url, "-m", "m", "--session", "taken", "x"],
                   capture_output=True, env=child_env(), cwd=workspace, timeout=60, check=True)
    done = subprocess.run([sys.executable, "-m", "agent", "chat", "--base-url", server.url, "-m", "m"],
                          input="y\n/save taken\n/save ../up\n/save\n", capture_output=True, text=True,
                          env=child_env(), cwd=workspace, timeout=60)
    assert done.returncode == 0
    assert "a session named 'taken' exists already" in done.stderr
    assert "'../up' is not a session name" in done.stderr and "/save needs a NAME" in done.stderr


def test_a_termination_request_ends_the_chat_where_ctrl_c_would_only_stop_the_turn(server, workspace):
    server.reply(action(answer="never shown"), delay=30)
    terminal = Terminal("--base-url", server.url, "-m", "m", cwd=workspace)
    terminal.expect("> ")
    terminal.type("Tell me a long story\r")
    while len(server.requests) < 1:
        time.sleep(0.05)
    terminal.child.send_signal(signal.SIGTERM)
    assert "agent: interrupted" in terminal.expect("agent: interrupted")
    assert terminal.close() == 130


def test_a_termination_request_at_the_prompt_ends_the_chat(server, workspace):
    terminal = Terminal("--base-url", server.url, "-m", "m", cwd=workspace)
    terminal.expect("> ")
    terminal.wait_at_prompt()
    terminal.child.send_signal(signal.SIGTERM)
    assert terminal.close() == 130
