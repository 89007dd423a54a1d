"""Where a completion is in its JSON: the objects and arrays open, the keys written, the string being written; fed
one token's text at a time, for the embedded model's choices inside a call (local_closing, local_copy) and a
final answer (local_quote)."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Opened:
    """An object open in the completion (an array is None in ``JsonTrail.open``)."""

    keys: list[str] = field(default_factory=list)
    key: str | None = None  # the key whose value is being written, or was last
    strings: dict[str, str] = field(default_factory=dict)  # the string values written, by key
    expect_key: bool = True  # whether the next string is a key


class JsonTrail:
    """Follows JSON text (``feed``); tells whether it ends inside a string and in which call's arguments."""

    def __init__(self):
        self.open: list[Opened | None] = []
        self.in_string = False  # whether the text so far ends inside a JSON string
        self.escaped = False  # whether it ends in a string's backslash
        self.string: list[str] = []  # the characters of that string so far, as written (escapes kept)

    def feed(self, text: str) -> None:
        for char in text:
            if self.in_string:
                self._string_char(char)
            elif char == '"':
                self.in_string, self.string = True, []
            elif char == "{":
                self.open.append(Opened())
            elif char == "[":
                self.open.append(None)
            elif char in "}]" and self.open:
                self.open.pop()
            elif char == "," and self.open and self.open[-1] is not None:
                self.open[-1].expect_key = True

    def _string_char(self, char: str) -> None:
        if self.escaped:
            self.escaped = False
        elif char == "\\":
            self.escaped = True
        elif char == '"':
            self.in_string = False
            self._string_ended("".join(self.string))
            return
        self.string.append(char)

    def _string_ended(self, text: str) -> None:
        current = self.open[-1] if self.open else None
        if current is None:
            return
        if current.expect_key:
            current.keys.append(text)
            current.key, current.expect_key = text, False
        elif current.key is not None:
            current.strings[current.key] = text

    def arguments(self) -> tuple[str, Opened] | None:
        """(tool, its arguments object) where the innermost open object is a call's arguments."""
        if len(self.open) < 2:
            return None
        arguments, call = self.open[-1], self.open[-2]
        if arguments is None or call is None or call.key != "arguments" or "tool" not in call.strings:
            return None
        return call.strings["tool"], arguments

    def parameter(self) -> tuple[str, str] | None:
        """(tool, parameter) where the text is in a call's arguments: the parameter last keyed (whose value is being
        written where ``in_value``, at any depth below it)."""
        found = self._call_arguments()
        if found is None:
            return None
        call, arguments = found
        return None if arguments.key is None else (call.strings["tool"], arguments.key)

    def _call_arguments(self) -> tuple[Opened, Opened] | None:
        """(call, its arguments object), the outermost open such pair, if the text is inside one."""
        for outer, inner in zip(self.open, self.open[1:]):
            if outer is not None and inner is not None and outer.key == "arguments" and "tool" in outer.strings:
                return outer, inner
        return None

    def in_tool_name(self) -> bool:
        """Whether the text ends inside a call's tool name (the "tool" of an object whose "type" is "tool_call")."""
        return self._in_action_string("tool", "tool_call")

    def in_answer(self) -> bool:
        """Whether the text ends inside a final answer's text (the "answer" of an object whose "type" is "final")."""
        return self._in_action_string("answer", "final")

    def _in_action_string(self, key: str, kind: str) -> bool:
        """Whether the text ends inside the string value of ``key`` in an object whose "type" is ``kind``."""
        if not self.in_string or not self.open or self.open[-1] is None:
            return False
        action = self.open[-1]
        return not action.expect_key and action.key == key and action.strings.get("type") == kind

    def in_value(self) -> bool:
        """Whether the text ends inside a string value within a call's arguments (at any depth below them)."""
        if not self.in_string or not self.open:
            return False
        innermost = self.open[-1]
        if innermost is not None and innermost.expect_key:
            return False  # a key, not a value
        return self._call_arguments() is not None
