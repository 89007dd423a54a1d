"""Runs of a task suite: each task in a fresh workspace, in each protocol, on threads sharing one model."""
from __future__ import annotations

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
from agent.tools import Tool, approve_everything, builtin_registry


@dataclass
class Evaluation:
    runs: list[dict]  # finished runs, in task order
    planned: int
    interrupted: bool = False


def run_task(task: Task, make_protocol: Callable, model, settings: Settings, label: str, repeat: int = 0,
             extra_tools: Sequence[Tool] = ()) -> dict:
    """One run of one task in a fresh workspace, with its checks; never raises. ``extra_tools`` (an MCP
    server's) are offered beside the built-in tools, not beside a task's own."""
    record, started = {"task": task.id, "category": task.category, "repeat": repeat}, time.monotonic()
    try:
        with tempfile.TemporaryDirectory(prefix="agent-eval-") as folder:
            workspace = Path(folder)
            write_files(workspace, task)
            registry = scripted_registry(task.tools, task.results) if task.tools else builtin_registry(
                str(workspace), approve=approve_everything)  # a throwaway workspace: nothing to protect
            for tool in extra_tools if not task.tools else ():
                registry.add(tool)
            result = Agent(model, registry, make_protocol(registry), settings).run(task.task)
            checks = check_run(task.checks, result.answer, result.tool_calls, workspace)
    except Exception as error:
        result, checks = RunResult(status="error", error=f"{type(error).__name__}: {error}"), []
        result.seconds = round(time.monotonic() - started, 3)
    passed = result.status == "final" and all(c["ok"] for c in checks)
    return {**record, **result.summary(), "protocol": label, "checks": checks, "passed": passed}


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
    """Every task in every protocol, ``repeat`` times, on ``workers`` threads sharing one model.

    ``protocols`` maps a label to a factory ``make(registry) -> protocol``; ``extra_tools`` go with the built-in
    tools (an MCP server's: one server answers the runs of every thread). ``on_done(record, done, total)``
    is called in this thread as runs finish; Ctrl-C stops the eval and keeps the runs that finished.
    """
    jobs = [(task, label, r) for r in range(repeat) for task in tasks for label in protocols]
    model, finished, interrupted = _StoppableModel(model), [], False
    pool = ThreadPoolExecutor(max_workers=workers)
    try:
        futures = {pool.submit(run_task, task, protocols[label], model, settings or Settings(), label, r,
                               extra_tools): i
                   for i, (task, label, r) in enumerate(jobs)}
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
