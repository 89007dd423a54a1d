"""Quotation marks inside a final answer, written escaped: the embedded model's answers are no longer cut at the
first word it quotes.

Under the grammar, a final answer is a JSON string, and the model often writes a quotation mark in it unescaped:
of 178 final answers of the grammar arm on BFCL and the own suite, none held one, and 4 were cut short where the
model began a quotation ('the following parameters: category = ' then '"reading"': the '"' ended the answer, and the
grammar closed the object). Here, inside a final answer, a likeliest token that would end the string with a
quotation mark that opens a quotation (after a space, "=", "(", "[", ":" or at the answer's start) or closes one
opened so, is replaced by the same text with the mark escaped (one token: ' \\"', '\\"', '(\\"'); where the
vocabulary has no such token, by the text before the mark (the mark comes at the next step), else by the escaped
mark alone. A mark after a word or a full stop ends the answer as before.
"""
from __future__ import annotations

from collections.abc import Callable

from agent.models.local_json import JsonTrail

OPENS_AFTER = " \t\n=([:{"  # a quotation mark after one of these (or at the answer's start) opens a quotation


class AnswerQuote:
    """Names the token that writes a final answer's quotation mark escaped where the likeliest token would end the
    answer there (``choose``). ``token``: the one token whose text is the given text, or None; ``trail`` is fed
    the completion."""

    def __init__(self, piece: Callable[[int], str], token: Callable[[str], int | None], trail: JsonTrail):
        self.piece, self.token, self.trail = piece, token, trail
        self.escaped = 0  # how many quotation marks were written escaped

    def choose(self, logits, allows: Callable[[int], bool]) -> int | None:
        """The token to take at this step, if it is not the likeliest one (None: take that)."""
        if not self.trail.in_answer():
            return None
        likeliest = int(logits.argmax())
        text = self.piece(likeliest)
        mark = _unescaped_mark(text, self.trail.escaped)
        if mark is None or not self._quotes(text, mark):
            return None
        for replacement in (text[:mark] + '\\"' + text[mark + 1:], text[:mark] + '\\"', text[:mark], '\\"'):
            token = self.token(replacement) if replacement else None
            if token is not None and allows(token):
                self.escaped += 1
                return token
        return None

    def _quotes(self, text: str, mark: int) -> bool:
        """Whether the mark at ``mark`` in the token's text opens a quotation or closes one the answer opened."""
        written = "".join(self.trail.string)
        if written.count('\\"') % 2 == 1:
            return True  # a quotation is open: this mark closes it
        before = text[:mark] if mark else written
        return not before or before[-1] in OPENS_AFTER


def _unescaped_mark(text: str, escaped: bool) -> int | None:
    """Where the token's text has its first quotation mark that is not escaped (one that would end a string);
    ``escaped``: whether the text before it ends in a backslash that escapes the token's first character."""
    for index, char in enumerate(text):
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == '"':
            return index
    return None
