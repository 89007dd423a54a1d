"""The agent loop: ask the model, act on its reply, feed the results back, until it answers."""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field, fields
from typing import Callable

from agent import prompts
from agent.config import Settings
from agent.models import Model, ModelError, Reply
from agent.protocols import Call, Final, FormatError, PromptProtocol
from agent.text import scrub
from agent.trace import TraceError

STATUSES = ("final", "step_limit", "format_errors", "loop", "model_error", "interrupted", "error")
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
                 emit: Callable[..., None] = ignore):
        self.model, self.registry = model, registry
        self.protocol = protocol or PromptProtocol(registry)
        self.settings = settings or Settings()
        self.emit = emit  # receives every trace event: emit(event, **data)

    def run(self, task: str) -> RunResult:
        task, result = scrub(task), RunResult(status="error", protocol=self.protocol.name)
        self._measured = (0, 0)  # how many messages of the history _compact has counted, and their size
        history = [{"role": "system", "content": self.protocol.system_prompt()},
                   {"role": "user", "content": task}]
        result.messages, started = history, time.monotonic()
        try:
            self.emit("run_start", task=task, protocol=self.protocol.name, settings=asdict(self.settings))
            result.answer = self._loop(history, result)
            result.status = "final"
        except Stop as stop:
            result.status, result.error = stop.status, stop.error
        except ModelError as error:
            result.status, result.error = "model_error", str(error) or "the model failed"
        except KeyboardInterrupt:
            result.status, result.error = "interrupted", "interrupted by the user"
        except TraceError as error:
            result.status, result.error = "error", str(error)
        except Exception as error:  # a bug of the agent's own: recorded, not raised, so the trace ends cleanly
            result.status, result.error = "error", f"internal error: {type(error).__name__}: {error}"
        finally:
            result.seconds = round(time.monotonic() - started, 3)
            try:
                self.emit("run_end", **result.summary())
            except TraceError as error:  # the answer, if any, is kept: only the record of it failed
                result.status, result.error = "error", str(error)
        return result

    def _loop(self, history: list[dict], result: RunResult) -> str:
        failed: list[dict] = []  # malformed replies and their re-asks since the last good reply
        previous, texts, repeats, in_row = None, [], 0, 0
        while True:
            self._compact(history)
            turn = self.protocol.parse(self._complete(history + failed if failed else history, result))
            if isinstance(turn, FormatError):
                self._reask(turn, result, in_row)
                failed, in_row = failed + turn.messages, in_row + 1
                continue
            failed, in_row = [], 0
            if isinstance(turn, Final):
                history.append(turn.message)
                self.emit("final", answer=turn.answer)
                return turn.answer
            if result.steps >= self.settings.max_steps:
                raise Stop("step_limit", f"no final answer within {self.settings.max_steps} tool steps (raise --max-steps)")
            result.steps += 1
            signature = [(c.tool, c.arguments) for c in turn.calls]
            repeats = repeats + 1 if signature == previous else 0
            if repeats >= 2:
                raise Stop("loop", f"the model repeated the same call three times in a row: {turn.calls[0].tool}")
            texts = self._repeated(turn.calls, texts) if repeats else self._execute(turn.calls, result)
            previous = signature
            if result.steps == self.settings.max_steps:
                texts[-1] += "\n" + prompts.load("last_step")
            history += [turn.message] + self.protocol.results(turn.calls, texts)

    def _compact(self, history: list[dict]) -> None:
        """Drop the oldest tool results until the history fits; the system prompt, the task and the
        latest step are kept whole."""
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
            if size > limit and message["role"] in ("user", "tool") and len(message["content"]) > KEEP_SHORT:
                note = prompts.render("dropped_result", characters=len(message["content"]))
                size -= len(message["content"]) - len(note)
                self.emit("compacted", dropped=len(message["content"]))
                history[index] = {**message, "content": note}  # a new message: the one sent before stays as sent
        self._measured = len(history), size

    def _complete(self, messages: list[dict], result: RunResult) -> Reply:
        started = time.monotonic()
        reply = self.model.complete(messages, **self.protocol.options)
        result.model_calls += 1
        if reply.usage:
            result.prompt_tokens += reply.usage.get("prompt_tokens") or 0
            result.completion_tokens += reply.usage.get("completion_tokens") or 0
        else:
            result.usage_missing += 1
        self.emit("model_call", seconds=round(time.monotonic() - started, 3), usage=reply.usage,
                  content=reply.content, tool_calls=reply.tool_calls, finish_reason=reply.finish_reason)
        return reply

    def _reask(self, turn: FormatError, result: RunResult, in_row: int) -> None:
        result.errors[turn.kind] = result.errors.get(turn.kind, 0) + 1
        self.emit("parse_error", kind=turn.kind, message=turn.problem)
        if in_row >= self.settings.max_reasks:
            raise Stop("format_errors", f"{in_row + 1} unusable replies in a row; the last one: {turn.kind}: {turn.problem}")
        result.reasks += 1

    def _execute(self, calls: list[Call], result: RunResult) -> list[str]:
        """Run the calls (concurrently when there are several); results in the order of the calls."""
        if len(calls) == 1:
            outcomes = [self._run_call(calls[0])]
        else:
            pool = ThreadPoolExecutor(max_workers=len(calls))
            try:
                futures = pending = [pool.submit(self._run_call, call) for call in calls]
                while pending:  # short waits: the main thread sees Ctrl-C whichever thread the signal reached
                    pending = wait(pending, timeout=0.1).not_done
                outcomes = [future.result() for future in futures]
            finally:  # on Ctrl-C, stop waiting at once: the calls already running finish on their own
                pool.shutdown(wait=False, cancel_futures=True)
        for call, (ok, _) in zip(calls, outcomes):
            result.tool_calls.append({"tool": call.tool, "arguments": call.arguments, "ok": ok})
            if call.error:
                result.errors[call.error_kind] = result.errors.get(call.error_kind, 0) + 1
        return [scrub(text) for _, text in outcomes]

    def _run_call(self, call: Call) -> tuple[bool, str]:
        self.emit("tool_call", tool=call.tool, arguments=call.arguments)
        if call.error:
            ok, text = False, call.error
        else:
            outcome = self.registry.run(call.tool, call.arguments)  # the protocol has checked the arguments
            ok, text = outcome.ok, truncate(outcome.text, self.settings.max_output_chars)
        self.emit("tool_result", tool=call.tool, arguments=call.arguments, ok=ok, result=text)
        return ok, text

    def _repeated(self, calls: list[Call], earlier: list[str]) -> list[str]:
        self.emit("repeated_call", tools=[c.tool for c in calls])
        return [prompts.render("repeated_call", tool=c.tool, result=text) for c, text in zip(calls, earlier)]


def truncate(text: str, limit: int) -> str:
    """Keep the head and the tail of a long text, with a note of how much was cut."""
    if len(text) <= limit:
        return text
    head, tail = limit * 3 // 4, limit // 4
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut} characters cut; {len(text)} in all ...]\n{text[-tail:] if tail else ''}"
