"""The embedded model's choice between a final answer and a tool call, read from its probabilities.

Greedy decoding takes the likeliest token at each step, and where an action's first tokens decide between the
final answer and a call, that token speaks for only part of its side: a call can open with "[" (a batch) or with
'{"type": "tool_call"', and the probability the model gives to calling is split between the two openings, while
the final answer has one. Here, along the greedy path, each step's probability for tokens that settle the side
is added to that side (weighted by the probability of the path before it), and when the likeliest token would
settle it, the other side is taken instead (through its likeliest token) where it holds at least ODDS times
the probability.

Why not simply the likelier side (ODDS 1): on BFCL's tuning sample (seed 2), that turned 15 of 120 replies
from an answer to a call, 4 of them rightly (simple_python 31 to 35 of 40) and 11 wrongly, where no tool fits
the question (irrelevance 38 to 27): the model gives calling the larger share on many a question that no
offered tool answers, and only a clear majority told the two apart (docs/experiments.md).

Where the user's words say a tool's name (agent.models.local_named.named: "the final speed of an object"
with calculate_final_speed offered), the call is the side taken unless the answer holds ODDS times its share:
the prompt asks for the call "even if you think you know the answer", and on BFCL the grammar arm's answers
from memory where native called the tool were mostly of such questions, their calling share 0.37 to 0.64.

Only the tokens of an action's opening are looked at (an action's "type" is its first key): a grammar of
another schema never settles a side, and is decoded greedily as it is.
"""
from __future__ import annotations

import math
from collections.abc import Callable

FINAL_OPENING = '{"type":"final"'
CALL_OPENINGS = ("[", '{"type":"tool_call"')
ODDS = 2.0  # how many times likelier the other side must be to be taken over the likeliest token's
CANDIDATES = 40  # of the likeliest tokens looked at per step: the rest hold a negligible share


def side(text: str) -> str | None:
    """What the start of a reply (without whitespace) settles: "final", "call", "open" (either can follow), or None
    (neither: it is not an action's opening)."""
    final = FINAL_OPENING.startswith(text) or text.startswith(FINAL_OPENING)
    call = any(opening.startswith(text) or text.startswith(opening) for opening in CALL_OPENINGS)
    return "open" if final and call else "final" if final else "call" if call else None


class SideChoice:
    """Follows one completion's tokens (``seen``) and, at each step until the side is settled, may name the token
    to take instead of the likeliest (``choose``)."""

    def __init__(self, piece: Callable[[int], str], tool_named: bool = False):
        self.piece = piece  # a token's text
        self.tool_named = tool_named  # whether the user's words say a tool's name: the call is the default
        self.text = ""  # the completion so far, without whitespace
        self.mass = {"final": 0.0, "call": 0.0}  # probability of the tokens that settled each side so far
        self.path = 1.0  # probability of the greedy path up to this step
        self.settled = False
        self.flipped = False  # whether the side taken is not the one the likeliest token would have taken

    def seen(self, token: int) -> None:
        self.text += self._bare(token)
        if side(self.text) != "open":
            self.settled = True

    def choose(self, logits, allows: Callable[[int], bool]) -> int | None:
        """The token to take at this step, if it is not the likeliest one the grammar allows (None: take that)."""
        import numpy as np

        top = np.argpartition(logits, -CANDIDATES)[-CANDIDATES:]
        allowed = sorted((int(t) for t in top if allows(int(t))), key=lambda t: -logits[t])
        if not allowed:
            return None
        highest = float(logits[allowed[0]])
        weights = {t: math.exp(float(logits[t]) - highest) for t in allowed}
        total = sum(weights.values())
        sides = {t: side(self.text + self._bare(t)) for t in allowed}
        for name in self.mass:
            self.mass[name] += self.path * sum(w for t, w in weights.items() if sides[t] == name) / total
        likeliest = allowed[0]
        greedy = sides[likeliest]
        if greedy is None or greedy == "open":
            self.path *= weights[likeliest] / total
            self.settled = greedy is None
            return None
        self.settled = True
        other = "final" if greedy == "call" else "call"
        odds = 1 / ODDS if self.tool_named and other == "call" else ODDS
        if self.mass[other] < odds * self.mass[greedy]:
            return None
        self.flipped = True
        return next(t for t in allowed if sides[t] == other)

    def _bare(self, token: int) -> str:
        """A token's text without whitespace, as ``text`` is kept."""
        return "".join(self.piece(token).split())
