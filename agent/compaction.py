"""Compaction that summarises: once the history nears the model's context window, its older steps keep their
calls and have their long results replaced by the model's notes of them; the oldest, past a share of the
window, become one brief. The system prompt, the task, the step holding the latest plan and the latest steps
stay as they are, and a cut falls only between steps, never between a call and its result."""
from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
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
        earlier, old, kept_step, recent = self._split(history, keep)
        if not earlier and not old:  # only the latest steps are left: nothing older to summarise
            return False
        started, chars = time.monotonic(), _chars(history)
        shortened = self._shortened(earlier, old, kept_step, self.chars_per_token(history))
        if shortened.failed:  # not asked again in this run: each step would pay for another empty note
            self.limit = None
            self.emit("compaction_failed", reason="the model wrote an empty note; the history is no longer "
                                                  "summarised in this run", usage=shortened.usage,
                      requests=shortened.requests)
            return False
        brief = [{"role": "user", "content": prompts.render("summary", summary=shortened.brief)}] \
            if shortened.brief else []
        compacted = [history[0], self.task, *brief, *shortened.messages, *recent]
        if _chars(compacted) >= chars:  # every older step is as short as it gets already
            return False
        unchanged = sum(any(m is o for o in old) for m in shortened.messages)
        count, history[:] = len(history), compacted
        self.replies.reported = None  # the latest call's size is not this history's any more
        self.emit("compaction", messages_before=count, summarised=len(earlier) + len(old) - unchanged,
                  messages_after=len(history), chars_before=chars, chars_after=_chars(history),
                  tokens_before=before, tokens_after=self.tokens(history),
                  seconds=round(time.monotonic() - started, 3), requests=shortened.requests,
                  usage=shortened.usage, summary=shortened.text)
        return True

    def tokens(self, history: list[dict]) -> int:
        """The history's size in tokens: as the latest call reported it, plus an estimate of what came after."""
        counted, tokens = self.replies.reported or (0, 0)
        if counted > len(history):
            counted, tokens = 0, 0
        return tokens + sum(_estimate(m) for m in history[counted:])

    def _split(self, history: list[dict], keep: list[dict]) -> tuple[list[dict], list[dict], list[dict], list[dict]]:
        """The messages before the task (earlier turns of a conversation), the older ones after it, the step
        among those that holds a kept message (the plan), and the latest steps (as many as fit in RECENT_SHARE
        of the window, one at least); each step whole, a call with its results."""
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
        return history[1:task], history[task + 1:cut], [history[i] for i in kept], history[cut:]

    def chars_per_token(self, history: list[dict]) -> float:
        """Characters a token of this conversation: measured from the latest reported size where there is one
        (within 2 to 6), else the cautious estimate."""
        counted, tokens = self.replies.reported or (0, 0)
        if not tokens or not 0 < counted <= len(history):
            return CHARS_PER_TOKEN
        return min(max(_chars(history[:counted]) / tokens, 2.0), 6.0)

    def _shortened(self, earlier: list[dict], old: list[dict], kept: list[dict], chars_per_token: float) -> Shortened:
        """The older part, shortened where it stands: each step's call as it was, and its results replaced by
        what they said. A short result stays as it is; the model reads each long one alone, in a request of its
        own, for the facts the task needs (a figure its note lost is quoted after it: ``missed_figures``).
        (Asked for one brief of several long results, the embedded 1.5B model lost their figures or repeated
        itself; shown one brief instead of its own calls, it read the same files again.) The ``kept`` step
        (the plan) stays as it is, and replies that were re-asked are left out. The ``earlier`` turns of a
        conversation, and the oldest steps past BRIEF_SHARE of the window, become the lines of one brief, an
        earlier brief's lines carried on as they are."""
        task = truncate(self.task.get("content") or "", MAX_TASK_CHARS)
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
        reply = self.replies.ask(self.model, [{"role": "user", "content": prompts.render(
            "note", task=task, call=call, result=result, words=NOTE_WORDS)}])
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


def _estimate(message: dict) -> int:
    size = len(message.get("content") or "")
    if message.get("tool_calls"):
        size += len(json.dumps(message["tool_calls"]))
    return size // CHARS_PER_TOKEN + MESSAGE_TOKENS


def _chars(history: list[dict]) -> int:
    return sum(len(m.get("content") or "") for m in history)
