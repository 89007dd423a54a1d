"""Find the one JSON action in a model reply (leniently) and validate it against the action schema (strictly)."""
from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

MAX_BATCH = 8
REPAIRS = ("python_literals", "single_quotes", "trailing_commas", "control_characters")
TRUNCATED = ("your reply was cut off (it hit the token limit) before the JSON was complete; "
             "reply with a shorter JSON action")
MULTIPLE = "found {} JSON actions; send exactly one (or a JSON array of tool_call objects to run several calls)"

_THINK_BLOCK = re.compile(r"<(think|thinking)\s*>.*?</\1\s*>", re.I | re.S)
_THINK_OPEN = re.compile(r"<(?:think|thinking)\s*>", re.I)
_THINK_CLOSE = re.compile(r"</(?:think|thinking)\s*>", re.I)
_FENCE = re.compile(r"```[\w-]*[ \t]*\n?(.*?)```", re.S)
_START = re.compile(r"[{\[]")
_TOKEN = re.compile(r"[\w.+-]+")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_JSON_WORDS = {"true", "false", "null", "NaN", "Infinity", "-Infinity"}
_REPAIR_BUDGET = 20
_CLOSER = re.compile(r"\s*[}\]]")
_PY_LITERALS = {"True": "true", "False": "false", "None": "null"}
_KINDS = {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "an array",
          dict: "an object", type(None): "null"}


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


def action_schema(tools: dict[str, dict], batch: bool = True) -> dict:
    """One JSON Schema (draft 2020-12, inline, anyOf at the top) for a reply, from tool name -> parameters."""
    final = {"type": "object",
             "properties": {"type": {"const": "final"}, "answer": {"type": "string"}},
             "required": ["type", "answer"], "additionalProperties": False}
    calls = [{"type": "object",
              "properties": {"type": {"const": "tool_call"}, "tool": {"const": name},
                             "arguments": copy.deepcopy(parameters)},
              "required": ["type", "tool", "arguments"], "additionalProperties": False}
             for name, parameters in tools.items()]
    branches = [final, *calls]
    if batch and calls:
        branches.append({"type": "array", "items": {"anyOf": calls}, "minItems": 1, "maxItems": MAX_BATCH})
    schema = {"anyOf": branches}
    Draft202012Validator.check_schema(schema)
    return schema


def parse_action(text: str | None, schema: dict, finish_reason: str | None = None) -> Parsed:
    """Lenient extraction, strict validation. Raises ParseError."""
    try:
        try:
            found = _extract(text)
            _validate(found.value, schema)
        except RecursionError:
            raise ParseError("invalid_json", "the JSON is nested too deeply") from None
    except ParseError as error:
        if finish_reason == "length":
            raise ParseError("truncated", TRUNCATED) from error
        raise
    return Parsed(found.value, found.repairs)


def _strip_reasoning(text: str) -> str:
    """Drop <think> blocks, reasoning before an orphan closing tag, and everything after an unclosed one."""
    text = _THINK_BLOCK.sub("", text)
    orphan = _THINK_CLOSE.search(text)
    if orphan:
        text = text[orphan.end():]
    opening = _THINK_OPEN.search(text)
    return text[:opening.start()] if opening else text


def _extract(text: str | None) -> _Found:
    """The one action-like value, else the first (preferably fenced) JSON value holding an object.

    Prose such as "{x}" or "[1]" is skipped; if nothing usable decodes, or a broken `{` got further than the
    chosen value, that failure is reported as invalid JSON. A scalar or plain array counts only as the whole reply.
    """
    if not text or not text.strip():
        raise ParseError("no_json", "the reply was empty")
    text = _strip_reasoning(text)
    if not text.strip():
        raise ParseError("no_json", "no JSON object found in the reply (only <think> reasoning)")
    found, failure = _scan(text)
    found = [f for f in found if _holds_object(f.value)]
    actions = [f for f in found if _is_action(f.value)]
    if len(actions) > 1:
        raise ParseError("multiple_actions", MULTIPLE.format(len(actions)))
    if actions:
        return actions[0]
    fences = [match.span(1) for match in _FENCE.finditer(text)]
    chosen = ([f for f in found if any(a <= f.start < b for a, b in fences)] or found or [None])[0]
    if failure and (chosen is None or failure[0] > chosen.end - chosen.start):
        raise _invalid_json(text, failure[1])
    if chosen:
        return chosen
    for candidate in [text, *(text[a:b] for a, b in fences)]:
        try:
            return _Found(_DECODER.decode(candidate), [], 0, len(candidate))
        except json.JSONDecodeError:
            pass
    raise ParseError("no_json", "no JSON object found in the reply")


def _scan(text: str) -> tuple[list[_Found], tuple | None]:
    """Every complete JSON value starting at `{` or `[` outside a broken one, and the failure that got furthest."""
    found, failure, position, repair_budget = [], None, 0, _REPAIR_BUDGET
    while match := _START.search(text, position):
        start = match.start()
        try:
            value, end = _DECODER.raw_decode(text, start)
            found.append(_Found(value, [], start, end))
        except json.JSONDecodeError as error:
            repaired = None
            if repair_budget and _repairable(text, error.pos):
                repair_budget -= 1
                repaired = _repaired(text, start)
            if repaired:
                found.append(repaired)
                end = repaired.end
            else:
                counts = text[start] == "{" or text[start + 1:error.pos].strip()
                if counts and (failure is None or error.pos - start > failure[0]):
                    failure = (error.pos - start, error)
                end = max(start + 1, error.pos)
        position = end
    return found, failure


def _unique_keys(pairs: list[tuple]) -> dict:
    result = {}
    for key, value in pairs:
        if key in result:
            raise ParseError("invalid_json", f"duplicate key {key!r} in an object")
        result[key] = value
    return result


_DECODER = json.JSONDecoder(object_pairs_hook=_unique_keys)


def _repairable(text: str, position: int) -> bool:
    """Whether strict decoding stopped where a repair could apply (a repair never helps past the first error)."""
    char = text[position:position + 1]
    return char in ("'", ",", "}", "]") or ("\0" <= char < " ") or text.startswith(tuple(_PY_LITERALS), position)


def _repaired(text: str, start: int) -> _Found | None:
    """The bracketed value at `start`, decoded after the repairs it needs; None if it is not JSON even then."""
    out, fixes, depth, i = [], set(), 0, start
    while i < len(text):
        char = text[i]
        token = _TOKEN.match(text, i)
        if char in "\"'":
            i = _read_string(text, i, out, fixes)
            if i < 0:
                return None
            continue
        if token:
            word = token.group()
            if word in _PY_LITERALS:
                fixes.add("python_literals")
            elif word not in _JSON_WORDS and not _NUMBER.fullmatch(word):
                return None
            out.append(_PY_LITERALS.get(word, word))
            i = token.end()
            continue
        if char == "," and _CLOSER.match(text, i + 1):
            fixes.add("trailing_commas")
        elif char in "{}[]:, \t\r\n":
            out.append(char)
            depth += (char in "{[") - (char in "}]")
        else:
            return None
        i += 1
        if depth == 0:
            break
    if depth or not fixes:
        return None
    try:
        return _Found(_DECODER.decode("".join(out)), [r for r in REPAIRS if r in fixes], start, i)
    except json.JSONDecodeError:
        return None


def _read_string(text: str, start: int, out: list[str], fixes: set[str]) -> int:
    """Append the string literal at `start` to `out` as JSON text; return where it ends, or -1 if it never does."""
    quote, i = text[start], start + 1
    out.append('"')
    if quote == "'":
        fixes.add("single_quotes")
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text):
            escaped = text[i + 1]
            out.append("'" if quote == "'" and escaped == "'" else char + escaped)
            i += 2
            continue
        if char == quote:
            out.append('"')
            return i + 1
        if char == '"':
            out.append('\\"')
        elif char < " ":
            out.append(json.dumps(char)[1:-1])
            fixes.add("control_characters")
        else:
            out.append(char)
        i += 1
    return -1


def _holds_object(value: object) -> bool:
    return isinstance(value, dict) or isinstance(value, list) and any(isinstance(item, dict) for item in value)


def _is_action(value: object) -> bool:
    """An object with a "type" key, or a non-empty array of such objects."""
    items = value if isinstance(value, list) else [value]
    return bool(items) and all(isinstance(item, dict) and "type" in item for item in items)


def _invalid_json(text: str, error: json.JSONDecodeError) -> ParseError:
    """The decoder's message, its line and column, and the text near the error with a caret under it."""
    line_start = text.rfind("\n", 0, error.pos) + 1
    line_end = text.find("\n", error.pos)
    column = error.pos - line_start
    left = max(0, column - 40)
    snippet = text[line_start + left:min(error.pos + 20, len(text) if line_end == -1 else line_end)]
    prefix = "..." if left else ""
    caret = " " * (len(prefix) + column - left) + "^"
    excerpt = f"{prefix}{snippet}".replace("\t", " ")
    return ParseError("invalid_json", f"invalid JSON: {error.msg} at line {error.lineno} column {error.colno}:\n"
                                      f"  {excerpt}\n  {caret}")


def _validate(value: object, schema: dict) -> None:
    """Raise the most precise ParseError for a value the schema rejects."""
    validator = Draft202012Validator(schema)
    if validator.is_valid(value):
        return
    final, tools, batch = _branches(schema)
    if isinstance(value, list) and batch is not None:
        low, high = batch.get("minItems", 1), batch.get("maxItems", MAX_BATCH)
        if not low <= len(value) <= high:
            raise ParseError("schema", f"a JSON array of tool calls must have {low}..{high} items, got {len(value)}")
        for index, item in enumerate(value):
            _check_item(item, f"$[{index}]", None, tools)
    elif isinstance(value, dict):
        _check_item(value, "$", final, tools)
    else:
        raise ParseError("schema", f"the reply must be a JSON object, got {_KINDS[type(value)]}")
    error = best_match(validator.iter_errors(value))
    raise ParseError("schema", f"{error.json_path}: {_describe(error)}")


def _branches(schema: dict) -> tuple[dict | None, dict[str, dict], dict | None]:
    """Read the final branch, the tool branches by name and the batch branch back from an action schema."""
    final, tools, batch = None, {}, None
    for branch in schema.get("anyOf", [schema]):
        properties = branch.get("properties", {})
        if branch.get("type") == "array":
            batch = branch
        elif properties.get("type", {}).get("const") == "final":
            final = branch
        elif "const" in properties.get("tool", {}):
            tools[properties["tool"]["const"]] = branch
    return final, tools, batch


def _check_item(item: object, prefix: str, final: dict | None, tools: dict[str, dict]) -> None:
    """Raise the most precise error for one action; `final` is None inside a batch, where only calls are allowed."""
    if not isinstance(item, dict):
        raise ParseError("schema", f"{prefix} must be a tool_call object, got {_KINDS[type(item)]}")
    kind = item.get("type")
    if kind == "final" and final is not None:
        return _raise_first_error(final, item, prefix)
    if kind == "final":
        raise ParseError("schema", f'{prefix}.type must be "tool_call"; send a final answer alone, not in an array')
    if kind != "tool_call":
        allowed = '"tool_call" or "final"' if final is not None else '"tool_call"'
        raise ParseError("schema", f"{prefix}.type must be {allowed}")
    name, names = item.get("tool"), ", ".join(tools) or "none"
    if not isinstance(name, str):
        raise ParseError("schema", f"{prefix}.tool must be the name of a tool; available tools: {names}")
    if name not in tools:
        raise ParseError("unknown_tool", f"unknown tool {name!r}; available tools: {names}")
    _raise_first_error(tools[name], item, prefix, tool=name)


def _raise_first_error(branch: dict, item: dict, prefix: str, tool: str | None = None) -> None:
    error = best_match(Draft202012Validator(branch).iter_errors(item))
    if error is None:
        return
    problem = f"{prefix}{error.json_path[1:]}: {_describe(error)}"
    if tool and error.path and error.path[0] == "arguments":
        raise ParseError("bad_arguments", f"arguments for {tool}: {problem}")
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
        return error.message
    value = json.dumps(error.instance, ensure_ascii=False)
    return (value if len(value) <= 60 else value[:57] + "...") + error.message[len(shown):]
