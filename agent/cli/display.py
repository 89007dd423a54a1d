"""What a run shows while it goes, on the terminal: the wait for the model (Heartbeat), the answer as it streams in
(AnswerStream), a line per tool call, re-ask and compaction (Progress). Answers go to stdout, the rest to stderr."""
from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from agent.models import Model, Reply
from agent.text import for_terminal, plural, scrub
from agent.tools.text import shorten


class Heartbeat:
    """The model, with the seconds spent waiting for it shown on the terminal (stderr) while it thinks, until
    its answer starts to stream in."""

    def __init__(self, model: Model, stream: TextIO | None = None, every: float = 1.0):
        self.model, self.out, self.every = model, stream or sys.stderr, every

    def complete(self, messages: list[dict], **options: Any) -> Reply:
        with self._ticking():
            return self.model.complete(messages, **options)

    def stream(self, messages: list[dict], on_text: Callable[[str], None], **options: Any) -> Reply:
        """As the model's own ``stream`` (its ``complete`` if it has none), the ticking stopped by the first text."""
        stream = getattr(self.model, "stream", None)
        with self._ticking() as stop:
            if stream is None:
                return self.model.complete(messages, **options)

            def first(text: str) -> None:
                stop()
                on_text(text)

            return stream(messages, first, **options)

    @contextmanager
    def _ticking(self) -> Iterator[Callable[[], None]]:
        """Ticks until the block ends or calls the function it is given; then erases the line it wrote."""
        done, started = threading.Event(), time.monotonic()

        def tick() -> None:
            while not done.wait(self.every):
                self.out.write(f"\r  waiting for the model… {time.monotonic() - started:.0f}s")
                self.out.flush()

        def stop() -> None:
            if done.is_set():
                return
            done.set()
            ticker.join()
            if time.monotonic() - started >= self.every:
                self.out.write("\r\033[K")  # erase the line before the next output
                self.out.flush()

        ticker = threading.Thread(target=tick, daemon=True)
        ticker.start()
        try:
            yield stop
        finally:
            stop()


class AnswerStream:
    """Shows each reply's answer on stdout as the model writes it (escaped as the answer would be, on a
    terminal), and ends the line of a reply that showed some."""

    def __init__(self, out: TextIO | None = None):
        self.out = out or sys.stdout
        self.shown: list[str] = []  # what the latest reply showed

    def start(self) -> None:
        self.shown = []

    def show(self, text: str) -> None:
        if text:
            self.out.write(for_terminal(text) if self.out.isatty() else scrub(text))
            self.out.flush()
            self.shown.append(text)

    def end(self) -> None:
        if self.shown:
            self.out.write("\n")
            self.out.flush()

    def showed(self, answer: str) -> bool:
        """Whether the latest reply showed exactly ``answer``: then it needs no printing."""
        return bool(self.shown) and scrub("".join(self.shown)) == scrub(answer)


class Progress:
    """Prints one line per tool call, re-ask, second look and compaction on stderr; a call that wrote the plan,
    with the plan below it; a helper's (spawn_agent's) lines under the line that starts it. Lines from calls run
    at once never mix."""

    def __init__(self) -> None:
        self.plan: list[str] = []  # the plan todo_write has just written, shown with its call's line
        self.lock = threading.Lock()

    def __call__(self, event: str, indent: str = "  ", **data) -> None:
        if event == "subagent":
            inner = dict(data["inner"])
            if inner["event"] == "run_start":
                self.say(f"{indent}spawn_agent [{data['agent']}]: {short(inner['task'], 70)}")
            elif inner["event"] in ("tool_result", "parse_error", "second_look", "compaction"):
                self(inner.pop("event"), indent=f"{indent}  ↳ [{data['agent']}] ", **inner)
        elif event == "plan":
            from agent.tools.plan import checklist

            self.plan = checklist(data["todos"]).splitlines()
        elif event == "tool_result":
            args = ", ".join(f"{k}={short(v, 40)}" for k, v in data["arguments"].items())
            lines = [data["result"]]
            if data["tool"] == "todo_write" and data["ok"] and self.plan:
                lines, self.plan = self.plan, []
            self.say(f"{indent}{data['tool']}({args}) → {short(lines[0], 70)}",
                     *(f"    {for_terminal(line)}" for line in lines[1:]))
        elif event == "parse_error":
            self.say(f"{indent}re-ask ({data['kind']}): {short(data['message'], 70)}")
        elif event == "second_look":
            self.say(f"{indent}second look: {short(data['note'], 70)}")
        elif event == "compaction":
            requests = data.get("requests", 1)
            how = f"in {plural(requests, 'request')}" if requests else "without a request (all were short)"
            self.say(f"{indent}compacted: {plural(data['summarised'], 'older message')} summarised {how} "
                     f"(about {data['tokens_before']:,} → {data['tokens_after']:,} tokens)")
        elif event == "compaction_failed":
            self.say(f"{indent}not compacted: {data['reason']}")

    def say(self, *lines: str) -> None:
        with self.lock:
            sys.stderr.write("".join(f"{line}\n" for line in lines))
            sys.stderr.flush()


def short(value: object, width: int) -> str:
    """A value (a text, or anything else as JSON) on one line, as a terminal shows it, cut to ``width``."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return shorten(for_terminal(" ".join(text.split())), width)
