"""The Berkeley Function Calling Leaderboard's data as suite tasks: `agent eval bfcl:CATEGORY,...`.

The data comes from the bfcl-eval package (`pip install --no-deps bfcl-eval`), found through its installed
metadata and never imported, or from a bfcl-eval wheel or a folder the user names. Each item becomes one
line of the suite (agent/evaluation/suites.py), checked as any line is:
- its functions are the line's tools, converted as BFCL's OpenAI handler converts them (convert_to_tool):
  a dot in a name becomes "_", dict is object, float is number (format "float", and the description says
  so), tuple is array, any is string, and each description ends with BFCL's note that the function is in
  Python 3 syntax;
- its question is the task: a system message is given as the user's instructions, earlier messages as the
  conversation before it;
- its possible answers are a `bfcl_match` check (BFCL's AST checker's rules), `no_call` in irrelevance
  (`some_call` in live_relevance);
- the run ends at the model's first usable reply, the one response BFCL scores (`one_reply`).
The live categories are the project's release test set: they load only when the caller says this is a
release check.
"""
from __future__ import annotations

import copy
import importlib.metadata
import json
import re
import zipfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from agent.config import ConfigError
from agent.evaluation.suites import Task, make_task, sampled

DISTRIBUTION = "bfcl-eval"
INSTALL = "pip install --no-deps bfcl-eval"
PREFIX = "bfcl:"
CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance")
RELEASE_CATEGORIES = ("live_simple", "live_multiple", "live_parallel", "live_parallel_multiple", "live_irrelevance",
                      "live_relevance")
UNSCORED = ("irrelevance", "live_irrelevance", "live_relevance")  # no possible answers: whether a call is made
MAX_FILE_BYTES = 50_000_000  # the largest file bfcl-eval ships, live_multiple's questions, is 3.9 MB
DATA_FOLDER = "bfcl_eval/data"
# BFCL's Python types as JSON Schema types (its GORILLA_TO_OPENAPI, for the types its Python checker knows)
TYPES = {"string": "string", "integer": "integer", "float": "number", "boolean": "boolean", "array": "array",
         "tuple": "array", "dict": "object", "any": "string"}
PYTHON_NOTE = " Note that the provided function is in Python 3 syntax."
FLOAT_NOTE = " This is a float type value."
_FILE = re.compile(r"^BFCL_v(\d+)_([a-z_]+)\.json$")

_function = {"type": "object", "required": ["name", "description", "parameters"],
             "properties": {"name": {"type": "string", "minLength": 1}, "description": {"type": "string"},
                            "parameters": {"type": "object", "required": ["properties"],
                                           "properties": {"properties": {"type": "object", "additionalProperties": {
                                               "type": "object"}}, "required": {"type": "array"}}}}}
ITEM = Draft202012Validator({
    "type": "object", "required": ["id", "question", "function"],
    "properties": {
        "id": {"type": "string", "minLength": 1},
        "question": {"type": "array", "minItems": 1, "items": {"type": "array", "minItems": 1, "items": {
            "type": "object", "required": ["role", "content"],
            "properties": {"role": {"enum": ["system", "user", "assistant"]}, "content": {"type": "string"}}}}},
        "function": {"type": "array", "items": _function},
    },
})
ANSWER = Draft202012Validator({
    "type": "object", "required": ["id", "ground_truth"],
    "properties": {"id": {"type": "string"}, "ground_truth": {"type": "array", "minItems": 1, "items": {
        "type": "object", "minProperties": 1, "maxProperties": 1,
        "additionalProperties": {"type": "object", "additionalProperties": {"type": "array"}}}}},
})


@dataclass
class Benchmark:
    """The tasks of the categories asked for, where their data came from, and the items left out, by category."""

    tasks: list[Task]
    source: str
    left_out: dict[str, int] = field(default_factory=dict)


def load_bfcl(categories: str, data: str | None = None, release: bool = False, sample: int | None = None,
              seed: int = 0) -> Benchmark:
    """The tasks of ``categories`` (comma-separated); ``data``: a bfcl-eval wheel or folder, else the installed
    package; ``release``: the live categories (the release test set) may load; ``sample``: that many items of
    each category, chosen by ``seed`` as suites.sample chooses (only those are converted). ConfigError says
    what to do."""
    wanted = [c.strip() for c in categories.split(",") if c.strip()]
    known = CATEGORIES + RELEASE_CATEGORIES
    if not wanted:
        raise ConfigError(f"{PREFIX} names no category; e.g. {PREFIX}{','.join(CATEGORIES)}")
    unknown = [c for c in wanted if c not in known]
    if unknown:
        raise ConfigError(f"no BFCL category {', '.join(unknown)}; the categories are {', '.join(CATEGORIES)} and, "
                          f"for a release check, {', '.join(RELEASE_CATEGORIES)}")
    live = [c for c in wanted if c in RELEASE_CATEGORIES]
    if live and not release:
        raise ConfigError(f"{', '.join(live)}: BFCL's live categories are the project's release test set, run only to "
                          "check a release, never while working on the prompt; add --release-test-set for that")
    files = DataFiles.find(data)
    benchmark = Benchmark([], files.source)
    for category in dict.fromkeys(wanted):
        tasks, left_out = convert(category, files, sample, seed)
        benchmark.tasks += tasks
        if left_out:
            benchmark.left_out[category] = left_out
    twice = [i for i, n in Counter(t.id for t in benchmark.tasks).items() if n > 1]
    if twice:
        raise ConfigError(f"{files.source}: the item id {twice[0]} is used twice; install the data again: "
                          f"{INSTALL} --force-reinstall")
    return benchmark


class DataFiles:
    """BFCL's question and answer files, by name relative to bfcl_eval/data, in an installed distribution, a
    wheel or a folder."""

    def __init__(self, source: str, names: dict[str, Any], wheel: zipfile.ZipFile | None = None):
        self.source, self.names, self.wheel = source, names, wheel  # name -> a Path, or a member of the wheel

    @classmethod
    def find(cls, data: str | None) -> DataFiles:
        if data is None:
            return cls.installed()
        path = Path(data).expanduser()
        if path.is_dir():
            root = path / DATA_FOLDER if (path / DATA_FOLDER).is_dir() else path
            names: dict[str, Any] = {p.relative_to(root).as_posix(): p for p in root.rglob("*.json")}
            return cls(f"{path} (a folder)", names)
        if path.is_file():
            try:
                wheel = zipfile.ZipFile(path)
            except (zipfile.BadZipFile, OSError) as error:
                raise ConfigError(f"--bfcl-data {data}: not a wheel ({error}); pass a bfcl-eval .whl or a folder "
                                  "holding its data") from None
            prefix = DATA_FOLDER + "/"
            names = {i.filename[len(prefix):]: i for i in wheel.infolist() if i.filename.startswith(prefix)}
            return cls(f"{path.name} (a wheel)", names, wheel)
        raise ConfigError(f"--bfcl-data {data}: no such file or folder; pass a bfcl-eval .whl or a folder holding "
                          "its data")

    @classmethod
    def installed(cls) -> DataFiles:
        try:
            distribution = importlib.metadata.distribution(DISTRIBUTION)
        except importlib.metadata.PackageNotFoundError:
            raise ConfigError(f"the BFCL data is not installed: {INSTALL} (or pass --bfcl-data with a bfcl-eval "
                              "wheel or folder)") from None
        prefix = PurePosixPath(DATA_FOLDER)
        names = {PurePosixPath(f).relative_to(prefix).as_posix(): Path(str(distribution.locate_file(f)))
                 for f in distribution.files or [] if PurePosixPath(f).is_relative_to(prefix)}
        return cls(f"{DISTRIBUTION} {distribution.version}", names)

    def newest(self, category: str, answers: bool = False) -> str | None:
        """The name of the category's file of the newest BFCL version here (questions, or possible answers)."""
        folder = "possible_answer/" if answers else ""
        versions = [(int(m[1]), name) for name in self.names if name.startswith(folder)
                    and (m := _FILE.match(name[len(folder):])) and m[2] == category]
        return max(versions)[1] if versions else None

    def lines(self, name: str) -> list[str]:
        entry, where = self.names[name], f"{self.source}: {name}"
        try:
            size = entry.file_size if self.wheel else entry.stat().st_size
            if size > MAX_FILE_BYTES:
                raise ConfigError(f"{where} is {size // 1_000_000} MB, more than BFCL's files could be "
                                  f"({MAX_FILE_BYTES // 1_000_000} MB); reinstall it: {INSTALL} --force-reinstall")
            raw = self.wheel.read(entry) if self.wheel else entry.read_bytes()
            return raw.decode("utf-8").splitlines()
        except (OSError, UnicodeDecodeError, zipfile.BadZipFile) as error:
            raise ConfigError(f"cannot read {where}: {error}") from None


def convert(category: str, files: DataFiles, sample: int | None = None, seed: int = 0) -> tuple[list[Task], int]:
    """The category's items as tasks (``sample`` of them, if given, chosen by ``seed``), and how many were left
    out (those that offer no function)."""
    name = files.newest(category)
    if name is None:
        raise ConfigError(f"{files.source} has no questions for {category} (BFCL_v*_{category}.json); "
                          f"install the data again: {INSTALL} --force-reinstall")
    items = _read(files, name, ITEM)
    answers, scored = {}, category not in UNSCORED
    if scored:
        answer_file = files.newest(category, answers=True)
        if answer_file is None:
            raise ConfigError(f"{files.source} has no possible answers for {category}; install the data again: "
                              f"{INSTALL} --force-reinstall")
        answers = {a["id"]: a["ground_truth"] for a in _read(files, answer_file, ANSWER)}
    offered = [item for item in items if item["function"]]
    left_out = len(items) - len(offered)
    if sample:
        chosen = sampled([(category, item["id"]) for item in offered], sample, seed)
        offered = [item for item in offered if item["id"] in chosen]
    tasks = []
    for item in offered:
        where = f"{files.source}: {name}, item {item['id']}"
        if scored and item["id"] not in answers:
            raise ConfigError(f"{where}: no possible answer for it in {answer_file}; install the data again: "
                              f"{INSTALL} --force-reinstall")
        try:
            tasks.append(make_task(line(item, category, answers.get(item["id"]))))
        except ValueError as error:
            raise ConfigError(f"{where}: {error}") from None
    return tasks, left_out


def _read(files: DataFiles, name: str, validator: Draft202012Validator) -> list[dict]:
    """The JSON objects of a BFCL file, one a line, each checked against the shape the conversion reads."""
    values = []
    for number, text in enumerate(files.lines(name), 1):
        if not text.strip():
            continue
        try:
            value = json.loads(text)
        except (json.JSONDecodeError, RecursionError) as error:
            reason = f"{error.msg} (column {error.colno})" if isinstance(error, json.JSONDecodeError) else "too deep"
            raise ConfigError(f"{files.source}: {name}, line {number}: not valid JSON: {reason}; the file is damaged, "
                              f"install it again: {INSTALL} --force-reinstall") from None
        fault = best_match(validator.iter_errors(value))
        if fault is not None:
            at = "/".join(str(p) for p in fault.absolute_path)
            raise ConfigError(f"{files.source}: {name}, line {number}: {at + ': ' if at else ''}{fault.message[:200]}"
                              "; not an item of BFCL's format")
        values.append(value)
    return values


def line(item: dict, category: str, answer: list[dict] | None) -> dict:
    """The suite line of one BFCL item; ValueError for what cannot be converted."""
    *before, last = item["question"][0]
    if len(item["question"]) > 1:
        raise ValueError(f"{len(item['question'])} turns; the categories converted here have one")
    system = [m["content"] for m in before if m["role"] == "system"]
    history = [{"role": m["role"], "content": m["content"]} for m in before if m["role"] != "system"]
    if any(m["role"] == "system" for m in before[len(system):]) or last["role"] != "user":
        raise ValueError("the question must be a user's message, after any system message and earlier turns")
    tools = [tool(f) for f in item["function"]]
    names = [t["function"]["name"] for t in tools]
    if len(set(names)) < len(names):
        raise ValueError(f"two functions have the name {next(n for n in names if names.count(n) > 1)} once dots "
                         "are underscores")
    if answer is not None:
        checks: dict[str, Any] = {"bfcl_match": [{"tool": _openai_name(name), "arguments": arguments}
                                 for call in answer for name, arguments in call.items()]}
    else:
        checks = {"some_call": True} if category == "live_relevance" else {"no_call": True}
    return {"id": item["id"], "category": category, "task": last["content"], "tools": tools, "checks": checks,
            "one_reply": True, **({"instructions": "\n\n".join(system)} if system else {}),
            **({"history": history} if history else {})}


def tool(function: dict) -> dict:
    """A BFCL function as an OpenAI tool, as BFCL's convert_to_tool makes one for OpenAI's chat completions."""
    parameters = copy.deepcopy(function["parameters"])
    parameters["type"] = "object"
    parameters["properties"] = _typed(parameters["properties"], function["name"])
    return {"type": "function", "function": {"name": _openai_name(function["name"]),
                                             "description": function["description"] + PYTHON_NOTE,
                                             "parameters": parameters}}


def _openai_name(name: str) -> str:
    return name.replace(".", "_")  # OpenAI's names have no dots; BFCL's checker compares the names so converted


def _typed(properties: dict, function: str) -> dict:
    """BFCL's _cast_to_openai_type: each parameter's type as JSON Schema's, in nested objects and items too."""
    for name, spec in properties.items():
        if not isinstance(spec, dict):
            raise ValueError(f"function {function}: parameter {name!r} is not an object")
        kind = spec.setdefault("type", "string")  # BFCL: no type is a string
        if kind == "float":
            spec["format"], spec["description"] = "float", spec.get("description", "") + FLOAT_NOTE
        spec["type"] = _json_type(kind, function, name)
        items = spec.get("items")
        if spec["type"] in ("array", "object") and isinstance(spec.get("properties"), dict):
            spec["properties"] = _typed(spec["properties"], function)
        elif spec["type"] in ("array", "object") and isinstance(items, dict):
            items["type"] = _json_type(items.get("type"), function, f"{name}'s items")
            if items["type"] == "array" and isinstance(items.get("items"), dict):
                items["items"]["type"] = _json_type(items["items"].get("type"), function, f"{name}'s items' items")
            elif items["type"] == "object" and isinstance(items.get("properties"), dict):
                items["properties"] = _typed(items["properties"], function)
    return properties


def _json_type(kind, function: str, name: str) -> str:
    if not isinstance(kind, str) or kind not in TYPES:
        raise ValueError(f"function {function}: parameter {name} has the type {json.dumps(kind)[:40]}, which is "
                         f"none of BFCL's Python types ({', '.join(TYPES)})")
    return TYPES[kind]
