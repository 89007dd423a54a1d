"""Tools as plain data, and a registry that checks arguments and turns every failure into a result."""

from __future__ import annotations

import copy
import inspect
import json
import re
import typing
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, best_match

from .docs import MAX_MESSAGE, describe, fault_note, signature
from .text import shorten

_JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean", list: "array", dict: "object"}
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict
    function: Callable[..., Any]
    hint: str = ""  # a one-line rule for the prompt, shown only when the tool is offered
    example: dict | None = None  # {"task", "arguments", "result", "answer"}: a worked example for the prompt
    asks: str = ""  # when it asks the user before acting ("before replacing a file"); empty: never
    writes: bool = False  # it can change something outside the run (a file, the system): --read-only leaves it out
    keep_latest: bool = False  # its latest result stays whole when the history is compacted (the plan)


class ToolError(Exception):
    """An expected failure; its message becomes the result 'error: <message>' and should say what to do next."""


@dataclass(frozen=True)
class ToolResult:
    ok: bool
    text: str
    usage: dict | None = None  # what a tool that calls a model itself spent: model_calls, prompt/completion_tokens


def tool(function=None, *, name=None, description=None, parameters=None, hint="", example=None, asks="",
         writes=False, keep_latest=False):
    """Turn a function into a Tool; usable bare (@tool) or with arguments (@tool(name=...))."""

    def make(function: Callable[..., Any]) -> Tool:
        tool_name = name or function.__name__
        text = description or inspect.cleandoc(function.__doc__ or "")
        if not text:
            raise ValueError(f"tool {tool_name!r} needs a description: add a docstring or pass description=")
        schema = parameters if parameters is not None else _schema_from_signature(tool_name, function)
        return Tool(tool_name, text, schema, function, hint, example, asks, writes, keep_latest)

    return make if function is None else make(function)


def _schema_from_signature(tool_name: str, function: Callable[..., Any]) -> dict:
    """A JSON Schema for the keyword arguments of `function`, from its type annotations."""
    try:
        hints = typing.get_type_hints(function)
    except Exception as error:
        raise TypeError(f"cannot read the annotations of tool {tool_name!r} ({error}); pass parameters=") from error
    properties: dict[str, dict] = {}
    required: list[str] = []
    for param in inspect.signature(function).parameters.values():
        if param.kind not in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY):
            raise TypeError(f"tool {tool_name!r}: parameter {param.name!r} cannot be passed by keyword; "
                            "pass parameters=")
        properties[param.name] = _property(tool_name, param.name, hints.get(param.name, param.empty))
        if param.default is param.empty:
            required.append(param.name)
        elif isinstance(param.default, (str, int, float, bool, type(None))):
            properties[param.name]["default"] = param.default
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


def _property(tool_name: str, param: str, annotation: Any) -> dict:
    origin, args = typing.get_origin(annotation) or annotation, typing.get_args(annotation)
    if origin not in _JSON_TYPES:
        supported = ", ".join(t.__name__ for t in _JSON_TYPES)
        raise TypeError(
            f"tool {tool_name!r}: cannot derive a JSON Schema for parameter {param!r} "
            f"annotated {annotation!r} (supported: {supported}); pass parameters= explicitly"
        )
    schema: dict = {"type": _JSON_TYPES[origin]}
    if origin is list and len(args) == 1 and args[0] in _JSON_TYPES:
        schema["items"] = {"type": _JSON_TYPES[args[0]]}
    return schema


class Registry:
    """Tools by name, in registration order."""

    def __init__(self, tools: Iterable[Tool] = ()):
        self._tools: dict[str, Tool] = {}
        self._validators: dict[str, Draft202012Validator] = {}
        for item in tools:
            self.add(item)

    def add(self, tool: Tool) -> Tool:
        if not isinstance(tool, Tool):
            raise TypeError(f"expected a Tool, got {type(tool).__name__}; decorate the function with @tool first")
        if not _NAME.fullmatch(tool.name):
            raise ValueError(f"invalid tool name {tool.name!r}: use 1-64 letters, digits, '_' or '-'")
        if tool.name in self._tools:
            raise ValueError(f"a tool named {tool.name!r} is already registered")
        if not isinstance(tool.parameters, dict) or tool.parameters.get("type") != "object":
            raise ValueError(f"tool {tool.name!r}: parameters must be a JSON Schema with \"type\": \"object\"")
        try:
            Draft202012Validator.check_schema(tool.parameters)
        except SchemaError as error:
            raise ValueError(f"tool {tool.name!r} has an invalid parameters schema: {error.message}") from error
        self._tools[tool.name] = tool
        self._validators[tool.name] = Draft202012Validator(tool.parameters)
        return tool

    def tool(self, function=None, **kwargs):
        """Like the module-level `tool` decorator, and also registers the Tool."""
        if function is None:
            return lambda function: self.add(tool(function, **kwargs))
        return self.add(tool(function, **kwargs))

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    def __iter__(self) -> Iterator[Tool]:
        return iter(list(self._tools.values()))

    def __len__(self) -> int:
        return len(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def parameters(self) -> dict[str, dict]:
        """Each tool's parameter schema by name (copies)."""
        return {name: copy.deepcopy(t.parameters) for name, t in self._tools.items()}

    def check_arguments(self, name: str, arguments: Any) -> str | None:
        """None if `arguments` fit the tool, else what is wrong (an unknown tool, or the JSON path of the fault)."""
        if not isinstance(name, str) or name not in self._tools:
            return unknown_tool(name, self._tools)
        error = best_match(self._validators[name].iter_errors(arguments))
        if error is None:
            return None
        return bad_arguments(name, f"{error.json_path}: {shorten(error.message, MAX_MESSAGE)}{fault_note(error)}")

    def call(self, name: str, arguments: dict) -> ToolResult:
        """Check the arguments, then run the tool; every failure becomes an 'error: ...' result, nothing is raised."""
        problem = self.check_arguments(name, arguments)
        if problem is None:
            return self.run(name, arguments)
        tool = self._tools.get(name) if isinstance(name, str) else None
        expected = f" (expected: {signature(name, tool.parameters)})" if tool else ""
        return ToolResult(False, f"error: {problem}{expected}")

    def run(self, name: str, arguments: dict) -> ToolResult:
        """Run a tool with arguments already checked against its parameters (check_arguments, or a
        validated action); like `call`, but without checking them again."""
        tool = self._tools.get(name) if isinstance(name, str) else None
        if tool is None:
            return ToolResult(False, f"error: {unknown_tool(name, self._tools)}")
        try:
            value = tool.function(**arguments)
            return value if isinstance(value, ToolResult) else ToolResult(True, _as_text(value))
        except ToolError as error:
            return ToolResult(False, f"error: {str(error) or f'{name} failed'}")
        except Exception as error:
            problem = shorten(str(error), MAX_MESSAGE)
            return ToolResult(False, f"error: {name} failed: {type(error).__name__}: {problem}")

    def describe(self) -> str:
        """The tool list for a prompt: per tool a signature line and a line per parameter, with its documentation."""
        return "\n".join(describe(t.name, t.description, t.parameters) for t in self._tools.values())

    def openai_tools(self) -> list[dict]:
        """Tool specs for a native tool-calling API."""
        return [
            {
                "type": "function",
                "function": {"name": t.name, "description": t.description, "parameters": copy.deepcopy(t.parameters)},
            }
            for t in self._tools.values()
        ]


def unknown_tool(name: object, available: Iterable[str]) -> str:
    """What is wrong with a call to a tool that is not offered: the one message for it, in every protocol."""
    return f"unknown tool {shorten(repr(name), MAX_MESSAGE)}; available tools: {', '.join(available) or 'none'}"


def bad_arguments(name: str, problem: str) -> str:
    """What is wrong with arguments that do not fit the tool's parameters; ``problem`` starts with the JSON path."""
    return f"arguments for {name}: {problem}"


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return "(no output)"
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False, default=str)
    return str(value)
