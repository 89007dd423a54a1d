"""Where the embedded model closes a call's arguments too soon: the object left open for an optional parameter the
conversation names, where continuing it is likely.

Under the grammar, after an object's required keys, the model chooses between closing the object ("}") and
writing another of its keys (","). Greedy decoding takes the likelier of the two, and on BFCL the grammar arm's
most frequent wrong call left out an optional parameter the question gives a value for ("vegetarian and
gluten-free" with the categories left out, "details of a felony crime record" with details=true left out): the
continuing tokens held a third to a half of the closing ones' probability.

Here, where the likeliest token closes a call's arguments, the object is continued when both hold:
- an optional parameter of the tool, not yet written, is named in the conversation (a word of its name, or one
  of its allowed values, is a word of the user's messages): ``named_parameters``;
- the continuing tokens hold at least KEEP_OPEN times the closing tokens' probability.
Without the first condition (tried on 2026-12-06, docs/experiments.md), the object was also kept open for
optional values nobody gave (a make, a permeability, a precision), which cost as much as it bought.

The grammar decides what may follow: a "," is allowed only where the object has a key left to write. Inside a
string a "," is part of the text, so there only a token that ends the string and then closes or continues the
object counts. A final answer, an object nested in the arguments, or a reply to a client's own schema is decoded
greedily as before.
"""
from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator

from agent.models.local_choice import CANDIDATES
from agent.models.local_copy import said
from agent.models.local_json import JsonTrail

KEEP_OPEN = 0.33  # the continuation is taken where its probability is at least this share of closing's
MIN_WORD = 3  # letters of the shortest word of a parameter's name or value that names it ("to", "id" do not)
WORD = re.compile(r"[a-z0-9]+")
NAME_WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")  # snake_case, camelCase and ACRONYMS split into words


def named_parameters(schema: object, messages: list[dict]) -> dict[str, set[str]]:
    """For each tool call the action schema ``schema`` allows, by tool name: its optional parameters that the
    user's (and tools') messages name, by a word of the parameter's name (a plural "s" allowed) or by all the
    words of one of its allowed string values."""
    words = set(WORD.findall(said(messages)))
    named: dict[str, set[str]] = {}
    try:
        calls = list(_calls(schema))
    except RecursionError:  # a client's schema nested deeper than Python recurses: no call object is looked for
        return {}
    for tool, parameters in calls:
        required = set(parameters.get("required") or [])
        found = {name for name, spec in (parameters.get("properties") or {}).items()
                 if name not in required and _is_named(name, spec, words)}
        if found:
            named[tool] = found
    return named


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
    spec = spec if isinstance(spec, dict) else {}
    items = spec.get("items") if isinstance(spec.get("items"), dict) else {}
    values = spec.get("enum") or items.get("enum") or []
    for value in values if isinstance(values, list) else []:
        value_words = WORD.findall(value.lower()) if isinstance(value, str) else []
        if value_words and len("".join(value_words)) >= MIN_WORD and all(w in said_words for w in value_words):
            return True
    return False


class ObjectClosing:
    """Follows one completion's tokens (``seen``) and names the token that continues a call's arguments where the
    likeliest one would close them, the conversation names an optional parameter not yet written, and continuing
    is likely enough (``choose``). ``named``: from ``named_parameters``."""

    def __init__(self, piece: Callable[[int], str], named: dict[str, set[str]], trail: JsonTrail | None = None):
        self.piece, self.named = piece, named
        self.trail = trail or JsonTrail()  # where the completion is (shared with whoever feeds it)
        self.kept = 0  # how many times an object was kept open against the likeliest token

    def seen(self, token: int) -> None:
        self.trail.feed(self.piece(token))

    def unwritten(self) -> set[str]:
        """The named optional parameters not yet written, where the innermost open object is a call's arguments."""
        found = self.trail.arguments()
        if found is None:
            return set()
        tool, arguments = found
        return self.named.get(tool, set()) - set(arguments.keys)

    def choose(self, logits, allows: Callable[[int], bool]) -> int | None:
        """The token to take at this step, if it is not the likeliest one (None: take that)."""
        likeliest = int(logits.argmax())
        if self._kind(likeliest) != "close" or not self.unwritten() or not allows(likeliest):
            return None
        import numpy as np

        highest = float(logits[likeliest])
        mass = {"close": 0.0, "continue": 0.0}
        best = None  # the likeliest continuing token the grammar allows
        for token in sorted((int(t) for t in np.argpartition(logits, -CANDIDATES)[-CANDIDATES:]),
                            key=lambda t: -logits[t]):
            kind = self._kind(token)
            if kind is None or not allows(token):
                continue
            mass[kind] += math.exp(float(logits[token]) - highest)
            if kind == "continue" and best is None:
                best = token
        if best is None or mass["continue"] < KEEP_OPEN * mass["close"]:
            return None
        self.kept += 1
        return best

    def _kind(self, token: int) -> str | None:
        """"close" for a token that closes an object, "continue" for one that goes on to its next key."""
        text = self.piece(token)
        if self.trail.in_string:
            if not text.startswith('"'):
                return None  # still the string's text
            text = text[1:]
        text = text.lstrip()
        return "close" if text.startswith("}") else "continue" if text.startswith(",") else None
