"""What an endpoint supports, found with two cheap requests, and the arm that follows from it.

- native tool calls: a request offering one tool (``tools``) and asking for it; supported when the reply
  carries a well-formed ``tool_calls`` entry for that tool, with arguments that fit its schema.
- constrained replies: a request with ``response_format`` (a JSON Schema with a marker value no model writes
  unasked); honoured when the reply is JSON that fits the schema, marker included.

The arm: ``prompt-constrained`` when replies can be constrained (every reply is then a well-formed action),
else ``native`` when tool calls work, else ``prompt``. `agent eval` measures which is best on your tasks.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass

import jsonschema

from agent.models import Model, ModelError, RequestRejected
from agent.text import for_terminal, scrub
from agent.tools.text import shorten

MARKER = "probe-4417"
TOOL: dict = {"type": "function", "function": {
    "name": "multiply", "description": "Multiply two numbers.",
    "parameters": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                   "required": ["a", "b"], "additionalProperties": False}}}
SCHEMA = {"type": "object", "properties": {"greeting": {"type": "string", "maxLength": 200},
                                           "marker": {"type": "string", "enum": [MARKER]}},
          "required": ["greeting", "marker"], "additionalProperties": False}
NATIVE_TASK = "What is 17 times 23? Use the multiply tool."
SCHEMA_TASK = "Say hello in one short sentence."
DETAIL_CHARS = 200


@dataclass(frozen=True)
class Probe:
    native: bool
    native_detail: str  # what the endpoint did, in a few words
    constrained: bool
    constrained_detail: str

    @property
    def arm(self) -> str:
        return "prompt-constrained" if self.constrained else "native" if self.native else "prompt"

    def as_dict(self) -> dict:
        return {**asdict(self), "arm": self.arm}

    @classmethod
    def from_dict(cls, data: dict) -> Probe:
        return cls(bool(data["native"]), str(data["native_detail"]), bool(data["constrained"]),
                   str(data["constrained_detail"]))


def probe(model: Model) -> Probe:
    """Ask ``model`` (an endpoint's) what it supports. A request refused (HTTP 400, ...) is that feature
    unsupported, and so is a server error (HTTP 5xx) on a feature's request when a plain request then succeeds
    (llama-cpp-python's server answers 500 to a ``response_format`` it does not know); any other ModelError (no
    connection, a wrong key, a server that fails plain requests too) is raised: nothing was learnt."""
    native, native_detail = _feature(model, _native, "tools")
    constrained, constrained_detail = _feature(model, _constrained, "response_format")
    return Probe(native, native_detail, constrained, constrained_detail)


def _feature(model: Model, check, name: str) -> tuple[bool, str]:
    try:
        return check(model)
    except RequestRejected as error:
        return False, f"refused {name} ({_short(error.reason)})"
    except ModelError as error:
        if (getattr(error, "status", None) or 0) < 500:
            raise
        model.complete([{"role": "user", "content": "Say hi."}], max_tokens=8)  # raises if the server is down
        return False, f"failed on {name} but not on a plain request ({_short(error)})"


def _native(model: Model) -> tuple[bool, str]:
    reply = model.complete([{"role": "user", "content": NATIVE_TASK}], tools=[TOOL])
    calls = reply.tool_calls or []
    if not calls:
        return False, f"accepted tools but answered in text: {_short(reply.content or '(empty)')}"
    function = calls[0].get("function") or {}
    if function.get("name") != "multiply":
        return False, f"called an unknown tool {_short(function.get('name'))}"
    try:
        arguments = json.loads(function.get("arguments") or "")
        jsonschema.validate(arguments, TOOL["function"]["parameters"])
    except (ValueError, jsonschema.ValidationError) as error:
        return False, f"returned malformed tool call arguments: {_short(error)}"
    return True, f"returned a well-formed tool call: multiply({json.dumps(arguments)})"


def _constrained(model: Model) -> tuple[bool, str]:
    response_format = {"type": "json_schema", "json_schema": {"name": "probe", "schema": SCHEMA}}
    reply = model.complete([{"role": "user", "content": SCHEMA_TASK}], response_format=response_format)
    try:
        value = json.loads(reply.content or "")
        jsonschema.validate(value, SCHEMA)
    except (ValueError, jsonschema.ValidationError):
        return False, f"accepted response_format but did not follow it: {_short(reply.content or '(empty)')}"
    if getattr(model, "schema_form", "json_schema") == "json_object":
        return True, ("followed the JSON Schema of response_format, sent as json_object with a schema "
                      "(llama-cpp-python's form)")
    return True, "followed the JSON Schema of response_format"


def _short(text) -> str:
    """One line of at most DETAIL_CHARS, control characters shown as escapes (it is the endpoint's text)."""
    return shorten(for_terminal(" ".join(scrub(str(text)).split())), DETAIL_CHARS)
