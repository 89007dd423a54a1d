"""What the commands' argument parsing shares: a parser whose usage errors are one line with a hint, the types of
option values, and the check of a file an option names for output."""
from __future__ import annotations

import argparse
import difflib
import math
from pathlib import Path

from agent.config import ConfigError


class Parser(argparse.ArgumentParser):
    """A usage error is one line with a hint (a near miss for a misspelt option), not the whole usage block."""

    def error(self, message: str):  # exits, as argparse's does
        hint = ""
        if message.startswith("unrecognized arguments: "):
            word = message.split(": ", 1)[1].split()[0].split("=")[0]
            close = difflib.get_close_matches(word, list(self._option_string_actions), n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]}?" if close and word.startswith("-") else ""
        self.exit(2, f"{self.prog}: {message}{hint} (see {self.prog} --help)\n")


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def positive_float(text: str) -> float:
    value = float(text)
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a number of seconds more than 0, got {text}")
    return value


def temperature(text: str) -> float:
    value = float(text)
    if not (0 <= value <= 2):
        raise argparse.ArgumentTypeError(f"must be a number from 0 to 2, got {text}")
    return value


def folder(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("must name a folder, like . for the current one")
    return text


def check_output_file(path: str, flag: str, what: str, force: bool | None = None) -> None:
    """Before anything is loaded or run: an output flag (--trace, eval --out) names a file in a folder that
    exists; with ``force`` False, not a file that exists already (a device such as /dev/null is fine)."""
    target = Path(path)
    if not path.strip():
        raise ConfigError(f"{flag} is empty, which is not a file name; pass {flag} FILE")
    if target.is_dir() or path.endswith(("/", "\\")):
        raise ConfigError(f"{flag} {path!r} is not a file name: it is a folder; pass {flag} FILE")
    if force is False and target.is_file():
        raise ConfigError(f"{flag} {path!r}: the file exists already; pass --force to overwrite it, or choose "
                          "another name")
    if not target.resolve().parent.is_dir():
        raise ConfigError(f"cannot write the {what} {path!r}: the folder {str(target.parent)!r} does not exist; "
                          f"pass {flag} FILE in a folder that exists")
