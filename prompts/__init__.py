"""Prompt templates, kept as text files beside this module and loaded by name."""
from __future__ import annotations

from functools import lru_cache
from importlib.resources import files
from string import Template


def names() -> list[str]:
    return sorted(p.name[:-4] for p in files(__name__).iterdir() if p.name.endswith(".txt"))


@lru_cache(maxsize=None)
def load(name: str) -> str:
    path = files(__name__) / f"{name}.txt"
    if not path.is_file():
        raise ValueError(f"no prompt named {name!r}; available: {', '.join(names())}")
    return path.read_text(encoding="utf-8")


def render(name: str, **values: object) -> str:
    """The template with ``$name`` placeholders filled in; a missing value is an error."""
    return _template(name).substitute(values)


@lru_cache(maxsize=None)
def _template(name: str) -> Template:
    return Template(load(name))
