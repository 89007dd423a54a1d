"""The tool a call names, read from the embedded model's probabilities summed over the tokens that spell it.

Greedy decoding takes the likeliest token, and where a call's tool name is being written, one tool's share is
often split between several spellings of its start: on BFCL's `multiple_139` ("Find details of patent lawsuits
involving the company 'Apple Inc.' from the year 2010", four tools offered) the model gave "calculate"
(calculate_binomial_probability) 0.25, and "l", "laws" and "law" (lawsuit_details_find) 0.17, 0.11 and 0.03:
greedy decoding called the binomial tool. Here, inside a call's "tool" string, where the allowed candidate
tokens that can spell only one other tool hold more probability than all those that can still spell the
likeliest token's tool, that other tool's likeliest token is taken. A token several tools start with counts
only for keeping the likeliest: on the own suite's "What date is 100 days after 2026-01-01, and what day of the
week is it?", "add" (add_to_date) 0.47 against "days" (days_between) 0.44 and "day" 0.08, which day_of_week
starts with too, stays add_to_date.
"""
from __future__ import annotations

import math
from collections.abc import Callable

from agent.models.local_choice import CANDIDATES
from agent.models.local_json import JsonTrail


class ToolChoice:
    """Names the token to take instead of the likeliest where, inside a call's tool name, the tokens that spell
    another offered tool (of ``tools``) alone are likelier than those that can spell the likeliest's (``choose``);
    ``trail`` is fed the completion."""

    def __init__(self, piece: Callable[[int], str], tools: list[str], trail: JsonTrail):
        self.piece, self.tools, self.trail = piece, tools, trail
        self.taken = 0  # how many times another tool than the likeliest token's was taken

    def choose(self, logits, allows: Callable[[int], bool]) -> int | None:
        """The token to take at this step, if it is not the likeliest one the grammar allows (None: take that)."""
        if len(self.tools) < 2 or not self.trail.in_tool_name():
            return None
        import numpy as np

        written = "".join(self.trail.string)
        top = sorted((int(t) for t in np.argpartition(logits, -CANDIDATES)[-CANDIDATES:]), key=lambda t: -logits[t])
        highest = float(logits[top[0]])
        spells: dict[int, set[str]] = {}  # allowed candidate -> the tools it can still spell
        for token in top:
            tools = self._spells(written, token)
            if tools and allows(token):
                spells[token] = tools
        if not spells:
            return None
        greedy = next(iter(spells))  # the likeliest allowed candidate (top is sorted, dicts keep order)
        weight = {token: math.exp(float(logits[token]) - highest) for token in spells}
        keeping = sum(weight[token] for token, tools in spells.items() if tools & spells[greedy])
        other: dict[str, float] = {}  # by tool, the weight of the tokens that can spell it alone
        for token, tools in spells.items():
            if len(tools) == 1 and not tools & spells[greedy]:
                (tool,) = tools
                other[tool] = other.get(tool, 0.0) + weight[token]
        best = max(other, key=lambda tool: other[tool], default=None)
        if best is None or other[best] <= keeping:
            return None
        self.taken += 1
        return next(token for token, tools in spells.items() if tools == {best})

    def _spells(self, written: str, token: int) -> set[str]:
        """The offered tools whose names the token's text continues ``written`` towards (or ends it as)."""
        text = self.piece(token)
        if '"' in text:
            name = written + text.split('"', 1)[0]
            return {tool for tool in self.tools if tool == name}
        start = written + text
        return {tool for tool in self.tools if tool.startswith(start)} if text else set()
