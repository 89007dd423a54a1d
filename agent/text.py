"""Text from outside (a model, a server, a file) made safe to keep, send, write and show; and the few words
the command line and the evaluation reports both print."""
from __future__ import annotations

import re

_SURROGATE = re.compile("[\ud800-\udfff]")
# C0 controls but tab and newline, DEL, C1 controls, and the bidirectional overrides that reorder what is shown
_UNSAFE_ON_TERMINAL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def scrub(value):
    """``value`` with every lone surrogate (which UTF-8 cannot encode) replaced by U+FFFD, in nested data too."""
    if isinstance(value, str):
        return value if value.isascii() else _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {scrub(key): scrub(item) for key, item in value.items()}
    if isinstance(value, list):
        return [scrub(item) for item in value]
    return value


def for_terminal(text: str) -> str:
    """``text`` with control and escape sequences shown as ``\\x1b``-style escapes instead of acted on."""
    text = scrub(text)
    return _UNSAFE_ON_TERMINAL.sub(lambda match: match.group().encode("unicode_escape").decode("ascii"), text)


def text_parts(content: object) -> list[str]:
    """A chat message's content as texts: a string alone, or the text of each of an OpenAI message's parts that
    has one; nothing for any other content."""
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
    return []


_KINDS = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "a number", float: "a number",
          type(None): "null"}


def kind_of(value: object) -> str:
    """What kind of JSON value ``value`` is, as a message names it: "an object", "an array", "null", ..."""
    return _KINDS.get(type(value), type(value).__name__)


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


NOT_REPORTED = "not reported"


def unreported(missing: int, calls: int) -> str | None:
    """What a token count leaves out: None when every model call reported its usage, NOT_REPORTED when
    none did, else how many did not ("2 calls unreported")."""
    if not missing:
        return None
    return NOT_REPORTED if missing == calls else f"{plural(missing, 'call')} unreported"


def truncate(text: str, limit: int) -> str:
    """Keep the head and the tail of a long text, with a note of how much was cut."""
    if len(text) <= limit:
        return text
    head, tail = limit * 3 // 4, limit // 4
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut} characters cut; {len(text)} in all ...]\n{text[-tail:] if tail else ''}"
