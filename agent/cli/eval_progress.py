"""`agent eval`'s progress on stderr: one line per finished run when stderr is a file or a pipe (a log), a bar
redrawn in place on a terminal (runs done, each arm's pass rate so far, the time left)."""
from __future__ import annotations

import shutil
import time
from typing import TextIO

from agent.text import plural
from agent.tools.text import shorten

BAR_WIDTH = 24


def run_line(record: dict, done: int, total: int, label_width: int, id_width: int) -> str:
    failed = [c["check"] for c in record["checks"] if not c["ok"]]
    why = "" if record["passed"] else record["status"] if record["status"] != "final" else ", ".join(failed)
    return (f"[{done}/{total}] {record['protocol']:<{label_width}}  {record['task']:<{id_width}}  "
            f"{'pass' if record['passed'] else 'FAIL'}  {plural(record['steps'], 'step')} {record['seconds']:.1f}s"
            f"{'  ' + why if why else ''}")


def duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


class Lines:
    """A line per finished run, for logs."""

    def __init__(self, out: TextIO, labels: list[str], task_ids: list[str]):
        self.out, self.widths = out, (max(map(len, labels)), max(map(len, task_ids)))

    def __call__(self, record: dict, done: int, total: int) -> None:
        print(run_line(record, done, total, *self.widths), file=self.out, flush=True)

    def close(self) -> None:
        pass


class Bar:
    """One line redrawn in place: ``[#####-----] 12/40 runs  prompt 5/6  native 3/6  1m20s left``."""

    def __init__(self, out: TextIO, labels: list[str], clock=time.monotonic):
        self.out, self.clock, self.started = out, clock, clock()
        self.passed = dict.fromkeys(labels, 0)
        self.runs = dict.fromkeys(labels, 0)
        self.drawn = False

    def __call__(self, record: dict, done: int, total: int) -> None:
        label = record["protocol"]
        self.runs[label] = self.runs.get(label, 0) + 1
        self.passed[label] = self.passed.get(label, 0) + bool(record["passed"])
        self.out.write("\r\x1b[K" + self.line(done, total))
        self.out.flush()
        self.drawn = True

    def line(self, done: int, total: int) -> str:
        filled = BAR_WIDTH * done // max(total, 1)
        elapsed = self.clock() - self.started
        left = "" if done >= total else f"  {duration(elapsed / done * (total - done))} left"
        arms = "  ".join(f"{label} {self.passed[label]}/{n} ({self.passed[label] / n:.0%})"
                         for label, n in self.runs.items() if n)
        text = f"[{'#' * filled}{'-' * (BAR_WIDTH - filled)}] {done}/{total} runs  {arms}{left}"
        width = shutil.get_terminal_size((100, 24)).columns - 1
        return shorten(text, width)

    def close(self) -> None:
        if self.drawn:
            self.out.write("\n")
            self.out.flush()
