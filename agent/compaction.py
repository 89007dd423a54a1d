"""Compaction that summarises: once the history nears the model's context window, its older part is replaced
by a brief the model writes of it. The system prompt, the task, the step holding the latest plan and the
latest steps stay as they are, and a cut falls only between steps, never between a call and its result."""
from __future__ import annotations

import json
import re
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
SHORT_RESULT_CHARS = 400  # a result this long is kept in the brief as it is; a longer one, as the model's note of it
NOTE_WORDS = 60
MAX_NOTES = 12  # requests for one brief at the most; the results beyond them are cut to SHORT_RESULT_CHARS
MAX_TASK_CHARS = 4000
MAX_SUMMARY_CHARS = 8000
MIN_RESULT_CHARS = 1000  # of a long result shown to the model for its note, however small the window
TRANSCRIPT_SHARE = 0.6  # of the context window, for the result one request for a note holds


_CLAUSE = re.compile(r"(?<=[,.;:])\s+|\n+")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_WORD = re.compile(r"[^\W\d_]{4,}")
STEM = 5  # letters of a word compared: "revenues" and "Revenue" are one word
COMMON = frozenset("that this with from them then they what when which where there their have into your each "
                   "read file some more most only also than time tell find give take".split())


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
        """The brief of ``old``: a line for each step, its call and what its result said. A short result is kept
        as it is; the model reads each long one alone, in a request of its own, for the facts the task needs
        (and a figure its note lost is quoted after it, see ``missed_figures``).
        (Asked for one brief of several long results, the embedded 1.5B model lost their figures or repeated
        itself; one result at a time it keeps them.) An earlier brief's lines are carried on as they are."""
        task = truncate(self.task.get("content") or "", MAX_TASK_CHARS)
        budget = max(MIN_RESULT_CHARS, int((self.window or 0) * TRANSCRIPT_SHARE * chars_per_token) - len(task))
        lines, usage, requests = [], {"prompt_tokens": 0, "completion_tokens": 0}, 0
        for call, result in steps(old):
            if call is None:  # an earlier brief, or a turn of a conversation
                lines.append(result)
                continue
            if len(result) > SHORT_RESULT_CHARS and requests < MAX_NOTES:
                reply = self.replies.ask(self.model, [{"role": "user", "content": prompts.render(
                    "note", task=task, call=call, result=truncate(result, budget), words=NOTE_WORDS)}])
                requests += 1
                for kind in usage:
                    usage[kind] += (reply.usage or {}).get(kind) or 0
                note = unrepeated(strip_reasoning(scrub(reply.content or "")))
                if not note.strip():
                    return "", usage, requests
                quoted = missed_figures(result, task, note)
                result = f"{note} The result says: {quoted}" if quoted else note
            lines.append(f"- {call} -> {_line(result)}")
        return truncate("\n".join(lines), MAX_SUMMARY_CHARS), usage, requests


def unrepeated(text: str) -> str:
    """``text`` with each clause once: a small model at temperature 0 may write "1200 thousand euros, 1200
    thousand euros, ..." to its token limit."""
    kept: dict[str, str] = {}
    for clause in _CLAUSE.split(text):
        kept.setdefault(clause.strip().rstrip(",.;:").casefold(), clause.strip())
    return " ".join(clause for key, clause in kept.items() if key)


def missed_figures(result: str, task: str, note: str) -> str:
    """The sentences of ``result`` that share the most words with ``task``, as they are, when they hold a
    figure ``note`` lacks (up to SHORT_RESULT_CHARS): the embedded 1.5B model's note of a report once kept only
    its title, and so lost the very figure the task asked for."""
    wanted = _stems(task)
    scored = [(len(wanted & _stems(s)), " ".join(s.split())) for s in _SENTENCE.split(result) if _NUMBER.search(s)]
    best = max((score for score, _ in scored), default=0)
    have = {n.replace(",", "") for n in _NUMBER.findall(note)}
    missed = [s for score, s in scored if best and score == best
              and {n.replace(",", "") for n in _NUMBER.findall(s)} - have]
    quoted = ""
    for sentence in missed:
        if len(quoted) + len(sentence) >= SHORT_RESULT_CHARS:
            break
        quoted = f"{quoted} {sentence}".strip()
    return quoted


def _stems(text: str) -> set[str]:
    return {w[:STEM] for w in _WORD.findall(text.casefold()) if w not in COMMON}


def steps(messages: list[dict]) -> list[tuple[str | None, str]]:
    """The older messages as (call, result) text: a step's calls and all that answered them; (None, text) for
    an earlier brief's lines or a turn of a conversation. A reply that was re-asked, and its re-ask, are left out."""
    found: list[tuple[str | None, str]] = []
    reask = prompts.load("reask").split("(")[0]
    header = prompts.load("summary").split("$summary")[0]
    i = 0
    while i < len(messages):
        message, text = messages[i], messages[i].get("content") or ""
        if asks_for_tools(message):
            end = next((j for j in range(i + 1, len(messages)) if messages[j]["role"] == "assistant"), len(messages))
            found.append((_calls(message), "\n".join(m.get("content") or "" for m in messages[i + 1:end]).strip()))
            i = end
            continue
        following = messages[i + 1].get("content") or "" if i + 1 < len(messages) else ""
        if message["role"] == "assistant" and following.startswith(reask):
            i += 2  # a reply that could not be used, and the re-ask
            continue
        if message["role"] == "user" and text.startswith(header):
            found.append((None, text[len(header):].strip()))
        elif text.strip():
            who = "Assistant" if message["role"] == "assistant" else "User"
            found.append((None, f"{who}: {_line(text)}"))
        i += 1
    return found


def _line(text: str) -> str:
    """``text`` on one line, cut to SHORT_RESULT_CHARS (its head and tail kept)."""
    return " ".join(truncate(" ".join(text.split()), SHORT_RESULT_CHARS).split())


def _calls(message: dict) -> str:
    """A step's calls as `tool {arguments}`, in either protocol."""
    if message.get("tool_calls"):
        calls = [(c["function"]["name"], c["function"]["arguments"]) for c in message["tool_calls"]]
    else:
        value = json.loads(message["content"])
        calls = [(a["tool"], json.dumps(a.get("arguments"), ensure_ascii=False))
                 for a in (value if isinstance(value, list) else [value])]
    return "; ".join(f"{name} {truncate(str(arguments), SHORT_RESULT_CHARS)}" for name, arguments in calls)


def _estimate(message: dict) -> int:
    size = len(message.get("content") or "")
    if message.get("tool_calls"):
        size += len(json.dumps(message["tool_calls"]))
    return size // CHARS_PER_TOKEN + MESSAGE_TOKENS


def _chars(history: list[dict]) -> int:
    return sum(len(m.get("content") or "") for m in history)
