"""Asking the user before a tool acts: y/N on the terminal, --yes for everything, a refusal with no terminal."""
from __future__ import annotations

import sys
import threading
from typing import Callable

from agent.text import for_terminal


def approver(read_only: bool, yes: bool) -> Callable[[str], bool] | None:
    """What the tools ask before acting: None when nothing may be approved (--read-only), yes to everything
    (--yes), or the user on the terminal."""
    from agent.tools import approve_everything

    if read_only:
        return None
    return approve_everything if yes else TerminalApproval()


class TerminalApproval:
    """Shows the request and reads y/N, one question at a time: from standard input when it is a terminal, else
    from /dev/tty (standard input may be the task, piped in). With no terminal at all, says so and refuses."""

    def __init__(self, stdin=None, stderr=None):
        self.stdin, self.stderr = stdin or sys.stdin, stderr or sys.stderr
        self.lock = threading.Lock()  # the calls of one batch run at once; their questions come one by one

    def __call__(self, request: str) -> bool:
        shown = for_terminal(request)
        with self.lock:
            if self.stdin.isatty():
                return self._ask(shown, self.stdin, self.stderr)
            try:
                with open("/dev/tty", "r+", encoding="utf-8", errors="replace") as terminal:
                    return self._ask(shown, terminal, terminal)
            except OSError:
                print(f"agent: refused, with no terminal to ask: {shown} (pass --yes to approve everything)",
                      file=self.stderr)
                return False

    @staticmethod
    def _ask(shown: str, answers, questions) -> bool:
        questions.write(f"agent: allow {shown}? [y/N] ")
        questions.flush()
        return answers.readline().strip().lower() in ("y", "yes")
