"""The agent loop: ask for a usable reply, act on it, feed the results back, until the model answers."""
from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field, fields

from agent import prompts
from agent.compaction import Compaction, Untouched, compaction
from agent.config import Settings
from agent.models import Model, ModelError
from agent.protocols import ActionProtocol, Final, PromptProtocol, Step, ToolCall, with_instructions
from agent.replies import COUNTS, Replies, Stop
from agent.streaming import Display
from agent.text import scrub, truncate
from agent.tools import Registry
from agent.trace import Emit, TraceError, ignore
from agent.unsourced import SecondLook

STATUSES = ("final", "step_limit", "format_errors", "loop", "model_error", "interrupted", "error")  # every one used


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


class Agent:
    def __init__(self, model: Model, registry: Registry, protocol: ActionProtocol | None = None,
                 settings: Settings | None = None, emit: Emit = ignore, instructions: str = "",
                 context: Callable[[], str] | None = None, display: Display | None = None):
        self.model, self.registry = model, registry
        self.instructions = instructions  # the user's own, added to the system prompt after the protocol's
        self.context = context  # gives text for the end of the system prompt, at the start of each run (notes)
        self.protocol = protocol or PromptProtocol(registry)
        self.settings = settings or Settings()
        self.emit = emit  # receives every trace event: emit(event, **data)
        self.display = display  # shows each reply's answer as the model writes it

    def run(self, task: str, history: Sequence[dict] = ()) -> RunResult:
        """Run ``task``; with ``history`` (an earlier result's ``messages``), as the next turn of that
        conversation, under this run's system prompt. The result's ``messages`` hold the whole conversation."""
        task = scrub(task)
        system = with_instructions(self.protocol.system_prompt(), self.instructions)
        if self.context:
            system += f"\n{scrub(self.context().strip())}\n"
        asked = {"role": "user", "content": task}
        earlier = [m for m in history if m["role"] != "system"]
        errors: Counter[str] = Counter()  # malformed replies and calls, by kind: both parts of the loop count them
        spent: Counter[str] = Counter()  # model calls, tokens, re-asks: Replies, Steps and compaction add to it
        run = Run([{"role": "system", "content": system}, *earlier, asked], asked,
                  Replies(self.model, self.protocol, self.settings.max_reasks, self.emit, errors, spent, self.display),
                  Steps(self.registry, self.protocol, self.settings, self.emit, errors, spent),
                  compaction(self.settings, self.model, self.emit, spent),
                  SecondLook(self.registry, shown=self.display is not None))
        status, answer, error, started = "error", None, None, time.monotonic()
        try:
            self.emit("run_start", task=task, protocol=self.protocol.name, settings=asdict(self.settings))
            answer = self._loop(run)
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
            if status in ("step_limit", "format_errors", "loop", "model_error") and run.look.questioned is not None:
                status, answer, error = "final", run.look.questioned, None  # what it said before the second look
            result = RunResult(status, answer, error, self.protocol.name, steps=run.steps.steps, errors=dict(errors),
                               tool_calls=run.steps.tool_calls, seconds=round(time.monotonic() - started, 3),
                               messages=run.history, **{kind: spent[kind] for kind in COUNTS})
            try:
                self.emit("run_end", **result.summary())
            except TraceError as failure:  # the answer, if any, is kept: only the record of it failed
                result.status, result.error = "error", str(failure)
        return result

    def _loop(self, run: Run) -> str:
        while True:
            run.history = run.compact(run.history, Untouched(run.task, run.steps.kept), run.replies.sent)
            turn = run.replies.next(run.history)
            if isinstance(turn, Final):
                run.history.append(turn.message)
                if run.steps.steps < self.settings.max_steps and (note := run.look.note(turn.answer, run.history)):
                    self.emit("second_look", answer=turn.answer, note=note["content"])
                    run.history.append(note)
                    continue
                self.emit("final", answer=turn.answer)
                return turn.answer
            run.history += run.steps.take(turn)


@dataclass
class Run:
    """One run as it goes: the history (the system prompt, earlier turns, the task, the steps since), the task's
    message, and the parts that act on it."""

    history: list[dict]
    task: dict
    replies: Replies
    steps: Steps
    compact: Compaction
    look: SecondLook  # at an answer whose figures come from nowhere


class Steps:
    """Acts on each step's tool calls: within the step limit, runs them (a step the model repeats is answered
    with its earlier results instead; a third in a row ends the run), and says when the last step is done."""

    def __init__(self, registry: Registry, protocol: ActionProtocol, settings: Settings, emit: Emit, errors: Counter,
                 spent: Counter):
        self.registry, self.protocol, self.settings, self.emit = registry, protocol, settings, emit
        self.errors, self.spent = errors, spent  # malformed calls by kind; what the tools spent (a helper's calls)
        self.steps = 0  # steps taken
        self.tool_calls: list[dict] = []  # every call made: {"tool", "arguments", "ok"}
        self.previous: list[tuple] | None = None  # the last step's calls, as (tool, arguments)
        self.repeats = 0  # how many steps in a row repeated the one before
        self.outputs: list[str] = []  # the last step's results, as the model was given them
        self.kept: list[dict] = []  # the results of the latest step that ran a keep_latest tool (the plan)

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
                futures = [pool.submit(self._run, call) for call in calls]
                pending = set(futures)
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
