"""The suite check `bfcl_match`: a run's calls scored by the rules of the Berkeley Function Calling Leaderboard's
AST checker (bfcl_eval/eval_checker/ast_eval/ast_checker.py, for Python), rule for rule, so that a score here is
the score BFCL would give the same calls.

An expected call is ``{"tool", "arguments": {parameter: [acceptable values]}}``, BFCL's possible answer: ``""``
among the values means the parameter may be left out. ``parameters`` is the tool's JSON Schema (the loader adds
it), whose types stand for BFCL's: integer, number (BFCL's float), string (also its any), boolean, array (also
its tuple) and object (its dict). The rules:
- exactly as many calls as expected, each expected call taken in turn and matched to the first call made not
  yet matched that fits it (BFCL's "any order", greedy as BFCL's is);
- a call fits when it names the tool, gives every required parameter, gives no parameter that is not in the
  schema and the possible answer, leaves out only those that may be left out, and each value fits:
  - of the parameter's type exactly (true is not 1; an integer counts as a number, not a number as an
    integer), the items of an array too; a value of the possible answers' own type is compared as it is;
  - strings, and strings in arrays and objects one level down, compared without spaces and ``,./-_*^``,
    lowercased, with ' read as ";
  - objects key by key against one of the acceptable objects, arrays of objects object by object;
  - anything else as Python compares values (5 == 5.0).
"""
from __future__ import annotations

import json
import re
from typing import Any

from agent.tools.text import shorten

TYPES = {"string": str, "integer": int, "number": float, "boolean": bool, "array": list, "object": dict}
_IGNORED = re.compile(r"[ \,\.\/\-\_\*\^]")


def bfcl_match(expected: list[dict], calls: list[dict]) -> tuple[bool, str]:
    """Whether the calls made (``{"tool", "arguments"}`` each) are what BFCL accepts, and what was wrong."""
    if len(calls) != len(expected):
        return False, f"expected {len(expected)} call{'s' if len(expected) != 1 else ''}, made {len(calls)}"
    matched: set[int] = set()
    for want in expected:
        problems = []
        for index, call in enumerate(calls):
            if index not in matched:
                problem = call_problem(want, call["tool"], call["arguments"])
                if problem is None:
                    matched.add(index)
                    break
                problems.append(problem)
        else:
            return False, "; ".join(dict.fromkeys(problems))
    return True, f"{len(expected)} of {len(expected)} expected calls made"


def call_problem(want: dict, tool: str, arguments: dict) -> str | None:
    """What keeps one call from fitting one expected call (BFCL's simple_function_checker); None when it fits."""
    if tool != want["tool"]:
        return f"called {tool}, expected {want['tool']}"
    schema, possible = want["parameters"], want["arguments"]
    properties = schema.get("properties", {})
    for name in schema.get("required", []):
        if name not in arguments:
            return f"{tool}: {name} missing (required)"
    for name, value in arguments.items():
        if name not in properties or name not in possible:
            return f"{tool}: unexpected argument {name}"
        problem = _value_problem(value, possible[name], properties[name])
        if problem:
            return f"{tool}: {name}={_short(value)} {problem}"
    for name, values in possible.items():
        if name not in arguments and "" not in values:
            return f"{tool}: {name} missing (it may not be left out)"
    return None


def _value_problem(value, possible: list, spec: dict) -> str | None:
    kind = spec["type"]
    expected = TYPES[kind]
    items = spec.get("items") if kind == "array" else None
    item_kind = items.get("type") if isinstance(items, dict) else None
    nested = TYPES.get(item_kind) if isinstance(item_kind, str) else None
    if kind == "number" and type(value) is int:  # BFCL: Python's own int-to-float
        value = float(value)
    valid, variable = _type_fits(value, possible, expected, nested)
    if not valid:
        return f"is not of type {kind}" + (f" of {item_kind}" if nested else "")
    if not variable:  # a value of the possible answers' own type (BFCL's "variable") is compared as it is
        if expected is dict:
            return _object_problem(value, possible)
        if expected is list and nested is dict:
            return _objects_problem(value, possible)
        if expected is str and standard(value) not in [standard(p) for p in possible if type(p) is str]:
            return f"is none of {_short(possible)} (compared without spaces, punctuation or case)"
        if expected is list and [_standard_item(v) for v in value] not in [_standard_items(p) for p in possible]:
            return f"is none of {_short(possible)}"
        if expected in (str, list):
            return None
    return None if value in possible else f"is none of {_short(possible)}"


def _type_fits(value, possible: list, expected: type[Any], nested: type[Any] | None) -> tuple[bool, bool]:
    """(of the right type, a "variable": of the possible answers' type instead), as BFCL's type_checker says."""
    answer_type = next((type(p) for p in possible if p != ""), None)
    variable = answer_type is not None and answer_type is not expected
    if type(value) is expected:
        if nested is None:
            return True, variable
        for answer in possible:  # the items must fit for one acceptable value (one that is not a list passes)
            if type(answer) is not list or all(_type_fits(item, answer, nested, None)[0] for item in value):
                return True, variable
        return False, variable
    return (True, True) if answer_type is not None and type(value) is answer_type else (False, False)


def _object_problem(value: dict, possible: list) -> str | None:
    """BFCL's dict_checker: every key given is in one acceptable object, with one of its values; every key it
    lists is given unless "" is among its values."""
    problem: str | None = "has no acceptable value"
    for answer in possible:
        if answer == "":
            continue
        if not isinstance(answer, dict):
            problem = f"is not {_short(answer)}"
            continue
        problem = None
        for key, item in value.items():
            if key not in answer:
                problem = f"has an unexpected key {key!r}"
            elif _standard_item(item) not in _standard_items(answer[key]):
                problem = f"has {key}={_short(item)}, none of {_short(answer[key])}"
            if problem:
                break
        for key, items in answer.items():
            if problem is None and key not in value and not _contains(items, ""):
                problem = f"lacks the key {key!r}"
        if problem is None:
            return None
    return problem


def _objects_problem(value: list, possible: list) -> str | None:
    """BFCL's list_dict_checker: as many objects as one acceptable list, each fitting its own, in order."""
    problem: str | None = "has no acceptable value"
    for answer in possible:
        if not isinstance(answer, (list, str)) or len(value) != len(answer):
            problem = "has the wrong number of objects"
            continue
        problem = None
        for item, want in zip(value, answer):
            problem = _object_problem(item, [want]) if isinstance(item, dict) else "has an item that is not an object"
            if problem:
                break
        if problem is None:
            return None
    return problem


def standard(text: str) -> str:
    """A string as BFCL compares it: no spaces or ``,./-_*^``, lowercased, ' as "."""
    return _IGNORED.sub("", text).lower().replace("'", '"')


def _standard_item(value):
    return standard(value) if type(value) is str else value


def _standard_items(values) -> list:
    """The acceptable values, their strings standardised (a string's characters, as BFCL iterates one)."""
    return [_standard_item(v) for v in values] if isinstance(values, (list, str)) else []


def _contains(values, item) -> bool:
    return isinstance(values, (list, str, dict)) and item in values


def _short(value, limit: int = 80) -> str:
    return shorten(json.dumps(value, ensure_ascii=False), limit)
