"""Whether a tool call's values come from the conversation: a call none of whose values the user or a tool result
ever gave was most likely made up, for a task no offered tool does (the area of a triangle sent to a body mass
index tool with a made-up weight and height).

A value counts as given when the conversation's text holds it: a number written there (``1,000``, ``5.0`` and
``5%`` for 0.05 too), or a string whose words appear there (``"New York, NY"`` for "new york"). A parameter's
own allowed values, default and constant come from the tool, not the model, and are not looked at; nor are
booleans and nulls.
"""
from __future__ import annotations

import json
import re
from typing import Any, Iterable

from agent import prompts

NUMBER = re.compile(r"(?<![\w.])([-+]?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?(?:[eE][-+]?\d+)?)(%|\s*(?:per ?cent|"
                    r"thousand|million|billion|trillion|k|bn)\b)?")
SCALES = {"%": 0.01, "percent": 0.01, "per cent": 0.01, "thousand": 1e3, "k": 1e3, "million": 1e6, "billion": 1e9,
          "bn": 1e9, "trillion": 1e12}
WORD = re.compile(r"[^\W_]+")
NUMBER_WORDS = {"zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
                "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20, "thirty": 30,
                "forty": 40, "fifty": 50, "hundred": 100, "thousand": 1000, "million": 1_000_000, "half": 0.5,
                "quarter": 0.25, "once": 1, "twice": 2, "dozen": 12, "first": 1, "second": 2, "third": 3}
MAX_TEXT = 200_000  # characters of the conversation read; the latest are kept
MAX_VALUES = 64  # values of one call looked at


class Conversation:
    """The words and numbers of what the user and the tools said, read once for the calls of one reply."""

    def __init__(self, texts: Iterable[str]):
        text = "\n".join(texts)[-MAX_TEXT:].lower()
        self.text = text
        self.words = set(WORD.findall(text))
        self.numbers = {n for found in NUMBER.finditer(text) for n in _numbers(found)}
        self.numbers |= {v for w, v in NUMBER_WORDS.items() if w in self.words}

    def gives(self, value: Any) -> bool:
        if isinstance(value, bool):
            return True
        if isinstance(value, (int, float)):
            return value in self.numbers or value in (0, 1)
        if isinstance(value, str):
            lowered = value.strip().lower()
            if not lowered or lowered in self.text:
                return True
            words = WORD.findall(lowered)
            numbers = [n for found in NUMBER.finditer(lowered) for n in _numbers(found)]
            return any(w in self.words for w in words) or any(n in self.numbers for n in numbers)
        return True


def made_up(arguments: dict, parameters: dict, conversation: Conversation) -> list[str]:
    """The values of a call, as ``name=value``, if none of them is given by the conversation (and there is one to
    look at); else nothing."""
    fixed = _fixed_values(parameters)
    values = [(path, value) for path, value in _leaves(arguments, "") if _key(value) not in fixed][:MAX_VALUES]
    values = [(path, value) for path, value in values if not isinstance(value, bool)]
    if not values or any(conversation.gives(value) for _, value in values):
        return []
    return [f"{path}={json.dumps(value, ensure_ascii=False)}" for path, value in values]


def said(history: list[dict]) -> list[str]:
    """What the user and the tools said in ``history``: every message but the system prompt and the model's own."""
    return [m["content"] for m in history if m.get("role") in ("user", "tool") and isinstance(m.get("content"), str)]


def _leaves(value: Any, path: str):
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _leaves(inner, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for inner in value:
            yield from _leaves(inner, path)
    elif value is not None:
        yield path, value


def _fixed_values(schema: Any) -> set:
    """Every value the schema itself names: enums, constants, defaults, anywhere in it."""
    found: set = set()
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key in ("enum", "const", "default", "examples"):
                if key in node:
                    items = node[key] if key in ("enum", "examples") and isinstance(node[key], list) else [node[key]]
                    found |= {_key(item) for item in items}
            stack += [v for v in node.values() if isinstance(v, (dict, list))]
        elif isinstance(node, list):
            stack += [v for v in node if isinstance(v, (dict, list))]
    return found


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _numbers(found: re.Match) -> list[float]:
    """The number a match of NUMBER writes, and with its scale (``5%``: 5 and 0.05; ``50 million``: 50 and 5e7)."""
    try:
        number = float(found[1].replace(",", ""))
    except ValueError:
        return []
    scale = " ".join(found[2].split()) if found[2] else None
    return [number, number * SCALES[scale]] if scale else [number]


def second_look(calls: list, registry, said: list[str]) -> str | None:
    """The note that asks the model to look again at the calls of one reply none of whose values ``said`` (what
    the user and the tools said) gives, or None when each call has a value it gives."""
    conversation = Conversation(said)
    flagged = []
    for call in calls:
        tool = registry.get(call.tool)
        values = made_up(call.arguments, tool.parameters, conversation) if tool else []
        if values:
            flagged.append(f"{call.tool}({', '.join(values)})")
    return prompts.render("second_look", calls="; ".join(flagged)) if flagged else None
