"""Showing a reply's answer while the model writes it: readers that take the reply's text piece by piece and
give back what of the final answer can be shown so far, and a model wrapper that feeds them.

Streaming only shows; the reply the loop parses, re-asks and traces is the whole one, as without it.
"""
from __future__ import annotations

from typing import Callable, Generator, Protocol

from agent.models import Model, Reply
from agent.text import scrub

_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_HEX = set("0123456789abcdefABCDEF")
_WHITESPACE = " \t\n\r"
_THINK_OPEN, _THINK_CLOSE = ("<think>", "<thinking>"), ("</think>", "</thinking>")


class AnswerReader(Protocol):
    def feed(self, text: str) -> str:
        """The answer text that ``text`` (the next piece of the reply) adds."""
        ...


class Display(Protocol):
    """What shows a reply's answer as it arrives: ``start()`` a reply, ``show(text)`` each piece, ``end()`` it."""

    def start(self) -> None: ...

    def show(self, text: str) -> None: ...

    def end(self) -> None: ...


class _Unreadable(Exception):
    """The text is not the JSON this reader follows."""


class FinalAnswerReader:
    """Reads a prompt-protocol reply as it arrives, one JSON character at a time (no re-reading), and gives the
    text of the ``answer`` field once the reply is recognisably a final action: its top-level ``"type"`` is
    ``"final"`` (an answer written before the type is held until then). A tool call, a batch, or text that is not
    such JSON gives nothing. Reasoning in <think> blocks, and prose or a fence before the JSON, are skipped."""

    def __init__(self):
        self.final: bool | None = None  # whether the reply's type is "final", once it is known
        self.held: list[str] = []  # answer text read before the type
        self.out: list[str] = []
        self.shown = False  # some of the answer has been given
        self.done = False
        self._reader = self._reply()
        next(self._reader)

    def feed(self, text: str) -> str:
        """The answer text that ``text`` (the next piece of the reply) adds."""
        for char in text:
            if self.done:
                break
            try:
                self._reader.send(char)
            except (_Unreadable, StopIteration):
                if self.shown or self.done:  # what is shown stays shown; the parser decides what the reply was
                    self.done = True
                else:  # prose that only looked like JSON: look for the JSON after it
                    self.final, self.held = None, []
                    self._reader = self._reply(seeking=True)
                    next(self._reader)
        shown, self.out = "".join(self.out), []
        return shown

    def _answer(self, text: str) -> None:
        if self.final:
            self.out.append(text)
            self.shown = True
        elif self.final is None:
            self.held.append(text)

    def _reply(self, seeking: bool = False) -> Generator[None, str, None]:
        char = yield
        window, thinking = "", False
        while thinking or char not in "{[":  # before the JSON
            window = (window + char.lower())[-12:]
            if window.endswith(_THINK_CLOSE):
                thinking = False
            elif window.endswith(_THINK_OPEN):
                thinking = True
            char = yield
        if char == "[":  # a batch of tool calls
            self.done = True
            return
        yield from self._object(top=True)
        self.done = True

    def _object(self, top: bool = False) -> Generator[None, str, str]:
        """After the `{`: the members, up to the `}`; returns the character after it."""
        char = yield from _skip_space((yield))
        if char == "}":
            return (yield)
        while True:
            if char != '"':
                raise _Unreadable
            key, char = yield from self._string()
            char = yield from _skip_space(char)
            if char != ":":
                raise _Unreadable
            char = yield from _skip_space((yield))
            if top and key == "type" and char == '"':
                kind, char = yield from self._string()
                self.final = kind == "final"
                if self.final and self.held:
                    self._answer("".join(self.held))
                self.held = []
            elif top and key == "answer" and char == '"':
                _, char = yield from self._string(sink=self._answer)
            else:
                char = yield from self._value(char)
            char = yield from _skip_space(char)
            if char == "}":
                return (yield)
            if char != ",":
                raise _Unreadable
            char = yield from _skip_space((yield))

    def _value(self, char: str) -> Generator[None, str, str]:
        """Any JSON value starting with ``char``, read past; returns the character after it."""
        if char == "{":
            return (yield from self._object())
        if char == "[":
            char = yield from _skip_space((yield))
            if char == "]":
                return (yield)
            while True:
                char = yield from _skip_space((yield from self._value(char)))
                if char == "]":
                    return (yield)
                if char != ",":
                    raise _Unreadable
                char = yield from _skip_space((yield))
        if char == '"':
            _, char = yield from self._string()
            return char
        if char in ",:}]" or char in _WHITESPACE:
            raise _Unreadable
        while char not in ",}]" and char not in _WHITESPACE:  # a number or a literal: the parser checks it
            char = yield
        return char

    def _string(self, sink: Callable[[str], None] | None = None) -> Generator[None, str, tuple[str, str]]:
        """After the opening quote: the string, decoded (given to ``sink`` piece by piece as well), and the
        character after the closing quote. Lone surrogates become U+FFFD, as the parser makes them."""
        text: list[str] = []
        high = None  # a high surrogate waiting for its low half

        def put(piece: str) -> None:
            text.append(piece)
            if sink:
                sink(piece)

        while True:
            char = yield
            if char == '"':
                if high:
                    put("\ufffd")
                return "".join(text), (yield)
            if char == "\\":
                escape = yield
                if escape == "u":
                    digits = ""
                    for _ in range(4):
                        digits += (yield)
                    if not set(digits) <= _HEX:
                        raise _Unreadable
                    code = int(digits, 16)
                    if 0xDC00 <= code < 0xE000 and high:
                        put(chr(0x10000 + (high - 0xD800) * 0x400 + code - 0xDC00))
                        high = None
                        continue
                    if high:
                        put("\ufffd")
                        high = None
                    if 0xD800 <= code < 0xDC00:
                        high = code
                        continue
                    char = scrub(chr(code))
                elif escape in _ESCAPES:
                    char = _ESCAPES[escape]
                else:
                    raise _Unreadable
            if high:
                put("\ufffd")
                high = None
            put(char)


def _skip_space(char: str) -> Generator[None, str, str]:
    while char in _WHITESPACE:
        char = yield
    return char


class ContentReader:
    """Reads a native reply's text as it arrives and gives all of it, unless it begins like a tool call written
    out as text (`{`, `[`, a fence, a tag), which the protocol may take as a call: that is never shown."""

    def __init__(self):
        self.start = ""  # the leading whitespace, until the first other character decides
        self.showing: bool | None = None

    def feed(self, text: str) -> str:
        if self.showing is None:
            self.start += text
            first = self.start.lstrip()[:1]
            if not first:
                return ""
            self.showing = first not in "{[`<"
            text = self.start
        return text if self.showing else ""


class Unshown:
    """Shows nothing of a reply: for an answer that is JSON, printed whole once it is checked."""

    @staticmethod
    def feed(text: str) -> str:
        return ""


class Streamed:
    """The model, with each reply's answer shown as it arrives: ``reader()`` makes the protocol's reader for a
    reply, and ``display`` gets ``start()``, ``show(text)`` for each piece and ``end()``. A model without
    ``stream`` is asked as usual, and shows nothing until the run prints its answer."""

    def __init__(self, model: Model, reader: Callable[[], AnswerReader], display: Display):
        self.model, self.reader, self.display = model, reader, display

    def complete(self, messages: list[dict], **options) -> Reply:
        stream = getattr(self.model, "stream", None)
        if stream is None:
            return self.model.complete(messages, **options)
        reader = self.reader()
        self.display.start()
        try:
            return stream(messages, lambda delta: self.display.show(reader.feed(delta)), **options)
        finally:
            self.display.end()
