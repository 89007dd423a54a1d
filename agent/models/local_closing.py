"""Where the embedded model closes a call's arguments too soon: the object left open for an optional parameter the
conversation names, where continuing it is likely.

Under the grammar, after an object's required keys, the model chooses between closing the object ("}") and
writing another of its keys (","). Greedy decoding takes the likelier of the two, and on BFCL the grammar arm's
most frequent wrong call left out an optional parameter the question gives a value for ("vegetarian and
gluten-free" with the categories left out, "details of a felony crime record" with details=true left out): the
continuing tokens held a third to a half of the closing ones' probability.

Here, where the likeliest token closes a call's arguments, the object is continued when both hold:
- an optional parameter of the tool, not yet written, is named in the conversation (a word of its name, or one
  of its allowed values, is a word of the user's messages): ``agent.models.local_named.named``;
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
from collections.abc import Callable

from agent.models.local_choice import CANDIDATES
from agent.models.local_json import JsonTrail

KEEP_OPEN = 0.33  # the continuation is taken where its probability is at least this share of closing's


class ObjectClosing:
    """Names the token that continues a call's arguments where the likeliest one would close them, the
    conversation names an optional parameter not yet written, and continuing is likely enough (``choose``).
    ``named``: the parameters named, by tool (``local_named.named``); ``trail`` is fed the completion."""

    def __init__(self, piece: Callable[[int], str], named: dict[str, set[str]], trail: JsonTrail):
        self.piece, self.named, self.trail = piece, named, trail
        self.kept = 0  # how many times an object was kept open against the likeliest token

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
