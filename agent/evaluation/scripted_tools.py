"""Tools a suite line brings with it: OpenAI function specs that answer with scripted results.

An argument pattern maps argument names to lists of acceptable values, ``{"unit": ["km", "kilometers"]}``;
`same` says when a value given counts as one of them. Suite checks (`calls_match`) read calls the same way.
"""
from __future__ import annotations

import math
from typing import Any

from agent.tools import Registry, Tool

DEFAULT_RESULT = "ok"
NO_PARAMETERS = {"type": "object", "properties": {}}


def scripted_registry(specs: list[dict], results: dict[str, list[dict]] | None = None) -> Registry:
    """A Registry of exactly these tools. Each call is answered with the `result` of the first rule whose
    `when` fits its arguments, else the tool's rule without `when`, else "ok"; nothing else happens.
    Raises ValueError for a bad tool name, a duplicate, or parameters that are not a valid JSON Schema."""
    results = results or {}
    return Registry(_scripted(spec["function"], results.get(spec["function"]["name"], [])) for spec in specs)


def _scripted(function: dict, rules: list[dict]) -> Tool:
    def respond(**arguments):
        return scripted_result(rules, arguments)

    return Tool(function["name"], function.get("description", ""), function.get("parameters") or NO_PARAMETERS,
                respond)


def scripted_result(rules: list[dict], arguments: dict) -> Any:
    for rule in rules:
        if "when" in rule and fits(rule["when"], arguments):
            return rule["result"]
    return next((rule["result"] for rule in rules if "when" not in rule), DEFAULT_RESULT)


def fits(pattern: dict[str, list], arguments: dict) -> bool:
    """Every argument the pattern names is given, with one of its acceptable values."""
    return all(name in arguments and accepts(values, arguments[name]) for name, values in pattern.items())


def accepts(values: list, actual: Any) -> bool:
    return any(same(value, actual) for value in values)


def same(expected: Any, actual: Any) -> bool:
    """Equal as a check reads it: numbers by value (5 == 5.0), strings trimmed and case-insensitively,
    lists item by item in order, objects key by key; true is not 1."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        return expected is actual
    if isinstance(expected, (int, float)) and isinstance(actual, (int, float)):
        return math.isclose(expected, actual, rel_tol=1e-9)
    if isinstance(expected, str) and isinstance(actual, str):
        return expected.strip().casefold() == actual.strip().casefold()
    if isinstance(expected, list) and isinstance(actual, list):
        return len(expected) == len(actual) and all(map(same, expected, actual))
    if isinstance(expected, dict) and isinstance(actual, dict):
        return expected.keys() == actual.keys() and all(same(value, actual[key]) for key, value in expected.items())
    return expected is None and actual is None
