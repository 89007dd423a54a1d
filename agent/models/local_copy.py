"""Argument values copied from the conversation where the model nearly wrote them so: the embedded model's
choice, inside a call's string value, between its likeliest token and one that keeps the value the user's words.

On BFCL the grammar arm wrote "Standard" for "a single room" and "10/22/2022" for "10th December 2022": values
from the model's memory where the question gives them. At both steps a token that copies the question was close
behind the likeliest ("Single" at 0.25 against "Standard" at 0.32; "th" at 0.36 against "/" at 0.41). Here, in a
string value within a call's arguments that so far is a copy of the conversation's words (the user's and the
tools' messages, case aside), where the likeliest token would make it no longer one, the likeliest token that
keeps it one is taken when it holds at least COPY times the likeliest token's probability. A value the model is
sure of (a currency code for "dollars", a date in the format a tool documents) is left as it is, and so is one
on its way to a value the parameter's schema allows: on BFCL's multiple_81 ("the one with backstage access", the
add-ons "Backstage Pass", "VIP Seating", "Parking Pass") the model's " Pass" at 0.65 had been turned to the
user's " Access" at 0.35, the call was re-asked, and the model gave up.
"""
from __future__ import annotations

from collections.abc import Callable

from agent.models.local_choice import CANDIDATES
from agent.models.local_json import JsonTrail

COPY = 0.5  # a copying token is taken where its probability is at least this share of the likeliest token's


class ValueCopy:
    """Names the token to take instead of the likeliest where that one would end a string value's copy of
    ``text`` (``local_named.named``'s) and a copying token is likely enough (``choose``); ``trail`` is fed
    the completion."""

    def __init__(self, piece: Callable[[int], str], text: str, trail: JsonTrail,
                 allowed: dict[str, dict[str, list[str]]] | None = None):
        self.piece, self.text, self.trail = piece, text, trail
        self.allowed = allowed or {}  # by tool and parameter, the values its schema allows (local_named)
        self.copied = 0  # how many times a copying token was taken against the likeliest

    def choose(self, logits, allows: Callable[[int], bool]) -> int | None:
        """The token to take at this step, if it is not the likeliest one (None: take that)."""
        if not self.text or not self.trail.in_value():
            return None
        value = "".join(self.trail.string).lower()
        likeliest = int(logits.argmax())
        if value not in self.text or self._copies(value, likeliest) or not allows(likeliest) \
                or self._allowed(value, likeliest):
            return None
        import numpy as np

        floor = float(logits[likeliest]) + np.log(COPY)
        for token in sorted((int(t) for t in np.argpartition(logits, -CANDIDATES)[-CANDIDATES:]),
                            key=lambda t: -logits[t]):
            if float(logits[token]) < floor:
                return None
            if token != likeliest and self._adds(token) and self._copies(value, token) and allows(token):
                self.copied += 1
                return token
        return None

    def _adds(self, token: int) -> bool:
        """Whether the token writes some of the value before ending it."""
        return not self.piece(token).startswith('"') and bool(self.piece(token))

    def _allowed(self, value: str, token: int) -> bool:
        """Whether the value, with the token's text, is the start of a value its parameter's schema allows."""
        tool, parameter = self.trail.parameter() or ("", "")
        start = value + self.piece(token).split('"', 1)[0].lower()
        return any(v.lower().startswith(start) for v in self.allowed.get(tool, {}).get(parameter, ()))

    def _copies(self, value: str, token: int) -> bool:
        """Whether the value, with the token's text up to the string's end, is still in the conversation's words."""
        piece = self.piece(token).split('"', 1)[0].lower()
        return (value + piece) in self.text
