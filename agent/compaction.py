"""Compaction: keeping a run's history within bounds as it grows. One interface, ``Compaction``: the history in, the
history out (the same list when nothing changed, else a new one; the list given is left as it was), told what it
may not touch. Two strategies behind it, which the settings choose (``compaction``):

- ``DropOldResults`` (``max_history_chars``): past a size in characters, the oldest long tool results are replaced
  by a note that they were dropped;
- ``Summariser`` (``context_window``): once the history nears the model's context window, its older steps keep
  their calls and have their long results replaced by the model's notes of them; the oldest, past a share of the
  window, become one brief.

Neither touches the system prompt, the task or the step holding the latest plan; the latest step stays as it is,
and a cut falls only between steps, never between a call and its result."""
from __future__ import annotations

import json
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Protocol

from agent import prompts
from agent.config import Settings
from agent.models import Model
from agent.parsing import strip_reasoning
from agent.protocols import asks_for_tools
from agent.replies import Sent, counted
from agent.text import scrub, truncate
from agent.trace import Emit

KEEP_SHORT = 200  # tool results this short are never dropped: it would save little
SHARE = 0.75  # of the context window: past it, the history is summarised
CHARS_PER_TOKEN = 3  # for an estimate that errs towards more tokens
MESSAGE_TOKENS = 4  # what a message costs beyond its text
RECENT_SHARE = 0.25  # of the context window: the latest steps that fit in it are kept as they are (one at least)
SHORT_RESULT_CHARS = 400  # a result this long is kept as it is; a longer one is replaced by the model's note of it
NOTE_WORDS = 60
NOTE_CHARS = 800  # of a note and what it quotes
MAX_NOTES = 12  # requests for one compaction at the most; the results beyond them are cut to NOTE_CHARS
MAX_TASK_CHARS = 4000
MAX_SUMMARY_CHARS = 8000
BRIEF_SHARE = 0.25  # of the context window: the older steps past it (their calls and notes) become one brief
NOTED = "(summarised, to keep the conversation short)"
MIN_RESULT_CHARS = 1000  # of a long result shown to the model for its note, however small the window
TRANSCRIPT_SHARE = 0.6  # of the context window, for the result one request for a note holds


_CLAUSE = re.compile(r"(?<=[,.;:])\s+|\n+")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_WORD = re.compile(r"[^\W\d_]{4,}")
STEM = 5  # letters of a word compared: "revenues" and "Revenue" are one word
COMMON = frozenset("that this with from them then they what when which where there their have into your each "
                   "read file some more most only also than time tell find give take".split())


@dataclass(frozen=True)
class Untouched:
    """What compaction may not touch, besides the system prompt (the first message): the run's task (what comes
    before it is earlier turns of a conversation) and the messages that must stay whole (the latest plan)."""

    task: dict
    kept: list[dict] = field(default_factory=list)


class Compaction(Protocol):
    def __call__(self, history: list[dict], untouched: Untouched, sent: Sent | None) -> list[dict]:
        """``history`` kept within bounds: the same list when nothing changed, else a new one. ``sent``: the latest
        request and the prompt tokens the endpoint counted of it (its history may be another list than this)."""
        ...


def compaction(settings: Settings, model: Model, emit: Emit, spent: Counter) -> Compaction:
    """The compaction ``settings`` ask for, for one run: old results dropped past ``max_history_chars``, older
    steps summarised near ``context_window`` (by ``model``, its calls added to ``spent``), both in that order, or
    none. ``emit`` hears what each does."""
    strategies: list[Compaction] = []
    if settings.max_history_chars is not None:
        strategies.append(DropOldResults(settings.max_history_chars, emit))
    if settings.context_window:
        strategies.append(Summariser(model, settings.context_window, emit, spent))
    return strategies[0] if len(strategies) == 1 else InTurn(strategies)


class InTurn:
    """Several compactions, each given what the one before left."""

    def __init__(self, strategies: list[Compaction]):
        self.strategies = strategies

    def __call__(self, history: list[dict], untouched: Untouched, sent: Sent | None) -> list[dict]:
        for strategy in self.strategies:
            history = strategy(history, untouched, sent)
        return history


class DropOldResults:
    """Keeps the history within ``limit`` characters: the oldest long tool results become a note that they were
    dropped, until it fits. The system prompt, the tasks, the latest step and what is untouched stay whole."""

    def __init__(self, limit: int, emit: Emit):
        self.limit, self.emit = limit, emit
        self.measured: tuple[list[dict], int, int] | None = None  # a history, how many messages counted, their size

    def __call__(self, history: list[dict], untouched: Untouched, sent: Sent | None) -> list[dict]:
        done, size = self.measured[1:] if self.measured and self.measured[0] is history else (0, 0)
        size += sum(len(m.get("content") or "") for m in history[done:])
        if size > self.limit:
            history, size = self._dropped(history, size, [untouched.task, *untouched.kept])
        self.measured = history, len(history), size
        return history

    def _dropped(self, history: list[dict], size: int, keep: list[dict]) -> tuple[list[dict], int]:
        """A new history with the oldest long results replaced by a note, until it fits; and its size."""
        history = list(history)  # a new message in a new list: the one sent before stays as sent
        latest = max((i for i, m in enumerate(history) if m["role"] == "assistant"), default=0)
        for index, message in enumerate(history[2:latest], 2):
            droppable = is_result(history, index) and not any(message is k for k in keep)
            if size > self.limit and droppable and len(message["content"]) > KEEP_SHORT:
                note = prompts.render("dropped_result", characters=len(message["content"]))
                size -= len(message["content"]) - len(note)
                self.emit("compacted", dropped=len(message["content"]))
                history[index] = {**message, "content": note}
        return history, size


def is_result(history: list[dict], index: int) -> bool:
    """Whether the message at ``index`` carries tool results (in either protocol), not a task of the user."""
    message = history[index]
    return message["role"] == "tool" or (message["role"] == "user" and index > 0
                                         and asks_for_tools(history[index - 1]))


class Summariser:
    """Keeps one run's history within ``SHARE`` of ``context_window`` tokens. Sizes come from the endpoint's
    reported prompt tokens of the latest request, plus an estimate for what came after; from an estimate alone
    before any call reported them. The notes are asked of ``model`` (never shown as an answer); their calls and
    tokens are added to ``spent``."""

    def __init__(self, model: Model, context_window: int, emit: Emit, spent: Counter):
        self.model, self.emit, self.spent = model, emit, spent
        self.limit: int | None = int(context_window * SHARE)
        self.window = context_window

    def __call__(self, history: list[dict], untouched: Untouched, sent: Sent | None) -> list[dict]:
        """A new history with its older part summarised, if it has grown past the limit; else ``history``."""
        if self.limit is None:
            return history
        before = self.tokens(history, sent)
        if before <= self.limit:
            return history
        earlier, old, kept_step, recent = self._split(history, untouched)
        if not earlier and not old:  # only the latest steps are left: nothing older to summarise
            return history
        started, chars = time.monotonic(), _chars(history)
        shortened = self._shortened(untouched.task, earlier, old, kept_step, self.chars_per_token(history, sent))
        if shortened.failed:  # not asked again in this run: each step would pay for another empty note
            self.limit = None
            self.emit("compaction_failed", reason="the model wrote an empty note; the history is no longer "
                                                  "summarised in this run", usage=shortened.usage,
                      requests=shortened.requests)
            return history
        brief = [{"role": "user", "content": prompts.render("summary", summary=shortened.brief)}] \
            if shortened.brief else []
        compacted = [history[0], untouched.task, *brief, *shortened.messages, *recent]
        if _chars(compacted) >= chars:  # every older step is as short as it gets already
            return history
        unchanged = sum(any(m is o for o in old) for m in shortened.messages)
        self.emit("compaction", messages_before=len(history), summarised=len(earlier) + len(old) - unchanged,
                  messages_after=len(compacted), chars_before=chars, chars_after=_chars(compacted),
                  tokens_before=before, tokens_after=self.tokens(compacted, sent),
                  seconds=round(time.monotonic() - started, 3), requests=shortened.requests,
                  usage=shortened.usage, summary=shortened.text)
        return compacted

    def tokens(self, history: list[dict], sent: Sent | None) -> int:
        """The history's size in tokens: as the endpoint counted it when it was last sent (if ``sent`` is of this
        very history), plus an estimate of what came after."""
        known, tokens = _reported(history, sent)
        return tokens + sum(_estimate(m) for m in history[known:])

    def _split(self, history: list[dict],
               untouched: Untouched) -> tuple[list[dict], list[dict], list[dict], list[dict]]:
        """The messages before the task (earlier turns of a conversation), the older ones after it, the step
        among those that holds a kept message (the plan), and the latest steps (as many as fit in RECENT_SHARE
        of the window, one at least); each step whole, a call with its results."""
        task = next(i for i, m in enumerate(history) if m is untouched.task)
        starts = [i for i in range(task + 1, len(history)) if asks_for_tools(history[i])]
        cut, size = task + 1, 0
        for start, end in reversed(list(zip(starts, [*starts[1:], len(history)]))):
            size += sum(_estimate(m) for m in history[start:end])
            if size > self.window * RECENT_SHARE and start != starts[-1]:
                break
            cut = start
        kept_at = [i for i in range(task + 1, cut) if any(history[i] is k for k in untouched.kept)]
        kept = range(0)
        if kept_at:
            first = max(s for s in starts if s <= kept_at[0])
            kept = range(first, next((s for s in starts if s > first), cut))
        return history[1:task], history[task + 1:cut], [history[i] for i in kept], history[cut:]

    def chars_per_token(self, history: list[dict], sent: Sent | None) -> float:
        """Characters a token of this conversation: measured from the latest reported size of this history where
        there is one (within 2 to 6), else the cautious estimate."""
        known, tokens = _reported(history, sent)
        if not tokens or not known:
            return CHARS_PER_TOKEN
        return min(max(_chars(history[:known]) / tokens, 2.0), 6.0)

    def _shortened(self, task_message: dict, earlier: list[dict], old: list[dict], kept: list[dict],
                   chars_per_token: float) -> Shortened:
        """The older part, shortened where it stands: each step's call as it was, and its results replaced by
        what they said. A short result stays as it is; the model reads each long one alone, in a request of its
        own, for the facts the task needs (a figure its note lost is quoted after it: ``missed_figures``).
        (Asked for one brief of several long results, the embedded 1.5B model lost their figures or repeated
        itself; shown one brief instead of its own calls, it read the same files again.) The ``kept`` step
        (the plan) stays as it is, and replies that were re-asked are left out. The ``earlier`` turns of a
        conversation, and the oldest steps past BRIEF_SHARE of the window, become the lines of one brief, an
        earlier brief's lines carried on as they are."""
        task = truncate(task_message.get("content") or "", MAX_TASK_CHARS)
        budget = max(MIN_RESULT_CHARS, int((self.window or 0) * TRANSCRIPT_SHARE * chars_per_token) - len(task))
        done = Shortened()
        entries: list[tuple[str, list[dict], bool]] = []  # a line of text ("" for the kept step), its messages,
        for before_task, part in ((True, earlier), (False, old)):  # and whether it came before the task
            for call, result, messages in steps(part):
                if any(m is k for m in messages for k in kept):
                    entries.append(("", messages, False))
                    continue
                line, messages = self._shorten(call, result, messages, task, budget, done)
                if done.failed:
                    return done
                entries.append((line, messages, before_task))
        room = min(MAX_SUMMARY_CHARS, int((self.window or 0) * BRIEF_SHARE * chars_per_token))
        size = sum(_chars(messages) for _, messages, _ in entries)
        folded, stay = [], []
        for line, messages, before_task in entries:  # the oldest into the brief, until the rest fit in the room
            if line and (before_task or size > room):
                folded.append(line)
                size -= _chars(messages)
            else:
                stay.append(messages)
        done.brief = truncate("\n".join(folded), MAX_SUMMARY_CHARS)
        done.messages = [m for messages in stay for m in messages]
        done.text = truncate("\n".join(line for line, _, _ in entries if line), MAX_SUMMARY_CHARS)
        return done

    def _shorten(self, call: str | None, result: str, messages: list[dict], task: str, budget: int,
                 done: Shortened) -> tuple[str, list[dict]]:
        """One older step's line of text and its messages, its long results replaced by the model's note (or,
        past MAX_NOTES requests, cut); a turn of a conversation or an earlier brief as it is."""
        if _noted(messages):  # by an earlier compaction
            result = messages[1]["content"][len(NOTED):].strip()
        elif call is not None and len(result) > SHORT_RESULT_CHARS:
            if done.requests < MAX_NOTES:
                note = self._note(task, call, truncate(result, budget), done)
                if not note:
                    done.failed = True
                    return "", messages
                quoted = missed_figures(result, task, note)
                result = f"{note} The result says: {quoted}" if quoted else note
            result = _line(result, NOTE_CHARS)
            messages = [messages[0], *_replaced(messages[1:], result)]
        return (result if call is None else f"- {call} -> {_line(result, NOTE_CHARS)}"), messages

    def _note(self, task: str, call: str, result: str, done: Shortened) -> str:
        """The model's note of one long result: what it says that the task needs (empty if it wrote none)."""
        reply = counted(self.model.complete([{"role": "user", "content": prompts.render(
            "note", task=task, call=call, result=result, words=NOTE_WORDS)}]), self.spent)
        done.requests += 1
        for kind in done.usage:
            done.usage[kind] += (reply.usage or {}).get(kind) or 0
        return unrepeated(strip_reasoning(scrub(reply.content or ""))).strip()


@dataclass
class Shortened:
    """The older part as compaction leaves it: a brief of its oldest steps (may be empty), the messages of the
    others, shortened; the text of all of it for the trace; and what the notes cost."""
    brief: str = ""
    messages: list[dict] = field(default_factory=list)
    text: str = ""
    usage: dict = field(default_factory=lambda: {"prompt_tokens": 0, "completion_tokens": 0})
    requests: int = 0
    failed: bool = False


def _noted(messages: list[dict]) -> bool:
    """Whether a step's results were replaced by a note already, by an earlier compaction."""
    return len(messages) > 1 and (messages[1].get("content") or "").startswith(NOTED)


def _replaced(results: list[dict], note: str) -> list[dict]:
    """A step's result messages with their text replaced by ``note`` (the first) and a pointer to it (the
    others, in native mode, one per call): each keeps its role and tool_call_id."""
    return [{**m, "content": f"{NOTED} {note}" if i == 0 else f"{NOTED} with the result above"}
            for i, m in enumerate(results)]


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


def steps(messages: list[dict]) -> list[tuple[str | None, str, list[dict]]]:
    """The older messages as (call, result, messages): a step's calls and all that answered them as text, and
    its messages; (None, text, [message]) for an earlier brief's lines or a turn of a conversation. A reply that
    was re-asked, and its re-ask, are left out."""
    found: list[tuple[str | None, str, list[dict]]] = []
    reask = prompts.load("reask").split("(")[0]
    header = prompts.load("summary").split("$summary")[0]
    i = 0
    while i < len(messages):
        message, text = messages[i], messages[i].get("content") or ""
        if asks_for_tools(message):
            end = next((j for j in range(i + 1, len(messages)) if messages[j]["role"] == "assistant"), len(messages))
            found.append((_calls(message), "\n".join(m.get("content") or "" for m in messages[i + 1:end]).strip(),
                          messages[i:end]))
            i = end
            continue
        following = messages[i + 1].get("content") or "" if i + 1 < len(messages) else ""
        if message["role"] == "assistant" and following.startswith(reask):
            i += 2  # a reply that could not be used, and the re-ask
            continue
        if message["role"] == "user" and text.startswith(header):
            found.append((None, text[len(header):].strip(), [message]))
        elif text.strip():
            who = "Assistant" if message["role"] == "assistant" else "User"
            found.append((None, f"{who}: {_line(text)}", [message]))
        i += 1
    return found


def _line(text: str, limit: int = SHORT_RESULT_CHARS) -> str:
    """``text`` on one line, cut to ``limit`` characters (its head and tail kept)."""
    return " ".join(truncate(" ".join(text.split()), limit).split())


def _calls(message: dict) -> str:
    """A step's calls as `tool {arguments}`, in either protocol."""
    if message.get("tool_calls"):
        calls = [(c["function"]["name"], c["function"]["arguments"]) for c in message["tool_calls"]]
    else:
        value = json.loads(message["content"])
        calls = [(a["tool"], json.dumps(a.get("arguments"), ensure_ascii=False))
                 for a in (value if isinstance(value, list) else [value])]
    return "; ".join(f"{name} {truncate(str(arguments), SHORT_RESULT_CHARS)}" for name, arguments in calls)


def _reported(history: list[dict], sent: Sent | None) -> tuple[int, int]:
    """How many of the history's first messages the endpoint counted, and their prompt tokens; none when the latest
    request was of another history (one that compaction has since replaced)."""
    return (sent.messages, sent.tokens) if sent is not None and sent.history is history else (0, 0)


def _estimate(message: dict) -> int:
    size = len(message.get("content") or "")
    if message.get("tool_calls"):
        size += len(json.dumps(message["tool_calls"]))
    return size // CHARS_PER_TOKEN + MESSAGE_TOKENS


def _chars(history: list[dict]) -> int:
    return sum(len(m.get("content") or "") for m in history)
