"""Where the embedded model closes an object too soon: an arguments object left open while continuing it is likely.

Under the grammar, after an object's required keys, the model chooses between closing the object ("}") and
writing another of its keys (","). Greedy decoding takes the likelier of the two, and on BFCL the grammar arm's
most frequent wrong call left out an optional parameter the question gives a value for ("vegetarian and
gluten-free" with the categories left out, "details of a felony crime record" with details=true left out): the
continuing tokens held a third to a half of the closing ones' probability. Here, where the likeliest token
closes an object and the grammar allows continuing it, the continuation is taken when its tokens hold at least
KEEP_OPEN times the closing tokens' probability.

The grammar decides what may follow: a "," is allowed only where the object has a key left to write, so a call
whose parameters are all written, or an action object, closes as before. Inside a string a "," is part of the
text, so there only a token that ends the string and then closes or continues the object counts. It acts only
in tool calls (CheckedGreedy asks it once the reply is settled as calls): a final answer, or a reply to a
client's own schema, is decoded greedily as before.
"""
from __future__ import annotations

import math
from collections.abc import Callable

from agent.models.local_choice import CANDIDATES

KEEP_OPEN = 0.33  # the continuation is taken where its probability is at least this share of closing's


class ObjectClosing:
    """Follows one completion's tokens (``seen``) and names the token that continues an object where the
    likeliest one would close it and continuing is likely enough (``choose``)."""

    def __init__(self, piece: Callable[[int], str]):
        self.piece = piece  # a token's text
        self.in_string = False  # whether the completion so far ends inside a JSON string
        self.escaped = False  # whether it ends in a string's backslash
        self.kept = 0  # how many times an object was kept open against the likeliest token

    def seen(self, token: int) -> None:
        for char in self.piece(token):
            if self.escaped:
                self.escaped = False
            elif char == "\\" and self.in_string:
                self.escaped = True
            elif char == '"':
                self.in_string = not self.in_string

    def choose(self, logits, allows: Callable[[int], bool]) -> int | None:
        """The token to take at this step, if it is not the likeliest one (None: take that)."""
        likeliest = int(logits.argmax())
        if self._kind(likeliest) != "close" or not allows(likeliest):
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
        if self.in_string:
            if not text.startswith('"'):
                return None  # still the string's text
            text = text[1:]
        text = text.lstrip()
        return "close" if text.startswith("}") else "continue" if text.startswith(",") else None
