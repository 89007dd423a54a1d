"""A second look at a final answer whose figures come from nowhere.

A number the answer states that is neither in the conversation the model was given (the system prompt, the
user's words, the tools' results) nor a rounding of one was worked out by the model itself, and a small model
often gets that wrong: after reading 1200, 950 and 1375 from three files, the embedded model answered 3625.
Where the built-in calculator is offered, the model is asked once, in the user's place, to compute the figure
with it before answering; whatever it answers next is the answer (where the run ends without one, the answer
looked at stands). Where no tool step is left, there is no second look. An answer already shown to the user as it
was written (streaming) is not taken back, so a streamed run has no second look.
"""
from __future__ import annotations

import re
from collections.abc import Iterable

from agent import prompts
from agent.text import text_parts
from agent.tools import Registry
from agent.tools.calculator import calculator

NUMBER = re.compile(r"\d+(?:,\d{3})*(?:\.\d+)?")  # unsigned: a date's "-12" is the number 12
MIN_DIGITS = 2  # a one-digit figure (a count, a step) is not worth a second look
NAMED = 3  # figures the note names
MAX_DECIMALS = 17  # a float has no more: beyond, a written figure is compared as it is (and the sets stay few)


def unsourced(answer: str, sources: str) -> list[str]:
    """The numbers of ``answer`` (of two digits or more), as written, that are no number of ``sources``
    rounded to as many decimals."""
    known: dict[int, set[float]] = {}  # the sources' values, by the decimals they are rounded to
    values = [_value(n) for n in NUMBER.findall(sources)]
    exact = set(values)
    found: list[str] = []
    for written in dict.fromkeys(NUMBER.findall(answer)):
        if len(written.replace(",", "").replace(".", "").lstrip("0")) < MIN_DIGITS:
            continue
        decimals = min(len(written.partition(".")[2]), MAX_DECIMALS)
        if decimals not in known:
            known[decimals] = {round(v, decimals) for v in values} | exact
        if _value(written) not in known[decimals]:
            found.append(written)
            if len(found) == NAMED:
                break
    return found


class SecondLook:
    """Gives, once in a run, the note that asks the model to compute its answer's own figures with the
    calculator (``note``); never where the built-in calculator is not offered, or where answers are shown as
    they are written (``shown``)."""

    def __init__(self, registry: Registry, shown: bool = False):
        # the built-in calculator itself, not a suite's or an MCP server's tool that has its name
        self.pending = registry.get(calculator.name) is calculator and not shown
        self.questioned: str | None = None  # the answer looked at again: it stands if the run fails after the note

    def note(self, answer: str, messages: Iterable[dict]) -> dict | None:
        """The message to add after the final answer ``answer``, or None: the answer stands."""
        if not self.pending:
            return None
        said = [part for m in messages if m.get("role") != "assistant" for part in text_parts(m.get("content"))]
        figures = unsourced(answer, "\n".join(said))
        if not figures:
            return None
        self.pending, self.questioned = False, answer
        return {"role": "user", "content": prompts.render("second_look", numbers=", ".join(figures),
                                                          checker=calculator.name)}


def _value(written: str) -> float:
    return float(written.replace(",", ""))
