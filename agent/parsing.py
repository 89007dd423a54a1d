"""Find the one JSON action in a model reply (leniently) and validate it against the action schema (strictly)."""
from __future__ import annotations

import bisect
import copy
import json
import re
import sys
from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from agent.text import kind_of, scrub
from agent.tools.docs import MAX_MESSAGE, fault_note
from agent.tools.text import shorten
from agent.tools.registry import bad_arguments, unknown_tool

MAX_BATCH = 8
MAX_REPLY_CHARS = 256_000  # a longer reply is refused unread
MAX_DEPTH = 500  # nesting of a decoded value; deeper is refused before anything recurses into it
REPAIRS = ("python_literals", "single_quotes", "trailing_commas", "control_characters", "unescaped_quotes",
           "mismatched_brackets", "unclosed_brackets")
TRUNCATED = ("your reply was cut off (it hit the token limit) before the JSON was complete; "
             "reply with a shorter JSON action")
TOO_LONG = "your reply was {:,} characters long, over the limit of {:,}; send one short JSON action"
TOO_DEEP = f"the JSON is nested too deeply (more than {MAX_DEPTH} levels)"
TOO_MANY_DIGITS = "a number in the JSON has too many digits (more than {}); send long numbers as strings"
ANSWER_NOTE = "the answer must be a JSON value valid against the answer schema"
MULTIPLE = "found {} JSON actions; send exactly one (or a JSON array of tool_call objects to run several calls)"

NO_ARITHMETIC = "\nJSON has no arithmetic: work the value out and write the number itself, not an expression"

_THINK_TAG = re.compile(r"<(/?)(think|thinking)\s*>", re.I)
_FENCE = re.compile(r"```[\w-]*+[ \t]*+\n?(.*?)```", re.S)  # possessive: no backtracking into a long tag
# a `{` or `[` where strict decoding can get past the first character, else one where it fails right there
_START = re.compile(r"""(?P<value>\{(?=[ \t\n\r]*+["}])|\[(?=[ \t\n\r]*+["{\[\]\-0-9tfnNI]))"""
                    r"""|(?P<brace>\{)[ \t\n\r]*+|\[[ \t\n\r]*+""")
_BRACKET = re.compile(r"[{\[]")
_NO_NAME, _NO_VALUE = "Expecting property name enclosed in double quotes", "Expecting value"  # as json says
_WINDOW = 128  # characters first decoded at a candidate `{` or `[`; doubled while decoding runs into the end
_MARGIN = 16  # an error this close to the end of a window may come from the cut (a literal or number split)
_REPAIR_CALLS, _REPAIR_CHARS = 20, MAX_REPLY_CHARS  # the repair pass's budget per reply
_REPAIR_TOKEN = re.compile(r"(?P<space>[ \t\r\n]+)|(?P<open>[{\[])|(?P<close>[}\]])"
                           r"|(?P<trailing>,(?=[ \t\r\n]*[}\]]))|(?P<punct>[:,])|(?P<quote>[\"'])|(?P<word>[\w.+-]+)")
_STRING = {'"': re.compile(r'"([^"\\]*(?:\\.[^"\\]*)*)"', re.S), "'": re.compile(r"'([^'\\]*(?:\\.[^'\\]*)*)'", re.S)}
_STRING_FIX = re.compile(r'\\(.)|"|[\x00-\x1f]', re.S)
# a whole reply that is one final answer, its answer running to the last `"` before the closing brace
_LOOSE_FINAL = re.compile(r'[ \t\n\r]*\{[ \t\n\r]*"type"[ \t\n\r]*:[ \t\n\r]*"final"[ \t\n\r]*,'
                          r'[ \t\n\r]*"answer"[ \t\n\r]*:[ \t\n\r]*"(.*)"[ \t\n\r]*\}[ \t\n\r]*', re.S)
_ACTION_INSIDE = re.compile(r'\{[ \t\n\r]*"type"[ \t\n\r]*:')
_KEY_OR_STRING = re.compile(r'[ \t\n\r]*[":]')
_WHITESPACE = " \t\n\r"  # JSON's
_SPACE_TO_END = re.compile(r"[ \t\n\r]*+\Z")  # matched where it starts: stops at the first other character
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_ARITHMETIC = re.compile(r"[ \t]*[-+*/%]")  # an operator where the decoder wanted a `,` or `}` after a number
_NUMBER_END = re.compile(r"[0-9][ \t]*\Z")
_JSON_WORDS = {"true", "false", "null", "NaN", "Infinity", "-Infinity"}
_PY_LITERALS = {"True": "true", "False": "false", "None": "null"}


class ParseError(Exception):
    """A reply that is not exactly one valid action; `message` is written for the model."""

    def __init__(self, kind: str, message: str):
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


@dataclass
class Parsed:
    value: dict | list
    repairs: list[str] = field(default_factory=list)


@dataclass
class _Found:
    value: object
    repairs: list[str]
    start: int
    end: int


class _Broken(Exception):
    """Where and why strict decoding stopped (a JSONDecodeError costs O(position) to make: it counts lines)."""

    def __init__(self, position: int, reason: str):
        self.position, self.reason = position, reason


class ActionSchema:
    """The JSON Schema of a reply (``schema``: draft 2020-12, inline, anyOf at the top) kept with its parts, each
    compiled once: the final answer's branch, a branch per tool, and whether a batch of calls is allowed. A reply
    is checked against the one branch its `type` and `tool` pick. Made by action_schema."""

    def __init__(self, final: dict | None, calls: dict[str, dict], batch: dict | None, answer: dict | None = None):
        self.schema = {"anyOf": [*([final] if final else []), *calls.values(), *([batch] if batch else [])]}
        Draft202012Validator.check_schema(self.schema)
        self.final = Draft202012Validator(final) if final else None  # None: a final answer is not allowed
        self.answer = Draft202012Validator(answer) if answer is not None else None  # None: the answer is text
        self.tools = {name: Draft202012Validator(branch) for name, branch in calls.items()}
        self.arguments = {name: Draft202012Validator(branch["properties"]["arguments"])
                          for name, branch in calls.items()}
        self.batch = batch is not None


def action_schema(tools: dict[str, dict], batch: bool = True, final: bool = True,
                  answer: dict | None = None) -> ActionSchema:
    """The action schema for tools given as name -> parameters; ``batch``: a JSON array of calls is allowed too;
    ``final``: a final answer is allowed (without it, a reply must call a tool); ``answer``: the JSON Schema
    the final answer's value must be valid against (self-contained: no $ref), instead of a text."""
    if not (final or tools):
        raise ValueError("an action schema needs the final answer or at least one tool")
    final_branch = {"type": "object",
                    "properties": {"type": {"const": "final"},
                                   "answer": {"type": "string"} if answer is None else copy.deepcopy(answer)},
                    "required": ["type", "answer"], "additionalProperties": False}
    calls = {name: {"type": "object",
                    "properties": {"type": {"const": "tool_call"}, "tool": {"const": name},
                                   "arguments": copy.deepcopy(parameters)},
                    "required": ["type", "tool", "arguments"], "additionalProperties": False}
             for name, parameters in tools.items()}
    array = {"type": "array", "items": {"anyOf": list(calls.values())}, "minItems": 1, "maxItems": MAX_BATCH}
    return ActionSchema(final_branch if final else None, calls, array if batch and calls else None,
                        answer if final else None)


def parse_action(text: str | None, actions: ActionSchema, finish_reason: str | None = None) -> Parsed:
    """Lenient extraction, strict validation against `actions` (from action_schema). Raises ParseError.

    Strings in the value have no lone surrogates (they become U+FFFD).
    """
    try:
        try:
            if text and len(text) > MAX_REPLY_CHARS:
                raise ParseError("too_long", TOO_LONG.format(len(text), MAX_REPLY_CHARS))
            found = _extract(text, joinable=actions.batch)
            if finish_reason == "length" and "unclosed_brackets" in found.repairs:
                raise ParseError("truncated", TRUNCATED)  # what the model did not write is not guessed
            _validate(found.value, actions)
        except RecursionError:
            raise ParseError("invalid_json", TOO_DEEP) from None
    except ParseError as error:
        if finish_reason == "length":
            raise ParseError("truncated", TRUNCATED) from error
        raise
    return Parsed(scrub(found.value), found.repairs)


def parse_answer(text: str | None, answer: Draft202012Validator, finish_reason: str | None = None) -> object:
    """A reply that is an answer as JSON (native mode's answer with an answer schema): its reasoning dropped, the
    JSON taken whole (or from a fenced block), decoded strictly and validated by ``answer``. Raises ParseError."""
    text = _strip_reasoning(text or "").strip()
    fenced = _FENCE.fullmatch(text)
    try:
        if len(text) > MAX_REPLY_CHARS:
            raise ParseError("too_long", TOO_LONG.format(len(text), MAX_REPLY_CHARS))
        if not text:
            raise ParseError("no_json", "the reply was empty; answer with the JSON value")
        body = fenced[1] if fenced else text
        try:
            value = _loads(body)
        except json.JSONDecodeError as error:
            raise _invalid_json(body, error.pos, error.msg) from None
        if _deeper_than(value, MAX_DEPTH):
            raise ParseError("invalid_json", TOO_DEEP)
    except ParseError as error:
        if finish_reason == "length":
            raise ParseError("truncated", TRUNCATED) from error
        raise
    fault = best_match(answer.iter_errors(value))
    if fault is not None:
        raise ParseError("schema", f"${fault.json_path[1:]}: {_describe(fault)} ({ANSWER_NOTE})")
    return scrub(value)


def load_json(text: str) -> object:
    """One JSON text, decoded strictly (no repairs, no duplicate keys, within the limits), without lone
    surrogates. Raises ParseError."""
    try:
        value = _loads(text)
    except json.JSONDecodeError as error:
        raise ParseError("invalid_json", str(error)) from None
    if _deeper_than(value, MAX_DEPTH):
        raise ParseError("invalid_json", TOO_DEEP)
    return scrub(value)


def strip_reasoning(text: str) -> str:
    """``text`` without its reasoning blocks (<think>...</think>), as replies are read."""
    return _strip_reasoning(text)


def _strip_reasoning(text: str) -> str:
    """Drop <think> blocks, reasoning before an orphan closing tag, and everything after an unclosed one.

    A block runs from an opening tag to the next closing tag of the same name; one pass over the tags.
    """
    tags = [(m.start(), m.end(), bool(m[1]), m[2].lower()) for m in _THINK_TAG.finditer(text)]
    if not tags:
        return text
    closing_after: list[int | None] = [None] * len(tags)
    later: dict[str, int] = {}
    for i in range(len(tags) - 1, -1, -1):
        closing_after[i] = later.get(tags[i][3])
        if tags[i][2]:
            later[tags[i][3]] = i
    kept, left, block_end, i = [], [], 0, 0  # tags outside blocks; the spans of text between blocks
    while i < len(tags):
        closing = closing_after[i]
        if not tags[i][2] and closing is not None:
            left.append((block_end, tags[i][0]))
            block_end, i = tags[closing][1], closing + 1
        else:
            kept.append(tags[i])
            i += 1
    left.append((block_end, len(text)))
    begin = next((end for start, end, closing, _ in kept if closing), 0)
    stop = next((start for start, _, closing, _ in kept if not closing and start >= begin), len(text))
    return "".join(text[max(a, begin):min(b, stop)] for a, b in left if max(a, begin) < min(b, stop))


def _extract(text: str | None, joinable: bool = True) -> _Found:
    """The one action-like value, else the first (preferably fenced) JSON value holding an object.

    Prose such as "{x}" or "[1]" is skipped; if nothing usable decodes, or a broken `{` got further than the
    chosen value, that failure is reported as invalid JSON. A scalar or plain array counts only as the whole reply.
    With ``joinable``, tool calls written one after another are read as one batch (see _joined).
    """
    if not text or not text.strip():
        raise ParseError("no_json", "the reply was empty")
    whole = _whole_action(text) if _THINK_TAG.search(text) else None
    if whole is not None:
        return whole
    text = _strip_reasoning(text)
    if not text.strip():
        raise ParseError("no_json", "no JSON object found in the reply (only <think> reasoning)")
    found, failure = _scan(text)
    found = [f for f in found if _holds_object(f.value)]
    actions = [f for f in found if _is_action(f.value)]
    if len(actions) > 1:
        joined = _joined(actions) if joinable else None
        if joined is None:
            raise ParseError("multiple_actions", MULTIPLE.format(len(actions)))
        return joined
    if actions:
        return actions[0]
    fences = [match.span(1) for match in _FENCE.finditer(text)]
    fence_starts = [a for a, _ in fences]

    def fenced(f: _Found) -> bool:
        index = bisect.bisect_right(fence_starts, f.start) - 1
        return index >= 0 and f.start < fences[index][1]

    chosen = next((f for f in found if fenced(f)), found[0] if found else None)
    if failure and (chosen is None or failure[0] > chosen.end - chosen.start):
        loose = _loose_final(text)
        if loose:
            return loose
        raise _invalid_json(text, failure[1], failure[2])
    if chosen:
        return chosen
    for candidate in [text, *(text[a:b] for a, b in fences)]:
        try:
            return _Found(_loads(candidate), [], 0, len(candidate))
        except json.JSONDecodeError:
            pass
    raise ParseError("no_json", "no JSON object found in the reply")


def _whole_action(text: str) -> _Found | None:
    """The reply as it is, when it is one JSON action and nothing else: a reasoning tag is then text in one of its
    strings ({"answer": "<think> is a tag"}), not reasoning to drop."""
    try:
        value = _loads(text)
    except (json.JSONDecodeError, RecursionError):
        return None
    return _Found(value, [], 0, len(text)) if _is_action(value) else None


def _scan(text: str) -> tuple[list[_Found], tuple | None]:
    """Every complete JSON value starting at `{` or `[` outside a broken one, and the failure that got furthest.

    Linear: after a value or a failure the scan goes on where decoding stopped, and repairs have a budget.
    """
    found, failure, position = [], None, 0
    repair_calls, repair_chars = _REPAIR_CALLS, _REPAIR_CHARS
    while bracket := _BRACKET.search(text, position):  # a plain class first: much faster over prose
        match = _START.match(text, bracket.start())
        assert match is not None  # at a bracket, a value or a key starts
        start = match.start()
        if match["value"]:
            try:
                value, end = _decode_at(text, start)
                found.append(_Found(value, [], start, end))
                position = end
                continue
            except _Broken as broken:
                stop, reason = broken.position, broken.reason
        else:
            stop, reason = match.end(), _NO_NAME if match["brace"] else _NO_VALUE
        repaired = None
        if repair_calls and repair_chars > 0 and _repairable(text, stop):
            repaired, reached = _repaired(text, start, min(len(text), start + repair_chars))
            repair_calls, repair_chars = repair_calls - 1, repair_chars - (reached - start)
        if repaired:
            found.append(repaired)
            position = repaired.end
            continue
        counts = text[start] == "{" or text[start + 1:stop].strip()
        if counts and (failure is None or stop - start > failure[0]):
            failure = (stop - start, stop, reason)
        position = max(start + 1, stop)
    return found, failure


def _decode_at(text: str, start: int) -> tuple[object, int]:
    """The JSON value at `start` and where it ends; raises _Broken.

    Decodes a window of the text that doubles while the decoder runs into its end, so a failure costs
    what was read, not the length of the text before it.
    """
    size = _WINDOW
    while True:
        window = text[start:start + size]
        try:
            value, end = _raw_decode(window)
            return value, start + end
        except json.JSONDecodeError as error:
            cut = start + size < len(text) and (
                error.pos > len(window) - _MARGIN or error.msg.startswith("Unterminated string"))
            if not cut:
                raise _Broken(start + error.pos, error.msg) from None
            size *= 2


def _raw_decode(text: str, start: int = 0) -> tuple[object, int]:
    """JSONDecoder.raw_decode, with Python's limits (recursion, digits of an int) as ParseErrors."""
    try:
        return _DECODER.scan_once(text, start)  # type: ignore[attr-defined]  # raw_decode's own scanner
    except StopIteration as stop:  # what raw_decode does: the value is where no value was found
        raise json.JSONDecodeError("Expecting value", text, stop.value) from None
    except json.JSONDecodeError:
        raise
    except RecursionError:
        raise ParseError("invalid_json", TOO_DEEP) from None
    except ValueError:
        limit = getattr(sys, "get_int_max_str_digits", lambda: 4300)()
        raise ParseError("invalid_json", TOO_MANY_DIGITS.format(limit)) from None


def _loads(text: str) -> object:
    """A whole JSON text (surrounding whitespace allowed), like json.loads but through _raw_decode."""
    value, end = _raw_decode(text, len(text) - len(text.lstrip(_WHITESPACE)))
    if text[end:].strip(_WHITESPACE):
        raise json.JSONDecodeError("Extra data", text, end)
    return value


def _deeper_than(value: object, limit: int) -> bool:
    """Whether arrays and objects nest more than `limit` levels (without recursion)."""
    stack = [(value, 1)] if isinstance(value, (dict, list)) else []
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def _unique_keys(pairs: list[tuple]) -> dict:
    result = {}
    for key, value in pairs:
        if key in result:
            raise ParseError("invalid_json", f"duplicate key {key!r} in an object")
        result[key] = value
    return result


_DECODER = json.JSONDecoder(object_pairs_hook=_unique_keys)


def _repairable(text: str, position: int) -> bool:
    """Whether strict decoding stopped where a repair could apply (a repair never helps past the first error): at
    a quote, comma, bracket, control character or Python literal, or at the end of the reply."""
    char = text[position:position + 1]
    return (char in ("'", ",", "}", "]") or ("\0" <= char < " ") or text.startswith(tuple(_PY_LITERALS), position)
            or _SPACE_TO_END.match(text, position) is not None)


def _repaired(text: str, start: int, stop: int) -> tuple[_Found | None, int]:
    """The bracketed value at `start`, decoded after the repairs it needs (None if it is not JSON even then,
    or does not end before `stop`), and how far the text was read.

    Brackets are only ever added, never content: where a reply ends in closers that skip open brackets (`}]}` for
    `}}]`), those get theirs first and the closers left over are dropped; a reply that ends after a complete value
    with brackets still open gets them closed (unless it was cut off: parse_action reports that as truncated)."""
    out: list[str] = []
    fixes: set[str] = set()
    closers: list[str] = []  # what each open bracket wants, innermost last
    i, last = start, None  # the last token but space
    tail = None  # where the closers and space that end the reply begin (found at the first miscount)
    while i < stop:
        token = _REPAIR_TOKEN.match(text, i, stop)
        if not token:
            return None, i
        kind, piece, end = token.lastgroup, token.group(), token.end()
        last = last if kind == "space" else kind
        if kind == "quote":
            string = _STRING[piece].match(text, i, stop)
            if not string:
                return None, stop
            out.append(_as_json_string(string[1], piece, fixes))
            end = string.end()
        elif kind == "word":
            if piece in _PY_LITERALS:
                fixes.add("python_literals")
            elif piece not in _JSON_WORDS and not _NUMBER.fullmatch(piece):
                return None, token.end()
            out.append(_PY_LITERALS.get(piece, piece))
        elif kind == "trailing":
            fixes.add("trailing_commas")
        elif kind == "open":
            out.append(piece)
            closers.append("}" if piece == "{" else "]")
        elif kind == "close":
            if piece != closers[-1]:  # a miscount: mended only where the reply ends in closers, as models lose it
                if tail is None:
                    tail = len(text.rstrip(_WHITESPACE + "}]"))
                if piece not in closers or end < tail:
                    return None, end
            while closers[-1] != piece:
                fixes.add("mismatched_brackets")
                out.append(closers.pop())
            out.append(closers.pop())
        else:
            out.append(piece)
        i = end
        if not closers:
            break
    if closers and i == len(text) and last in ("quote", "word", "close"):  # the reply ended after a value
        fixes.add("unclosed_brackets")
        out += reversed(closers)
        closers = []
    if "mismatched_brackets" in fixes:  # the closers the miscount left over are part of it
        i = len(text)
    if closers or not fixes:
        return None, i
    try:
        return _Found(_loads("".join(out)), [r for r in REPAIRS if r in fixes], start, i), i
    except json.JSONDecodeError:
        return None, i


def _as_json_string(body: str, quote: str, fixes: set[str]) -> str:
    """The contents of a string literal written with `quote`, as a double-quoted JSON string."""
    if quote == "'":
        fixes.add("single_quotes")

    def fix(match: re.Match) -> str:
        if match[1] is not None:  # an escape: kept, but \' means ' in a single-quoted string
            return "'" if quote == "'" and match[1] == "'" else match[0]
        if match[0] == '"':
            return '\\"'
        fixes.add("control_characters")
        return json.dumps(match[0])[1:-1]

    return '"' + _STRING_FIX.sub(fix, body) + '"'


def _loose_final(text: str) -> _Found | None:
    """A reply that is nothing but one final answer whose text has double quotes left unescaped
    (`"answer": "It says "hi"."`), read as that answer; None for anything else, which stays invalid JSON.
    ``text`` is the reply without its reasoning."""
    match = _LOOSE_FINAL.fullmatch(text)
    if not match or _ACTION_INSIDE.search(match[1]) or not _quoted_in_pairs(match[1]):
        return None
    fixes = {"unescaped_quotes"}
    try:
        answer = _loads(_as_json_string(match[1], '"', fixes))
    except json.JSONDecodeError:
        return None
    return _Found({"type": "final", "answer": answer}, [r for r in REPAIRS if r in fixes], 0, len(text))


def _quoted_in_pairs(body: str) -> bool:
    """Whether the bare double quotes in a string's body read as quotations in prose: each one opening (after a
    space or bracket, before a word) or closing (after a word, before a space, punctuation or the end), in
    turn. The first may close a quotation the string's own quote opened ("Panama" is a palindrome), the last
    open one that its closing quote ends. None may be followed by a `:` or another quote, as a key or a
    second string would be (`4" "x`)."""
    expected = None
    for quote in _STRING_FIX.finditer(body):
        if quote[0] != '"':
            continue
        before = body[quote.start() - 1] if quote.start() else " "
        after = body[quote.end()] if quote.end() < len(body) else " "
        if _KEY_OR_STRING.match(body, quote.end()):
            return False
        opens = (before.isspace() or before in "([{") and not after.isspace()
        closes = not before.isspace() and (after.isspace() or after in ".,;:!?)]}")
        if opens and expected != "close":
            expected = "close"
        elif closes and expected != "open":
            expected = "open"
        else:
            return False
    return True


def _joined(actions: list[_Found]) -> _Found | None:
    """Tool calls written one after another (JSON lines, a habit of small models) as the one batch they mean.

    A final answer after them was written before their results could be read, so it is dropped (and the
    model answers again once it has them). Anything else, or more calls than a batch holds, is not joined.
    """
    calls: list[dict] = []
    repairs: list[str] = []
    dropped = False
    for found in actions:
        items: list[Any] = found.value if isinstance(found.value, list) else [found.value]
        if not dropped and all(item.get("type") == "tool_call" for item in items):
            calls += items
            repairs += found.repairs
        elif found is actions[-1] and calls and len(items) == 1 and items[0].get("type") == "final":
            dropped = True
        else:
            return None
    if len(calls) > MAX_BATCH:
        return None
    repairs = [*dict.fromkeys(repairs), "joined_calls", *(["dropped_early_final"] if dropped else [])]
    return _Found(calls, repairs, actions[0].start, actions[-1].end)


def _holds_object(value: object) -> bool:
    return isinstance(value, dict) or isinstance(value, list) and any(isinstance(item, dict) for item in value)


def _is_action(value: object) -> bool:
    """An object with a "type" key, or a non-empty array of such objects."""
    items = value if isinstance(value, list) else [value]
    return bool(items) and all(isinstance(item, dict) and "type" in item for item in items)


def _invalid_json(text: str, position: int, reason: str) -> ParseError:
    """The decoder's message, its line and column, and the text near the error with a caret under it."""
    line_start = text.rfind("\n", 0, position) + 1
    line_end = text.find("\n", position)
    column = position - line_start
    left = max(0, column - 40)
    snippet = text[line_start + left:min(position + 20, len(text) if line_end == -1 else line_end)]
    prefix = "..." if left else ""
    caret = " " * (len(prefix) + column - left) + "^"
    excerpt = f"{prefix}{snippet}".replace("\t", " ")
    line = text.count("\n", 0, position) + 1
    after_number = _NUMBER_END.search(text, max(0, position - 40), position)
    advice = NO_ARITHMETIC if after_number and _ARITHMETIC.match(text, position) else ""
    return ParseError("invalid_json", f"invalid JSON: {reason} at line {line} column {column + 1}:\n"
                                      f"  {excerpt}\n  {caret}{advice}")


def _validate(value: Any, actions: ActionSchema) -> None:
    """Raise the most precise ParseError for a value the schema rejects: the count and the nesting first,
    then each action against the one branch its `type` and `tool` pick."""
    batch = isinstance(value, list) and actions.batch
    if batch:
        if not 1 <= len(value) <= MAX_BATCH:
            raise ParseError("schema", f"a JSON array of tool calls must have 1..{MAX_BATCH} items, got {len(value)}")
    elif not isinstance(value, dict):
        raise ParseError("schema", f"the reply must be a JSON object, got {kind_of(value)}")
    if _deeper_than(value, MAX_DEPTH):
        raise ParseError("invalid_json", TOO_DEEP)
    if batch:
        for index, item in enumerate(value):
            if not _plainly_valid(item, actions, batch=True):
                _check_item(item, f"$[{index}]", None, actions.tools)
    elif not _plainly_valid(value, actions):
        try:
            _check_item(value, "$", actions.final, actions.tools, batch=False)
        except ParseError as error:
            if actions.answer is not None and error.message.startswith("$.answer"):
                raise ParseError("schema", f"{error.message} ({ANSWER_NOTE})") from None
            raise


_CALL_KEYS, _FINAL_KEYS = {"type", "tool", "arguments"}, {"type", "answer"}


def _plainly_valid(item: object, actions: ActionSchema, batch: bool = False) -> bool:
    """The common case, checked fast: a well-formed call whose arguments fit, or a final answer.
    Anything else goes through the branch's full validator, which finds the most precise error."""
    if not isinstance(item, dict):
        return False
    if (item.keys() == _CALL_KEYS and item["type"] == "tool_call" and isinstance(item["tool"], str)
            and item["tool"] in actions.arguments):
        return actions.arguments[item["tool"]].is_valid(item["arguments"])
    if batch or actions.final is None or item.keys() != _FINAL_KEYS or item["type"] != "final":
        return False
    return isinstance(item["answer"], str) if actions.answer is None else actions.answer.is_valid(item["answer"])


def _check_item(item: object, prefix: str, final: Draft202012Validator | None,
                tools: dict[str, Draft202012Validator], batch: bool = True) -> None:
    """Raise the most precise error for one action; `final` is None inside a batch, where only calls are allowed,
    and when the schema allows no final answer (the reply must call a tool)."""
    if not isinstance(item, dict):
        raise ParseError("schema", f"{prefix} must be a tool_call object, got {kind_of(item)}")
    kind = item.get("type")
    if kind == "final" and final is not None:
        return _raise_first_error(final, item, prefix)
    if kind == "final" and batch:
        raise ParseError("schema", f'{prefix}.type must be "tool_call"; send a final answer alone, not in an array')
    if kind == "final":
        raise ParseError("schema", f'{prefix}.type must be "tool_call": this reply must call a tool '
                                   f'({", ".join(tools)}), not give the final answer')
    if kind != "tool_call":
        allowed = '"tool_call" or "final"' if final is not None else '"tool_call"'
        raise ParseError("schema", f"{prefix}.type must be {allowed}")
    name, names = item.get("tool"), ", ".join(tools) or "none"
    if not isinstance(name, str):
        raise ParseError("schema", f"{prefix}.tool must be the name of a tool; available tools: {names}")
    if name not in tools:
        raise ParseError("unknown_tool", unknown_tool(name, tools))
    _raise_first_error(tools[name], item, prefix, tool=name)


def _raise_first_error(branch: Draft202012Validator, item: dict, prefix: str, tool: str | None = None) -> None:
    error = best_match(branch.iter_errors(item))
    if error is None:
        return
    problem = f"{prefix}{error.json_path[1:]}: {_describe(error)}"
    if tool and error.path and error.path[0] == "arguments":
        raise ParseError("bad_arguments", bad_arguments(tool, problem + fault_note(error)))
    raise ParseError("schema", problem)


def _describe(error) -> str:
    """A jsonschema error message, with values shown as short JSON and extra properties named plainly."""
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = list(error.schema.get("properties", {}))
        patterns = list(error.schema.get("patternProperties", {}))
        extra = [k for k in error.instance if k not in allowed and not any(re.search(p, k) for p in patterns)]
        noun, verb = ("property", "is") if len(extra) == 1 else ("properties", "are")
        text = f"additional {noun} {', '.join(map(repr, extra))} {verb} not allowed"
        return f"{text} (allowed: {', '.join(allowed)})" if allowed else text
    shown = repr(error.instance)
    if not error.message.startswith(shown):
        return shorten(error.message, MAX_MESSAGE)
    value = json.dumps(error.instance, ensure_ascii=False)
    return shorten(shorten(value, 60) + error.message[len(shown):], MAX_MESSAGE)
