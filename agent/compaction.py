"""Compaction that summarises: once the history nears the model's context window, its older part is replaced
by a brief the model writes of it. The system prompt, the task, the step holding the latest plan and the
latest steps stay as they are, and a cut falls only between steps, never between a call and its result."""
from __future__ import annotations

import json
import time
from typing import Callable

from agent import prompts
from agent.models import Model
from agent.parsing import strip_reasoning
from agent.protocols import asks_for_tools
from agent.streaming import Streamed
from agent.text import scrub, truncate

SHARE = 0.75  # of the context window: past it, the history is summarised
CHARS_PER_TOKEN = 3  # for an estimate that errs towards more tokens
MESSAGE_TOKENS = 4  # what a message costs beyond its text
RECENT_SHARE = 0.25  # of the context window: the latest steps that fit in it are kept as they are (one at least)
SUMMARY_WORDS = 250
MAX_SUMMARY_CHARS = 4000
MIN_MESSAGE_CHARS = 300  # of each message shown to the summariser, however long the transcript
TRANSCRIPT_SHARE = 0.4  # of the context window, for the part one request for a brief holds (beside the brief so far)
MAX_PIECES = 6  # requests for one brief at the most; beyond that, long messages are cut to fit


class Summariser:
    """Keeps one run's history within ``SHARE`` of ``context_window`` tokens (nothing, when it is None). Sizes
    come from the endpoint's reported prompt tokens of the latest call, plus an estimate for what came after;
    from an estimate alone before any call reported them."""

    def __init__(self, model: Model, context_window: int | None, task: dict, emit: Callable[..., None], replies):
        self.model = model.model if isinstance(model, Streamed) else model  # a brief is never shown as an answer
        self.limit = int(context_window * SHARE) if context_window else None
        self.window = context_window
        self.task, self.emit, self.replies = task, emit, replies  # the task: the very message, found by identity

    def __call__(self, history: list[dict], keep: list[dict]) -> bool:
        """Summarise the older part of ``history`` in place if it has grown past the limit; whether it did."""
        if self.limit is None:
            return False
        before = self.tokens(history)
        if before <= self.limit:
            return False
        old, kept_step, recent = self._split(history, keep)
        if not old:  # only the latest steps are left: nothing older to summarise
            return False
        started, chars = time.monotonic(), _chars(history)
        summary, usage, requests = self._summary(old, self.chars_per_token(history))
        if not summary:  # not asked again in this run: each step would pay for another empty brief
            self.limit = None
            self.emit("compaction_failed", reason="the model wrote an empty brief; the history is no longer "
                                                  "summarised in this run", usage=usage, requests=requests)
            return False
        note = {"role": "user", "content": prompts.render("summary", summary=summary)}
        history[:] = [history[0], self.task, note, *kept_step, *recent]
        self.replies.reported = None  # the latest call's size is not this history's any more
        self.emit("compaction", messages_before=len(old) + 2 + len(kept_step) + len(recent),
                  messages_after=len(history), chars_before=chars, chars_after=_chars(history),
                  tokens_before=before, tokens_after=self.tokens(history), summarised=len(old),
                  seconds=round(time.monotonic() - started, 3), requests=requests, usage=usage, summary=summary)
        return True

    def tokens(self, history: list[dict]) -> int:
        """The history's size in tokens: as the latest call reported it, plus an estimate of what came after."""
        counted, tokens = self.replies.reported or (0, 0)
        if counted > len(history):
            counted, tokens = 0, 0
        return tokens + sum(_estimate(m) for m in history[counted:])

    def _split(self, history: list[dict], keep: list[dict]) -> tuple[list[dict], list[dict], list[dict]]:
        """The older messages (the system prompt and the task aside), the step that holds a kept message (the
        plan) if it is among them, and the latest steps (as many as fit in RECENT_SHARE of the window, one at
        least); each step whole, a call with its results."""
        task = next(i for i, m in enumerate(history) if m is self.task)
        starts = [i for i in range(task + 1, len(history)) if asks_for_tools(history[i])]
        cut, size = task + 1, 0
        for start, end in reversed(list(zip(starts, [*starts[1:], len(history)]))):
            size += sum(_estimate(m) for m in history[start:end])
            if size > self.window * RECENT_SHARE and start != starts[-1]:
                break
            cut = start
        kept_at = [i for i in range(task + 1, cut) if any(history[i] is k for k in keep)]
        kept = range(0)
        if kept_at:
            first = max(s for s in starts if s <= kept_at[0])
            kept = range(first, next((s for s in starts if s > first), cut))
        old = [m for i, m in enumerate(history[:cut]) if i not in (0, task) and i not in kept]
        return old, [history[i] for i in kept], history[cut:]

    def chars_per_token(self, history: list[dict]) -> float:
        """Characters a token of this conversation: measured from the latest reported size where there is one
        (within 2 to 6), else the cautious estimate."""
        counted, tokens = self.replies.reported or (0, 0)
        if not tokens or not 0 < counted <= len(history):
            return CHARS_PER_TOKEN
        return min(max(_chars(history[:counted]) / tokens, 2.0), 6.0)

    def _summary(self, old: list[dict], chars_per_token: float) -> tuple[str, dict, int]:
        """The brief of ``old``: one brief for each piece of it that fits in ``TRANSCRIPT_SHARE`` of the window
        (a small model reads a short request well), joined. Each piece's brief is written on its own: asked to
        carry an earlier brief forward, the embedded model dropped its facts."""
        task = truncate(self.task.get("content") or "", MAX_SUMMARY_CHARS)
        budget = max(MIN_MESSAGE_CHARS, int((self.window or 0) * TRANSCRIPT_SHARE * chars_per_token) - len(task))
        each = min(budget, max(MIN_MESSAGE_CHARS, fair_share([_size(m) for m in old], budget * MAX_PIECES)))
        runs = pieces(old, each, budget)
        briefs, usage = [], {"prompt_tokens": 0, "completion_tokens": 0}
        for piece in runs:
            reply = self.replies.ask(self.model, [{"role": "user", "content": prompts.render(
                "summarise", words=SUMMARY_WORDS, task=task, transcript=transcript(piece, each))}])
            for kind in usage:
                usage[kind] += (reply.usage or {}).get(kind) or 0
            briefs.append(strip_reasoning(scrub(reply.content or "")).strip())
            if not briefs[-1]:
                return "", usage, len(briefs)
        share = MAX_SUMMARY_CHARS // len(runs)
        return "\n\n".join(b if len(b) <= share else b[:share] + " [...]" for b in briefs), usage, len(briefs)


def pieces(messages: list[dict], each: int, budget: int) -> list[list[dict]]:
    """The messages in order, in runs whose sizes (each cut to ``each``) add up to ``budget`` at most."""
    runs: list[list[dict]] = []
    size = 0
    for message in messages:
        length = min(_size(message), each)
        if not runs or size + length > budget:
            runs.append([])
            size = 0
        runs[-1].append(message)
        size += length
    return runs


def fair_share(sizes: list[int], budget: int) -> int:
    """The most characters each message may keep so that all fit in ``budget``: the short ones whole, the
    long ones cut to one equal share of what is left (so a long tool result is not cut for a short call's sake)."""
    left = budget
    for done, size in enumerate(sorted(sizes)):
        share = left // (len(sizes) - done)
        if size > share:
            return share
        left -= size
    return max(sizes, default=0)


def transcript(messages: list[dict], each: int) -> str:
    """The messages as text for the summariser, each cut to ``each`` characters (head and tail kept)."""
    lines = []
    for message in messages:
        text = truncate(message.get("content") or "", each)
        calls = [f"{c['function']['name']}({c['function']['arguments']})" for c in message.get("tool_calls") or []]
        if calls:
            text = (text + "\n" if text else "") + "calls: " + "; ".join(truncate(c, each) for c in calls)
        who = {"tool": "Tool result", "assistant": "Assistant"}.get(message["role"], "User")
        lines.append(f"{who}: {text}")
    return "\n\n".join(lines)


def _size(message: dict) -> int:
    return len(message.get("content") or "") + sum(len(c["function"]["name"]) + len(c["function"]["arguments"]) + 2
                                                    for c in message.get("tool_calls") or [])


def _estimate(message: dict) -> int:
    size = len(message.get("content") or "")
    if message.get("tool_calls"):
        size += len(json.dumps(message["tool_calls"]))
    return size // CHARS_PER_TOKEN + MESSAGE_TOKENS


def _chars(history: list[dict]) -> int:
    return sum(len(m.get("content") or "") for m in history)
