"""Runs of a task suite: each task in a fresh workspace, in each arm, on threads sharing one model; the arms of a
task are started together in a rotated order, so a slow spell of a shared machine favours none of them."""
from __future__ import annotations

import json
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from agent.config import Settings
from agent.evaluation.scripted_tools import scripted_registry
from agent.evaluation.suites import Task, check_run, write_files
from agent.loop import Agent, RunResult
from agent.protocols import Final, Step
from agent.tools import Tool, approve_everything, builtin_registry


@dataclass
class Evaluation:
    runs: list[dict]  # finished runs, in task order
    planned: int
    interrupted: bool = False


TRANSCRIPT_CHARS = 4000  # of each reply and tool result kept in a run's transcript, head and tail
TRANSCRIPT_EVENTS = 200  # events kept per run


class Transcript:
    """What happened in a run, for a reader: replies, re-asks, tool calls and their results, each bounded."""

    def __init__(self):
        self.events: list[dict] = []

    def __call__(self, event: str, **data) -> None:
        if len(self.events) >= TRANSCRIPT_EVENTS:
            return
        if event == "model_call":
            self.events.append({"event": "reply", "content": _clip(data.get("content")),
                                "tool_calls": [{"name": c["function"]["name"],
                                                "arguments": _clip(c["function"]["arguments"])}
                                               for c in data.get("tool_calls") or []]})
        elif event == "parse_error":
            self.events.append({"event": "reask", "kind": data["kind"], "message": _clip(data["message"])})
        elif event == "tool_result":
            self.events.append({"event": "tool", "tool": data["tool"], "ok": data["ok"],
                                "arguments": _clip(json.dumps(data["arguments"], ensure_ascii=False)),
                                "result": _clip(data["result"])})
        elif event == "second_look":
            self.events.append({"event": "second_look", "note": _clip(data["note"])})
        elif event == "final":
            self.events.append({"event": "final", "answer": _clip(data["answer"])})


def _clip(text) -> str | None:
    if text is None:
        return None
    text = str(text)
    if len(text) <= TRANSCRIPT_CHARS:
        return text
    half = TRANSCRIPT_CHARS // 2
    return f"{text[:half]}\n[... {len(text) - TRANSCRIPT_CHARS} characters cut ...]\n{text[-half:]}"


class FirstReply:
    """A protocol that ends the run at the model's first usable reply, as a benchmark that scores one response
    does: a reply with calls becomes the final answer (the calls, as JSON), and the calls are kept in ``calls``
    (malformed ones too, with ok false); none is run. Everything else is the wrapped protocol's."""

    def __init__(self, protocol):
        self.protocol, self.name, self.options = protocol, protocol.name, protocol.options
        self.calls: list[dict] = []

    def system_prompt(self) -> str:
        return self.protocol.system_prompt()

    def answer_reader(self):
        return self.protocol.answer_reader()

    def parse(self, reply):
        turn = self.protocol.parse(reply)
        self.calls = []  # the calls of the reply that ends the run, not of one re-asked before it
        if not isinstance(turn, Step):
            return turn
        self.calls = [{"tool": c.tool, "arguments": c.arguments, "ok": c.error is None} for c in turn.calls]
        answer = json.dumps([{"tool": c.tool, "arguments": c.arguments} for c in turn.calls], ensure_ascii=False)
        return Final(answer, turn.message, turn.repairs)

    def results(self, calls, outputs):
        return self.protocol.results(calls, outputs)


def run_task(task: Task, make_protocol: Callable, model, settings: Settings, label: str, repeat: int = 0,
             extra_tools: Sequence[Tool] = ()) -> dict:
    """One run of one task in a fresh workspace, with its checks and transcript; never raises. ``extra_tools``
    (an MCP server's) are offered beside the built-in tools, not beside a task's own. A task's ``one_reply``
    ends its run at the first usable reply (`FirstReply`)."""
    record, started = {"task": task.id, "category": task.category, "repeat": repeat}, time.monotonic()
    transcript = Transcript()
    try:
        with tempfile.TemporaryDirectory(prefix="agent-eval-") as folder:
            workspace = Path(folder)
            write_files(workspace, task)
            registry = scripted_registry(task.tools, task.results) if task.tools else builtin_registry(
                str(workspace), approve=approve_everything)  # a throwaway workspace: nothing to protect
            for tool in extra_tools if not task.tools else ():
                registry.add(tool)
            protocol = FirstReply(make_protocol(registry)) if task.one_reply else make_protocol(registry)
            result = Agent(model, registry, protocol, settings, emit=transcript,
                           instructions=task.instructions).run(task.task, task.history)
            if task.one_reply:
                result.tool_calls = protocol.calls
            checks = check_run(task.checks, result.answer, result.tool_calls, workspace)
    except Exception as error:
        result, checks = RunResult(status="error", error=f"{type(error).__name__}: {error}"), []
        result.seconds = round(time.monotonic() - started, 3)
    passed = result.status == "final" and all(c["ok"] for c in checks)
    return {**record, **result.summary(), "protocol": label, "checks": checks, "passed": passed,
            "transcript": transcript.events}


def schedule(tasks: list[Task], labels: list[str], repeat: int = 1) -> list[tuple[int, Task, str, int]]:
    """(task index, task, arm, repeat) in the order to start them: for each repeat and task, every arm, task i
    beginning with arm i mod k, so that each arm runs first, second, ... equally often."""
    k = len(labels)
    return [(i, task, labels[(i + shift) % k], r) for r in range(repeat) for i, task in enumerate(tasks)
            for shift in range(k)]


class _StoppableModel:
    """Passes calls on to the model until stopped; then every run ends at its next model call."""

    def __init__(self, model):
        self.model, self.stopped = model, threading.Event()

    def complete(self, messages, **options):
        if self.stopped.is_set():
            raise KeyboardInterrupt
        return self.model.complete(messages, **options)


def run_eval(tasks: list[Task], protocols: dict[str, Callable], model, settings: Settings | None = None, *,
             repeat: int = 1, workers: int = 1, on_done: Callable[[dict, int, int], None] | None = None,
             extra_tools: Sequence[Tool] = ()) -> Evaluation:
    """Every task in every arm, ``repeat`` times, on ``workers`` threads sharing one model.

    ``protocols`` maps an arm's label to a factory ``make(registry) -> protocol``; ``extra_tools`` go with the
    built-in tools (an MCP server's: one server answers the runs of every thread). The runs start in
    ``schedule`` order (each task's arms side by side, task i beginning with arm i mod k) and come back in task
    order, arms in the order given. ``on_done(record, done, total)`` is called in this thread as runs finish;
    Ctrl-C stops the eval and keeps the runs that finished.
    """
    labels = list(protocols)
    jobs = schedule(tasks, labels, repeat)
    model, finished, interrupted = _StoppableModel(model), [], False
    pool = ThreadPoolExecutor(max_workers=workers)
    try:
        futures = {pool.submit(run_task, task, protocols[label], model, settings or Settings(), label, r,
                               extra_tools): (r, i, labels.index(label)) for (i, task, label, r) in jobs}
        for future in as_completed(futures):
            finished.append((futures[future], future.result()))
            if on_done:
                on_done(finished[-1][1], len(finished), len(jobs))
    except KeyboardInterrupt:
        model.stopped.set()
        interrupted = True
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    runs = [record for _, record in sorted(finished, key=lambda pair: pair[0])]
    if interrupted:
        runs = [record for record in runs if record["status"] != "interrupted"]
    return Evaluation(runs, len(jobs), interrupted)
