"""Evaluation suites: tasks with starting files and checks, loaded from JSONL and checked after a run.

One task per line:
    {"id": "calc-seed", "category": "calculator", "task": "Compute 128*96 + 45**2 - 88/2",
     "files": {}, "checks": {"answer_number": 14269, "tools_called": ["calculator"]}}

Checks (all given must hold; a run whose status is not "final" fails whatever they say):
- answer_number: a number that must appear in the answer; "14,269", "14 269", "14269.0" all count.
  Either a number or {"value": 3.14, "tolerance": 0.005} (absolute).
- answer_contains: substrings that must all appear in the answer (case-insensitive).
- answer_any: substrings of which at least one must appear (case-insensitive).
- answer_current: "year" or "date" (YYYY-MM-DD): the answer contains the current one at check time;
  any time zone's counts (UTC-12 to UTC+14), so a run at midnight is not failed unfairly.
- file_equals: {path: content}: the file holds exactly this after the run (one trailing newline ignored).
- tools_called: tools that must each be called at least once.
- tools_not_called: tools that must not be called.
- calls_match: calls the run must make, in any order: [{"tool", "arguments": {arg: [acceptable values]},
  "optional": [args that may be left out]}]. Each is matched by a distinct call made; an argument given must
  be listed (with one of its values: numbers by value, strings trimmed and case-insensitively) or optional
  (an optional argument not in "arguments" may take any value); with the line's own tools, an argument
  given its parameter's documented default counts as left out. Any other call made must repeat a matched
  one exactly; a call to another tool, or to an expected one with other arguments, fails the check.
- no_call: true: no tool may be called (a question no offered tool fits).
- some_call: true: at least one tool must be called.
- bfcl_match: the calls the run must make, scored as the Berkeley Function Calling Leaderboard scores them
  (agent/evaluation/bfcl_scoring.py): [{"tool", "arguments": {arg: [acceptable values, "" if it may be left
  out]}}]; only with the line's own tools, whose parameter types it reads.
Checks read every call the run made, malformed ones included; a reply whose every call is malformed is
re-asked, not made.

A line may bring its own tools instead of the built-in ones: "tools" is a list of OpenAI function specs
and "results" scripts their answers ({tool: [{"when": {arg: [values]}, "result": ...}, {"result": default}]},
see agent/evaluation/scripted_tools.py); the run then sees only those tools.

Optional fields of a line shape the run: "instructions" are given to it as the user's own (after the
protocol's system prompt), "history" is the conversation before the task ([{"role": "user" or "assistant",
"content"}]), and "one_reply": true ends the run at the model's first usable reply (after any re-asks): its
calls are what the checks read, and none is run.
"""
from __future__ import annotations

import copy
import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from importlib.resources import files as package_files
from pathlib import Path, PurePosixPath, PureWindowsPath

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from agent.config import ConfigError
from agent.evaluation.bfcl_scoring import TYPES as BFCL_TYPES, bfcl_match
from agent.evaluation.scripted_tools import accepts, same, scripted_registry
from agent.tools.text import shorten

BUILTIN = "built-in"
MAX_SUITE_BYTES = 50_000_000

_strings = {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1}
_path = {"type": "string", "minLength": 1}
_name = {"type": "string", "pattern": r"^[A-Za-z0-9_-]{1,64}$"}
_pattern = {"type": "object", "additionalProperties": {"type": "array", "minItems": 1}}  # arg: acceptable values
_tool_spec = {
    "type": "object", "required": ["type", "function"], "additionalProperties": False,
    "properties": {
        "type": {"const": "function"},
        "function": {
            "type": "object", "required": ["name", "description"], "additionalProperties": False,
            "properties": {
                "name": _name, "description": {"type": "string", "minLength": 1}, "strict": {"type": "boolean"},
                "parameters": {"type": "object", "required": ["type"], "properties": {"type": {"const": "object"}}},
            },
        },
    },
}
_rule = {"type": "object", "required": ["result"], "additionalProperties": False,
         "properties": {"when": {**_pattern, "minProperties": 1}, "result": {}}}
_expected_call = {"type": "object", "required": ["tool"], "additionalProperties": False,
                  "properties": {"tool": _name, "arguments": _pattern,
                                 "optional": {"type": "array", "items": {"type": "string"}, "uniqueItems": True}}}
_bfcl_call = {"type": "object", "required": ["tool", "arguments"], "additionalProperties": False,
              "properties": {"tool": _name, "arguments": {"type": "object", "additionalProperties": {"type": "array"}}}}
_message = {"type": "object", "required": ["role", "content"], "additionalProperties": False,
            "properties": {"role": {"enum": ["user", "assistant"]}, "content": {"type": "string"}}}
TASK_SCHEMA = {
    "type": "object",
    "required": ["id", "task", "checks"],
    "additionalProperties": False,
    "properties": {
        "id": {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"},
        "category": {"type": "string", "minLength": 1},
        "task": {"type": "string", "minLength": 1},
        "files": {"type": "object", "propertyNames": _path, "additionalProperties": {"type": "string"}},
        "tools": {"type": "array", "minItems": 1, "items": _tool_spec},
        "results": {"type": "object", "additionalProperties": {"type": "array", "minItems": 1, "items": _rule}},
        "instructions": {"type": "string", "minLength": 1},
        "history": {"type": "array", "items": _message},
        "one_reply": {"type": "boolean"},
        "checks": {
            "type": "object",
            "minProperties": 1,
            "additionalProperties": False,
            "properties": {
                "answer_number": {"oneOf": [
                    {"type": "number"},
                    {"type": "object", "required": ["value"], "additionalProperties": False,
                     "properties": {"value": {"type": "number"}, "tolerance": {"type": "number", "minimum": 0}}},
                ]},
                "answer_contains": _strings,
                "answer_any": _strings,
                "answer_current": {"enum": ["year", "date"]},
                "file_equals": {"type": "object", "minProperties": 1, "propertyNames": _path,
                                "additionalProperties": {"type": "string"}},
                "tools_called": _strings,
                "tools_not_called": _strings,
                "calls_match": {"type": "array", "minItems": 1, "items": _expected_call},
                "no_call": {"const": True},
                "some_call": {"const": True},
                "bfcl_match": {"type": "array", "minItems": 1, "items": _bfcl_call},
            },
        },
    },
}
_validator = Draft202012Validator(TASK_SCHEMA)


@dataclass
class Task:
    id: str
    task: str
    checks: dict
    files: dict[str, str] = field(default_factory=dict)
    category: str = ""
    line: int = 0
    tools: list[dict] = field(default_factory=list)  # OpenAI function specs; empty: the built-in tools
    results: dict[str, list[dict]] = field(default_factory=dict)  # scripted answers, by tool
    instructions: str = ""  # given to the run as the user's own
    history: list[dict] = field(default_factory=list)  # the conversation before the task
    one_reply: bool = False  # the run ends at the first usable reply; its calls are checked, none is run


def load_suite(path: str | None = None, tool_names: set[str] | None = None) -> list[Task]:
    """The tasks of a JSONL suite (the built-in one when no path is given); ConfigError says what is wrong where."""
    if path is None:
        where = BUILTIN + " suite"
        text = (package_files("agent.evaluation") / "suite.jsonl").read_text(encoding="utf-8")
    else:
        where = path
        try:
            if Path(path).stat().st_size > MAX_SUITE_BYTES:
                raise ConfigError(f"suite {path} is larger than {MAX_SUITE_BYTES // 1_000_000} MB; split it")
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise ConfigError(f"cannot read suite {path}: {error}") from None
    tasks: list[Task] = []
    seen: dict[str, int] = {}  # task id -> the line it is on
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                task = _parse_line(line, number, tool_names)
            except ValueError as error:
                raise ConfigError(f"{where}, line {number}: {error}") from None
            if task.id in seen:
                raise ConfigError(f"{where}, line {number}: task id {task.id!r} already used on line {seen[task.id]}")
            seen[task.id] = number
            tasks.append(task)
    if not tasks:
        raise ConfigError(f"{where}: no tasks (one JSON object per line)")
    return tasks


def _parse_line(line: str, number: int, tool_names: set[str] | None) -> Task:
    try:
        data = json.loads(line, parse_constant=_not_a_number, parse_float=_finite, parse_int=_integer)
    except json.JSONDecodeError as error:
        raise ValueError(f"not valid JSON: {error.msg} (column {error.colno})") from None
    except RecursionError:
        raise ValueError("nested too deeply; a task is a flat object of a few levels") from None
    except ValueError as error:  # NaN, Infinity, a number too large
        raise ValueError(f"not valid JSON: {error}") from None
    return make_task(data, number, tool_names)


def make_task(data, number: int = 0, tool_names: set[str] | None = None) -> Task:
    """The task of one suite line's decoded JSON, checked as a line is; ValueError says what is wrong."""
    try:
        error = best_match(_validator.iter_errors(data))
    except RecursionError:
        raise ValueError("nested too deeply; a task is a flat object of a few levels") from None
    if error is not None:
        at = "/".join(str(p) for p in error.absolute_path)
        raise ValueError(f"{at + ': ' if at else ''}{shorten(error.message, 200)}")
    data = {**data, "checks": copy.deepcopy(data["checks"])}  # the checks get what they read added: not the caller's
    paths = list(data.get("files", {})) + list(data["checks"].get("file_equals", {}))
    for relative in paths:
        problem = unsafe_path(relative)
        if problem:
            raise ValueError(f"path {relative!r} {problem}")
    _check_tool_use(data, tool_names)
    return Task(data["id"], data["task"], data["checks"], data.get("files", {}), data.get("category", ""), number,
                data.get("tools", []), data.get("results", {}), data.get("instructions", ""),
                data.get("history", []), data.get("one_reply", False))


def _check_tool_use(data: dict, tool_names: set[str] | None) -> None:
    """The tools the checks name exist (the line's own, when it has some), and its own tools, their scripted
    results and the calls expected of them are sound. Each expected call of the line's own tools is given its
    tool's documented defaults (``defaults``), which the check reads as arguments left out."""
    checks = data["checks"]
    parameters = _own_tools(data["tools"], data.get("results", {})) if "tools" in data else None
    if parameters is not None:
        tool_names = set(parameters)
    elif "results" in data:
        raise ValueError("results script the line's own tools; add \"tools\" or remove \"results\"")
    for other in ("calls_match", "bfcl_match", "some_call"):
        if checks.get("no_call") and other in checks:
            raise ValueError(f"checks: no_call and {other} contradict each other; keep one")
    calls, scored = checks.get("calls_match", []), checks.get("bfcl_match", [])
    if scored and parameters is None:
        raise ValueError("checks/bfcl_match reads the types of the line's own tools; add \"tools\"")
    named = set(checks.get("tools_called", [])) | set(checks.get("tools_not_called", [])) | {
        c["tool"] for c in calls + scored}
    unknown = sorted(named - tool_names) if tool_names is not None else []
    if unknown:
        raise ValueError(f"unknown tool {', '.join(unknown)}; tools: {', '.join(sorted(tool_names or ()))}")
    own = parameters or {}  # with bfcl_match, the line has its tools (above)
    for index, expected in enumerate(calls if parameters is not None else []):
        _check_expected_call(expected, own[expected["tool"]], f"checks/calls_match/{index}")
        expected["defaults"] = {name: spec["default"] for name, spec in
                                own[expected["tool"]].get("properties", {}).items()
                                if isinstance(spec, dict) and "default" in spec}  # passing one is leaving it out
    for index, expected in enumerate(scored):
        expected["parameters"] = _typed(own[expected["tool"]], expected["tool"], f"checks/bfcl_match/{index}")


def _typed(parameters: dict, tool: str, at: str) -> dict:
    """The tool's parameters, once each is known to have one of the types bfcl_match reads."""
    for name, spec in parameters.get("properties", {}).items():
        kind = spec.get("type") if isinstance(spec, dict) else None
        if not isinstance(kind, str) or kind not in BFCL_TYPES:
            raise ValueError(f"{at}: parameter {name!r} of {tool} has the type {_short(kind)}; bfcl_match reads one "
                             f"of {', '.join(BFCL_TYPES)}")
    return parameters


def _own_tools(specs: list[dict], results: dict) -> dict[str, dict]:
    """Each tool's parameters by name, once the tools and their scripted results are known to be sound."""
    try:
        registry = scripted_registry(specs, results)
    except ValueError as error:
        raise ValueError(f"tools: {error}") from None
    parameters = registry.parameters()
    for name, rules in results.items():
        if name not in parameters:
            raise ValueError(f"results: no tool {name!r} in tools; tools: {', '.join(parameters)}")
        for index, rule in enumerate(rules):
            _check_pattern(rule.get("when", {}), parameters[name], f"results/{name}/{index}/when")
    return parameters


def _check_expected_call(expected: dict, parameters: dict, at: str) -> None:
    """An expected call that the tool's own schema would make impossible is a mistake in the suite."""
    pattern, optional = expected.get("arguments", {}), expected.get("optional", [])
    _check_pattern(pattern, parameters, f"{at}/arguments")
    properties = parameters.get("properties", {})
    for name in optional:
        if name not in properties:
            raise ValueError(f"{at}/optional: {expected['tool']} has no parameter {name!r}")
    unlisted = [name for name in parameters.get("required", []) if name not in pattern and name not in optional]
    if unlisted:
        raise ValueError(f"{at}: required parameter {', '.join(unlisted)} of {expected['tool']} is neither in "
                         "arguments nor optional, so no call could match")


def _check_pattern(pattern: dict, parameters: dict, at: str) -> None:
    """Each argument named is a parameter of the tool, and each acceptable value fits that parameter's schema."""
    properties = parameters.get("properties", {})
    for name, values in pattern.items():
        if name not in properties:
            raise ValueError(f"{at}: no parameter {name!r}; parameters: {', '.join(properties) or 'none'}")
        schema = {**properties[name], "$defs": parameters.get("$defs", {})} if isinstance(
            properties[name], dict) else properties[name]
        for value in values:
            error = best_match(Draft202012Validator(schema).iter_errors(value))
            if error is not None:
                raise ValueError(f"{at}/{name}: the acceptable value {_short(value)} does not fit the parameter: "
                                 f"{error.message[:120]}")


def _not_a_number(word: str):
    raise ValueError(f"{word} is not a JSON number; write a finite number")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:20]} is too large; write a finite number")
    return value


def _integer(text: str) -> int:
    if len(text) > 100:
        raise ValueError(f"an integer of {len(text)} digits is too long; write at most 100")
    return int(text)


def unsafe_path(relative: str) -> str | None:
    """Why a suite path could land outside the workspace, or None when it is a plain relative path."""
    if "\0" in relative:
        return "contains a NUL character"
    if PurePosixPath(relative).is_absolute() or PureWindowsPath(relative).anchor:
        return "must be relative to the workspace"
    if ".." in PureWindowsPath(relative).parts:
        return "must stay inside the workspace (no '..')"
    return None


def write_files(workspace: Path, task: Task) -> None:
    for relative, content in task.files.items():
        target = workspace / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8", newline="")


def check_run(checks: dict, answer: str | None, calls: list[dict], workspace: Path,
              now: datetime | None = None) -> list[dict]:
    """One {"check", "ok", "detail"} per check, in the order the task gives them.

    ``calls`` are the run's tool calls, {"tool", "arguments"} each (a RunResult's tool_calls).
    """
    results = []
    for name, expected in checks.items():
        ok, detail = CHECKS[name](expected, answer or "", calls, workspace, now)
        results.append({"check": name, "ok": ok, "detail": detail})
    return results


def _answer_number(expected, answer, tools, workspace, now):
    if not isinstance(expected, dict):
        expected = {"value": expected}
    value, tolerance = expected["value"], expected.get("tolerance", 0)
    found = numbers_in(answer)
    if any(math.isclose(n, value, rel_tol=1e-9, abs_tol=tolerance) for n in found + numbers_in(answer, False)):
        return True, f"{_number(value)} found"
    seen = ", ".join(_number(n) for n in found[:8]) or "none"
    return False, f"expected {_number(value)}{f' ± {tolerance}' if tolerance else ''}; numbers in the answer: {seen}"


def _answer_contains(expected, answer, tools, workspace, now):
    missing = [s for s in expected if _fold(s) not in _fold(answer)]
    return not missing, f"missing {', '.join(map(repr, missing))}" if missing else "all found"


def _answer_any(expected, answer, tools, workspace, now):
    hits = [s for s in expected if _fold(s) in _fold(answer)]
    return bool(hits), f"found {hits[0]!r}" if hits else f"none of {', '.join(map(repr, expected))}"


def _answer_current(expected, answer, tools, workspace, now):
    now = now or datetime.now(timezone.utc)
    form = "%Y" if expected == "year" else "%Y-%m-%d"
    accepted = sorted({(now + timedelta(hours=h)).strftime(form) for h in (-12, 0, 14)})
    hit = next((a for a in accepted if a in answer), None)
    return hit is not None, f"found {hit}" if hit else f"expected the current {expected}: {' or '.join(accepted)}"


def _file_equals(expected, answer, tools, workspace, now):
    problems = []
    for relative, content in expected.items():
        target = workspace / relative
        if not target.is_file():
            problems.append(f"{relative}: missing")
            continue
        actual = target.read_text(encoding="utf-8", errors="replace")
        if actual.removesuffix("\n") != content.removesuffix("\n"):
            problems.append(f"{relative}: expected {content!r}, found {actual[:200]!r}")
    return not problems, "; ".join(problems) or "as expected"


def _tools_called(expected, answer, calls, workspace, now):
    missing = [t for t in expected if t not in {c["tool"] for c in calls}]
    return not missing, f"not called: {', '.join(missing)}" if missing else "all called"


def _tools_not_called(expected, answer, calls, workspace, now):
    called = [t for t in expected if t in {c["tool"] for c in calls}]
    return not called, f"called: {', '.join(called)}" if called else "none called"


def _no_call(expected, answer, calls, workspace, now):
    names = list(dict.fromkeys(c["tool"] for c in calls))
    return not calls, f"called: {', '.join(names)}" if calls else "no call made"


def _some_call(expected, answer, calls, workspace, now):
    names = list(dict.fromkeys(c["tool"] for c in calls))
    return bool(calls), f"called: {', '.join(names)}" if calls else "no call made"


def _bfcl_match(expected, answer, calls, workspace, now):
    return bfcl_match(expected, calls)


def _calls_match(expected, answer, calls, workspace, now):
    """Each expected call is matched by a distinct call made, in any order; every other call made must
    repeat a matched one exactly (same tool, same arguments); a call to anything else fails the check."""
    made = [(c["tool"], c["arguments"]) for c in calls]
    owner = _assign(expected, made)  # made index -> expected index
    missed = [want for index, want in enumerate(expected) if index not in owner.values()]
    problems = [_why_unmatched(want, made, [made[j] for j in range(len(made)) if j not in owner]) for want in missed]
    for j, (tool, arguments) in enumerate(made):  # a wrong call to a missed tool is told above, as a mismatch
        if j not in owner and tool not in {want["tool"] for want in missed} and not any(
                made[k][0] == tool and same(made[k][1], arguments) for k in owner):
            problems.append(f"unexpected call {tool}({_short(arguments)})")
    if problems:
        return False, "; ".join(dict.fromkeys(problems))
    return True, f"{len(expected)} of {len(expected)} expected calls made"


def _argument_problems(expected: dict, arguments: dict) -> list[str]:
    """What keeps a call's arguments from matching an expected call; empty when they match."""
    pattern, optional = expected.get("arguments", {}), set(expected.get("optional", []))
    problems = []
    for name, values in pattern.items():
        if name not in arguments:
            if name not in optional:
                problems.append(f"{name} missing")
        elif not accepts(values, arguments[name]):
            problems.append(f"{name}={_short(arguments[name])}, expected one of {_short(values)}")
    defaults = expected.get("defaults", {})
    problems += [f"unexpected argument {name}" for name in arguments if name not in pattern and name not in optional
                 and not (name in defaults and same(defaults[name], arguments[name]))]
    return problems


def _assign(expected: list[dict], made: list[tuple[str, dict]]) -> dict[int, int]:
    """As many expected calls as possible, each matched to a distinct call made (augmenting paths)."""
    fitting = [[j for j, (tool, arguments) in enumerate(made)
                if tool == want["tool"] and not _argument_problems(want, arguments)] for want in expected]
    owner: dict[int, int] = {}

    def place(index: int, tried: set[int]) -> bool:
        for j in fitting[index]:
            if j not in tried:
                tried.add(j)
                if j not in owner or place(owner[j], tried):
                    owner[j] = index
                    return True
        return False

    for index in range(len(expected)):
        place(index, set())
    return owner


def _why_unmatched(want: dict, made: list[tuple[str, dict]], unused: list[tuple[str, dict]]) -> str:
    tool = want["tool"]
    candidates = [_argument_problems(want, arguments) for name, arguments in unused if name == tool]
    if candidates:
        fewest: list[str] = min(candidates, key=len)
        return f"{tool}: {', '.join(fewest)}"
    if any(name == tool for name, _ in made):
        return f"{tool}: no call left for {_short(want.get('arguments', {}))}"
    return f"{tool} not called"


CHECKS = {
    "answer_number": _answer_number,
    "answer_contains": _answer_contains,
    "answer_any": _answer_any,
    "answer_current": _answer_current,
    "file_equals": _file_equals,
    "tools_called": _tools_called,
    "tools_not_called": _tools_not_called,
    "calls_match": _calls_match,
    "no_call": _no_call,
    "some_call": _some_call,
    "bfcl_match": _bfcl_match,
}


def sample(tasks: list[Task], per_category: int, seed: int) -> list[Task]:
    """At most ``per_category`` tasks of each category, in suite order (see `sampled`)."""
    chosen = sampled([(t.category, t.id) for t in tasks], per_category, seed)
    return [t for t in tasks if t.id in chosen]


def sampled(tasks: list[tuple[str, str]], per_category: int, seed: int) -> set[str]:
    """The ids of at most ``per_category`` of the (category, id) pairs of each category: those whose SHA-256 of the
    seed and their id ranks lowest, so the same seed always picks the same tasks, and a larger sample keeps them."""
    def rank(task_id: str) -> str:
        return hashlib.sha256(f"{seed}:{task_id}".encode()).hexdigest()

    chosen = set()
    for category in dict.fromkeys(category for category, _ in tasks):
        chosen.update(sorted((i for c, i in tasks if c == category), key=rank)[:per_category])
    return chosen


_SEPARATOR = re.compile(r"(?<=\d)[,'\u00a0\u2009\u202f ](?=\d{3}(?!\d))")
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


def numbers_in(text: str, grouped: bool = True) -> list[float]:
    """The numbers in the text; ``grouped`` reads "14,269" and "14 269" as 14269, else as two numbers."""
    text = text.replace("\u2212", "-")
    if grouped:
        text = _SEPARATOR.sub("", text)
    values = (float(match.group()) for match in _NUMBER.finditer(text))
    return list(dict.fromkeys(v for v in values if math.isfinite(v)))


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e16 else repr(value)


def _short(value, limit: int = 80) -> str:
    """A value as JSON, cut to ``limit`` characters."""
    return shorten(json.dumps(value, ensure_ascii=False), limit)


def _fold(text: str) -> str:
    return " ".join(text.replace("\u2019", "'").casefold().split())
