"""The agent loop: ask the model, act on its reply, feed the results back, until it answers."""
from __future__ import annotations

import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field, fields
from typing import Callable

from agent import prompts
from agent.compaction import Summariser
from agent.config import Settings
from agent.models import Model, ModelError, Reply
from agent.protocols import Final, PromptProtocol, Reask, Step, ToolCall, asks_for_tools, with_instructions
from agent.text import scrub, truncate
from agent.trace import TraceError

STATUSES = ("final", "step_limit", "format_errors", "loop", "model_error", "interrupted", "error")  # every one used
KEEP_SHORT = 200  # tool results this short are never dropped: it would save little


@dataclass
class RunResult:
    status: str
    answer: str | None = None
    error: str | None = None  # why the run ended without an answer
    protocol: str = "prompt"
    steps: int = 0
    model_calls: int = 0
    reasks: int = 0
    errors: dict[str, int] = field(default_factory=dict)  # malformed replies and calls, by kind
    tool_calls: list[dict] = field(default_factory=list)  # {"tool", "arguments", "ok"}
    prompt_tokens: int = 0
    completion_tokens: int = 0
    usage_missing: int = 0  # model calls whose response reported no usage
    seconds: float = 0.0
    messages: list[dict] = field(default_factory=list, repr=False)

    def summary(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "messages"}


class Stop(Exception):
    """Ends the run with a status."""

    def __init__(self, status: str, error: str | None = None):
        super().__init__(error or status)
        self.status, self.error = status, error


def ignore(event: str, **data) -> None:
    pass


class Agent:
    def __init__(self, model: Model, registry, protocol=None, settings: Settings | None = None,
                 emit: Callable[..., None] = ignore, instructions: str = "", context: Callable[[], str] | None = None):
        self.model, self.registry = model, registry
        self.instructions = instructions  # the user's own, added to the system prompt after the protocol's
        self.context = context  # gives text for the end of the system prompt, at the start of each run (notes)
        self.protocol = protocol or PromptProtocol(registry)
        self.settings = settings or Settings()
        self.emit = emit  # receives every trace event: emit(event, **data)

    def run(self, task: str, history: list[dict] = ()) -> RunResult:
        """Run ``task``; with ``history`` (an earlier result's ``messages``), as the next turn of that
        conversation, under this run's system prompt. The result's ``messages`` hold the whole conversation."""
        task = scrub(task)
        system = with_instructions(self.protocol.system_prompt(), self.instructions)
        if self.context:
            system += f"\n{scrub(self.context().strip())}\n"
        earlier = [m for m in history if m["role"] != "system"]
        history = [{"role": "system", "content": system}, *earlier, {"role": "user", "content": task}]
        errors = Counter()  # malformed replies and calls, by kind: both parts of the loop count them here
        replies = Replies(self.model, self.protocol, self.settings.max_reasks, self.emit, errors)
        steps = Steps(self.registry, self.protocol, self.settings, self.emit, errors)
        summarise = Summariser(self.model, self.settings.context_window, history[-1], self.emit, replies)
        self._measured = (0, 0)  # how many messages of the history _compact has counted, and their size
        status, answer, error, started = "error", None, None, time.monotonic()
        try:
            self.emit("run_start", task=task, protocol=self.protocol.name, settings=asdict(self.settings))
            answer = self._loop(history, replies, steps, summarise)
            status = "final"
        except Stop as stop:
            status, error = stop.status, stop.error
        except ModelError as failure:
            status, error = "model_error", str(failure) or "the model failed"
        except KeyboardInterrupt:
            status, error = "interrupted", "interrupted by the user"
        except TraceError as failure:
            status, error = "error", str(failure)
        except Exception as failure:  # a bug of the agent's own: recorded, not raised, so the trace ends cleanly
            status, error = "error", f"internal error: {type(failure).__name__}: {failure}"
        finally:
            result = RunResult(status, answer, error, self.protocol.name, steps=steps.steps, errors=dict(errors),
                               tool_calls=steps.tool_calls, seconds=round(time.monotonic() - started, 3),
                               messages=history, **{k: n + steps.spent[k] for k, n in replies.counts().items()})
            try:
                self.emit("run_end", **result.summary())
            except TraceError as failure:  # the answer, if any, is kept: only the record of it failed
                result.status, result.error = "error", str(failure)
        return result

    def _loop(self, history: list[dict], replies: Replies, steps: Steps, summarise: Summariser) -> str:
        while True:
            self._compact(history, keep=steps.kept)
            if summarise(history, keep=steps.kept):
                self._measured = (0, 0)  # the history was rewritten: _compact measures it afresh
            turn = replies.next(history)
            if isinstance(turn, Final):
                history.append(turn.message)
                self.emit("final", answer=turn.answer)
                return turn.answer
            history += steps.take(turn)

    def _compact(self, history: list[dict], keep: list[dict]) -> None:
        """Drop the oldest tool results until the history fits; the system prompt, the tasks, the latest step and
        the messages in ``keep`` (the latest plan) are kept whole."""
        limit = self.settings.max_history_chars
        if limit is None:
            return
        counted, size = self._measured if self._measured[0] <= len(history) else (0, 0)
        size += sum(len(m.get("content") or "") for m in history[counted:])
        self._measured = len(history), size
        if size <= limit:
            return
        latest = max((i for i, m in enumerate(history) if m["role"] == "assistant"), default=0)
        for index, message in enumerate(history[2:latest], 2):
            droppable = is_result(history, index) and not any(message is k for k in keep)
            if size > limit and droppable and len(message["content"]) > KEEP_SHORT:
                note = prompts.render("dropped_result", characters=len(message["content"]))
                size -= len(message["content"]) - len(note)
                self.emit("compacted", dropped=len(message["content"]))
                history[index] = {**message, "content": note}  # a new message: the one sent before stays as sent
        self._measured = len(history), size


class Replies:
    """Gets the next reply the loop can act on: calls the model (counting calls and tokens), and re-asks a
    malformed reply until one is usable or too many in a row were not. The failed attempts and their re-asks
    are sent only until then: they never enter the history (the trace keeps them)."""

    def __init__(self, model: Model, protocol, max_reasks: int, emit: Callable[..., None], errors: Counter):
        self.model, self.protocol, self.max_reasks, self.emit, self.errors = model, protocol, max_reasks, emit, errors
        self.attempts: list[dict] = []  # the unusable replies since the last usable one, with their re-asks
        self.unusable = 0  # how many replies in a row could not be used
        self.model_calls = self.reasks = self.prompt_tokens = self.completion_tokens = self.usage_missing = 0
        self.reported: tuple[int, int] | None = None  # (messages of the history, prompt tokens): the latest usage

    def next(self, history: list[dict]) -> Final | Step:
        while True:
            turn = self.protocol.parse(self._complete(history))
            if not isinstance(turn, Reask):
                self.attempts, self.unusable = [], 0
                if turn.repairs:
                    self.emit("repaired", repairs=turn.repairs)
                return turn
            self._reask(turn)

    def counts(self) -> dict[str, int]:
        """The model calls, re-asks and tokens so far, as RunResult counts them."""
        return {"model_calls": self.model_calls, "reasks": self.reasks, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "usage_missing": self.usage_missing}

    def ask(self, model: Model, messages: list[dict]) -> Reply:
        """A call outside the protocol (for a summary), with no request options; counted like the others."""
        return self._count(model.complete(messages))

    def _complete(self, history: list[dict]) -> Reply:
        started = time.monotonic()
        messages = history + self.attempts if self.attempts else history
        reply = self._count(self.model.complete(messages, **self.protocol.options))
        if reply.usage:
            self.reported = len(history), reply.usage.get("prompt_tokens") or 0
        self.emit("model_call", seconds=round(time.monotonic() - started, 3), usage=reply.usage,
                  content=reply.content, tool_calls=reply.tool_calls, finish_reason=reply.finish_reason)
        return reply

    def _count(self, reply: Reply) -> Reply:
        self.model_calls += 1
        if reply.usage:
            self.prompt_tokens += reply.usage.get("prompt_tokens") or 0
            self.completion_tokens += reply.usage.get("completion_tokens") or 0
        else:
            self.usage_missing += 1
        return reply

    def _reask(self, turn: Reask) -> None:
        self.errors[turn.kind] += 1
        self.emit("parse_error", kind=turn.kind, message=turn.problem)
        if self.unusable >= self.max_reasks:
            raise Stop("format_errors",
                       f"{self.unusable + 1} unusable replies in a row; the last one: {turn.kind}: {turn.problem}")
        self.reasks += 1
        self.attempts += turn.messages
        self.unusable += 1


class Steps:
    """Acts on each step's tool calls: within the step limit, runs them (a step the model repeats is answered
    with its earlier results instead; a third in a row ends the run), and says when the last step is done."""

    def __init__(self, registry, protocol, settings: Settings, emit: Callable[..., None], errors: Counter):
        self.registry, self.protocol, self.settings, self.emit, self.errors = registry, protocol, settings, emit, errors
        self.steps = 0  # steps taken
        self.tool_calls: list[dict] = []  # every call made: {"tool", "arguments", "ok"}
        self.previous: list[tuple] | None = None  # the last step's calls, as (tool, arguments)
        self.repeats = 0  # how many steps in a row repeated the one before
        self.outputs: list[str] = []  # the last step's results, as the model was given them
        self.kept: list[dict] = []  # the results of the latest step that ran a keep_latest tool (the plan)
        self.spent = Counter()  # model calls and tokens the tools spent themselves (a sub-agent's)

    def take(self, step: Step) -> list[dict]:
        """The step and its results, as messages for the history."""
        if self.steps >= self.settings.max_steps:
            raise Stop("step_limit", f"no final answer within {self.settings.max_steps} tool steps (raise --max-steps)")
        self.steps += 1
        calls = [(c.tool, c.arguments) for c in step.calls]
        self.repeats = self.repeats + 1 if calls == self.previous else 0
        if self.repeats >= 2:
            raise Stop("loop", f"the model repeated the same call three times in a row: {step.calls[0].tool}")
        self.outputs = self._repeated(step.calls) if self.repeats else self._execute(step.calls)
        self.previous = calls
        if self.steps == self.settings.max_steps:
            self.outputs[-1] += "\n" + prompts.load("last_step")
        results = self.protocol.results(step.calls, self.outputs)
        if not self.repeats and self._renews_kept(len(step.calls)):
            self.kept = results
        return [step.message] + results

    def _renews_kept(self, calls: int) -> bool:
        """Whether a call of the step just run gave a new result of a tool whose latest result is kept."""
        return any(record["ok"] and getattr(self.registry.get(record["tool"]), "keep_latest", False)
                   for record in self.tool_calls[-calls:])

    def _execute(self, calls: list[ToolCall]) -> list[str]:
        """Run the calls (concurrently when there are several); results in the order of the calls."""
        if len(calls) == 1:
            outcomes = [self._run(calls[0])]
        else:
            pool = ThreadPoolExecutor(max_workers=len(calls))
            try:
                futures = pending = [pool.submit(self._run, call) for call in calls]
                while pending:  # short waits: the main thread sees Ctrl-C whichever thread the signal reached
                    pending = wait(pending, timeout=0.1).not_done
                outcomes = [future.result() for future in futures]
            finally:  # on Ctrl-C, stop waiting at once: the calls already running finish on their own
                pool.shutdown(wait=False, cancel_futures=True)
        for call, (ok, _, usage) in zip(calls, outcomes):
            self.tool_calls.append({"tool": call.tool, "arguments": call.arguments, "ok": ok})
            self.spent.update(usage or {})
            if call.error:
                self.errors[call.error_kind] += 1
        return [scrub(text) for _, text, _ in outcomes]

    def _run(self, call: ToolCall) -> tuple[bool, str, dict | None]:
        self.emit("tool_call", tool=call.tool, arguments=call.arguments)
        if call.error:
            ok, text, usage = False, call.error, None
        else:
            outcome = self.registry.run(call.tool, call.arguments)  # the protocol has checked the arguments
            ok, text, usage = outcome.ok, truncate(outcome.text, self.settings.max_output_chars), outcome.usage
        self.emit("tool_result", tool=call.tool, arguments=call.arguments, ok=ok, result=text)
        return ok, text, usage

    def _repeated(self, calls: list[ToolCall]) -> list[str]:
        self.emit("repeated_call", tools=[c.tool for c in calls])
        return [prompts.render("repeated_call", tool=c.tool, result=output) for c, output in zip(calls, self.outputs)]


def is_result(history: list[dict], index: int) -> bool:
    """Whether the message at ``index`` carries tool results (in either protocol), not a task of the user."""
    message = history[index]
    return message["role"] == "tool" or (message["role"] == "user" and index > 0
                                         and asks_for_tools(history[index - 1]))
