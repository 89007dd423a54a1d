"""What the user's words name: the text of the user's (and tools') messages, the optional parameters and the
tools whose names it says (``named``); read by the embedded model's choices (local_choice, local_closing,
local_copy). Beside it, what the action schema offers: its tools (``tool_names``, for local_tool) and the values
its parameters allow (``allowed_values``, for local_copy).
The system prompt, which names every tool and parameter, and the model's own messages do not count."""
from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from agent.text import text_parts

MIN_WORD = 3  # letters of the shortest word of a parameter's name or value that names it ("to", "id" do not)
WORD = re.compile(r"[a-z0-9]+")
QUOTED = re.compile(r"'([^'\n]{1,40})'|\"([^\"\n]{1,40})\"")  # a value a description quotes
DEFAULT = re.compile(r"\bdefault[^.]*", re.IGNORECASE)  # a description's default, to its sentence's end
MAX_DESCRIPTION = 2000  # characters of a description looked at for quoted values
NAME_WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")  # snake_case, camelCase and ACRONYMS split into words


@dataclass
class Named:
    """What one conversation's user words name, read once per completion (``named``)."""

    text: str  # the user's (and tools') messages, lower-cased: what values are copied from (local_copy)
    parameters: dict[str, set[str]]  # by tool, the optional parameters named (local_closing)
    tool_named: bool  # whether a tool's name is said before the model's first reply (local_choice)


def named(schema: object, messages: list[dict]) -> Named:
    """What the user's (and tools') messages name among the tool calls the action schema ``schema`` allows.

    An optional parameter is named by a word of its name (a plural "s" allowed) or by all the words of one of
    its allowed string values or of a value its description quotes (not its default). A tool is named before
    the model's first reply by every word of its name (three letters or more, a plural allowed) but the first of
    a name of several words, which is mostly a verb or a namespace ("calculate_final_speed",
    "geometry_area_circle"); once the model has replied, what follows in the user's place (a tool's results, a
    re-ask) names the tools called, which says nothing of whether to call again."""
    text = said(messages)
    words = set(WORD.findall(text))
    calls = _offered(schema)
    parameters: dict[str, set[str]] = {}
    for tool, arguments in calls:
        required = set(arguments.get("required") or [])
        found = {name for name, spec in (arguments.get("properties") or {}).items()
                 if name not in required and _is_named(name, spec, words)}
        if found:
            parameters[tool] = found
    replied = any(message.get("role") == "assistant" for message in messages)
    return Named(text, parameters, not replied and any(_tool_is_named(tool, words) for tool, _ in calls))


def tool_names(schema: object) -> list[str]:
    """The tools the action schema ``schema`` lets a call name, each once, in its order."""
    return list(dict.fromkeys(tool for tool, _ in _offered(schema)))


def allowed_values(schema: object) -> dict[str, dict[str, list[str]]]:
    """By tool and parameter, the string values the action schema ``schema`` lists for a parameter (its enum, or
    its items' enum)."""
    allowed: dict[str, dict[str, list[str]]] = {}
    for tool, arguments in _offered(schema):
        for name, spec in (arguments.get("properties") or {}).items():
            if strings := [v for v in _enum(spec) if isinstance(v, str)]:
                allowed.setdefault(tool, {})[name] = strings
    return allowed


def _enum(spec) -> list:
    """A parameter's allowed values: its enum, or its items' enum."""
    spec = spec if isinstance(spec, dict) else {}
    items = spec.get("items") if isinstance(spec.get("items"), dict) else {}
    values = spec.get("enum") or items.get("enum") or []
    return values if isinstance(values, list) else []


def _tool_is_named(tool: str, words: set[str]) -> bool:
    parts = [w.lower() for w in NAME_WORD.findall(tool)]
    parts = [w for w in (parts[1:] if len(parts) > 1 else parts) if len(w) >= MIN_WORD]
    return bool(parts) and all(w in words or w + "s" in words for w in parts)


def _offered(schema) -> list[tuple[str, dict]]:
    """(tool name, arguments schema) of each call object in an action schema; none in a client's schema nested
    deeper than Python recurses."""
    try:
        return list(_calls(schema))
    except RecursionError:
        return []


def _calls(schema) -> Iterator[tuple[str, dict]]:
    """(tool name, arguments schema) of each call object in an action schema (agent.parsing.action_schema)."""
    if isinstance(schema, list):
        for item in schema:
            yield from _calls(item)
    elif isinstance(schema, dict):
        properties = schema.get("properties")
        if isinstance(properties, dict) and isinstance(properties.get("tool"), dict) \
                and isinstance(properties["tool"].get("const"), str) and isinstance(properties.get("arguments"), dict):
            yield properties["tool"]["const"], properties["arguments"]
            return
        for value in schema.values():
            yield from _calls(value)


def _is_named(name: str, spec, said_words: set[str]) -> bool:
    words = [w.lower() for w in NAME_WORD.findall(name) if len(w) >= MIN_WORD]
    if any(w in said_words or w + "s" in said_words for w in words):
        return True
    description = spec.get("description") if isinstance(spec, dict) else None
    for value in [*_enum(spec), *quoted(description)]:
        value_words = WORD.findall(value.lower()) if isinstance(value, str) else []
        if value_words and len("".join(value_words)) >= MIN_WORD and all(w in said_words for w in value_words):
            return True
    return False


def quoted(description) -> list[str]:
    """The values a parameter's description quotes ("Type of the lawsuit, e.g., 'IPR', 'Patent', 'Commercial'"),
    but for its default's ("Default is 'all'": a default is no value the user gives)."""
    if not isinstance(description, str):
        return []
    return [a or b for a, b in QUOTED.findall(DEFAULT.sub("", description[:MAX_DESCRIPTION]))]


def said(messages: list[dict]) -> str:
    """The words of the user's (and tools') messages, lower-cased, that values are copied from."""
    parts = [part for m in messages if m.get("role") in ("user", "tool") for part in text_parts(m.get("content"))]
    return "\n".join(parts).lower()
