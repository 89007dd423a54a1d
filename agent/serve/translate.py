"""OpenAI tool calling ⇄ the prompt protocol, for `agent serve`: a chat completions request with ``tools`` becomes
the protocol's conversation (the tools in the system prompt, earlier calls and results as the protocol's text)
and a PromptProtocol whose schema follows ``tool_choice``; a parsed reply becomes a chat completion (or its
stream of chunks). Plain data in, plain data out: no HTTP here."""
from __future__ import annotations

import copy
import json
import marshal
import re
import threading
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from agent.models import Reply
from agent.parsing import ParseError, load_json
from agent.protocols import Final, PromptProtocol, Step, ToolCall, with_instructions
from agent.tools.registry import Registry, Tool, ToolError

MAX_TOOLS = 128  # as OpenAI's API allows
MAX_SCHEMA_CHARS = 1_000_000  # a request's tools' parameters as JSON, once their $refs are inlined
MAX_SCHEMA_DEPTH = 64  # objects and arrays nested in one tool's parameters (jsonschema and the grammar recurse)
MAX_PROMPT_CHARS = 2_000_000  # the system prompt the tools are documented in
MAX_REPEAT = 100_000  # with constrained replies, the largest minItems/maxLength/{m,n} (the grammar spells them out)
CACHED, CACHED_CHARS = 64, 8_000_000  # the protocols kept for the tools clients send again, and their total size
# request options sent on to the upstream with a tools request (the others concern the client's side, or tools)
SAMPLING = ("temperature", "top_p", "max_tokens", "seed", "presence_penalty", "frequency_penalty")
ROLES = ("system", "developer", "user", "assistant", "tool")


class RequestError(Exception):
    """A request this server cannot take; ``message`` says what to fix, ``param`` where (as OpenAI's errors do)."""

    def __init__(self, message: str, param: str | None = None, status: int = 400):
        super().__init__(message)
        self.message, self.param, self.status = message, param, status


@dataclass
class Translated:
    """A tools request, ready for the upstream: the conversation, the protocol that reads its replies, and
    how the client wants the answer."""

    messages: list[dict]
    protocol: PromptProtocol
    stream: bool
    include_usage: bool  # stream_options.include_usage: a last chunk carries the usage


def error_body(message: str, kind: str = "invalid_request_error", param: str | None = None,
               code: str | int | None = None) -> dict:
    """An error in OpenAI's shape, which clients (the openai SDK) read."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def translate(body: object, constrain: bool = False) -> Translated:
    """A chat completions request with tools (a decoded JSON body), as the protocol's conversation; raises
    RequestError for a request that does not fit OpenAI's format or this server."""
    if not isinstance(body, dict):
        raise RequestError("the body must be a JSON object (a chat completions request)")
    parallel = body.get("parallel_tool_calls", True)
    if not isinstance(parallel, bool):
        raise RequestError("parallel_tool_calls must be true or false", "parallel_tool_calls")
    fields = (body.get("tools"), body.get("tool_choice", "auto"), parallel, constrain, body.get("response_format"))
    # the key: marshal's version 2 (no back-references) gives the same JSON the same bytes, in a third of the time
    # json.dumps takes (its output says where it ends: two of them joined are read as two)
    try:
        answer = marshal.dumps(fields[4], 2)
    except ValueError:
        raise RequestError("response_format is nested too deeply", "response_format") from None
    try:
        key = marshal.dumps(fields[:4], 2) + answer
    except ValueError:
        raise RequestError("tools must be a non-empty array of function tools", "tools") from None
    protocol, system = _protocol(key, *fields)
    if body.get("n", 1) not in (1, None):
        raise RequestError("n must be 1 in a request with tools", "n")
    protocol = copy.copy(protocol)  # the cached one stays as it is
    protocol.options = {**protocol.options, **sampling(body)}
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise RequestError("stream must be true or false", "stream")
    stream_options = body.get("stream_options") or {}
    include_usage = isinstance(stream_options, dict) and stream_options.get("include_usage") is True
    return Translated(conversation(body.get("messages"), protocol, system), protocol, stream, include_usage)


def _protocol(key: bytes, tools: object, choice: object, parallel: bool, constrain: bool,
              response_format: object) -> tuple[PromptProtocol, str]:
    """The protocol for a request's tools, tool_choice, parallel_tool_calls, constraint and response_format (the
    five of them serialized as ``key``), and its system prompt; kept, as clients send the same tools turn after
    turn and checking their schemas takes most of a request's time here."""
    with _kept_lock:
        if key in _kept:
            _kept.move_to_end(key)
            return _kept[key][:2]
    registry, size = _registry(tools, constrain)
    output = answer_schema(response_format, constrain)
    protocol = PromptProtocol(registry, constrain=constrain, choice=_choice(choice, registry), parallel=parallel,
                              output_schema=output)
    system = protocol.system_prompt()
    if len(system) > MAX_PROMPT_CHARS:
        raise RequestError(f"the tools' documentation would make a system prompt of {len(system):,} characters "
                           f"(the limit is {MAX_PROMPT_CHARS:,}); send fewer tools, or shorter descriptions", "tools")
    _keep(key, (protocol, system, len(key) + size + len(system)))
    return protocol, system


_kept: OrderedDict[bytes, tuple[PromptProtocol, str, int]] = OrderedDict()  # the latest protocols, by key
_kept_lock = threading.Lock()


def _keep(key: bytes, entry: tuple[PromptProtocol, str, int]) -> None:
    """Keep a protocol, and no more than CACHED of them, nor more than CACHED_CHARS of their size together."""
    with _kept_lock:
        _kept[key] = entry
        while len(_kept) > CACHED or sum(size for _, _, size in _kept.values()) > CACHED_CHARS:
            _kept.popitem(last=False)


WHOLE = ("max_tokens", "max_completion_tokens", "seed")  # the sampling options that are whole numbers


def sampling(body: dict) -> dict:
    """The request's sampling options the upstream gets too (max_completion_tokens as max_tokens), each a number
    (max_tokens at least 1)."""
    for key in (*SAMPLING, "max_completion_tokens"):
        value = body.get(key)
        whole = key in WHOLE
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int if whole else (int, float)) or \
                (key.startswith("max_") and value < 1):
            kind = "a whole number" + (" of at least 1" if key.startswith("max_") else "") if whole else "a number"
            raise RequestError(f"{key} must be {kind}", key)
    options = {key: body[key] for key in SAMPLING if body.get(key) is not None}
    if body.get("max_completion_tokens") is not None:
        options["max_tokens"] = body["max_completion_tokens"]
    return options


def plain(body: dict) -> tuple[list[dict], dict]:
    """A request without tools, checked for a backend with no pass-through of its own (the embedded model): its
    messages, and the options it takes (sampling, response_format, stop)."""
    messages = _check_roles(body.get("messages"))
    for index, message in enumerate(messages):
        if message["role"] == "user":
            _user_content(message, index)
        else:
            _text(message, index)
    options = sampling(body)
    stop, response_format = body.get("stop"), body.get("response_format")
    if stop is not None:
        if not (isinstance(stop, str) or isinstance(stop, list) and len(stop) <= 4
                and all(isinstance(item, str) for item in stop)):
            raise RequestError("stop must be a string or an array of up to 4 strings", "stop")
        options["stop"] = stop
    if response_format is not None:
        kind = response_format.get("type") if isinstance(response_format, dict) else None
        spec = response_format.get("json_schema") if kind == "json_schema" else {"schema": {}}
        if kind not in ("text", "json_object", "json_schema") or not isinstance(spec, dict) or \
                not isinstance(spec.get("schema", {}), dict):
            raise RequestError('response_format must be {"type": "text"}, {"type": "json_object"} or {"type": '
                               '"json_schema", "json_schema": {"name", "schema": {...}}}', "response_format")
        options["response_format"] = response_format
    return messages, options


FORMATS = ('response_format must be {"type": "text"}, {"type": "json_object"} or {"type": "json_schema", '
           '"json_schema": {"name", "schema": {...}}}')


def answer_schema(response_format: object, constrain: bool = False) -> dict | None:
    """The JSON Schema a chat request's response_format holds the final answer to, for a request with tools:
    None for text, any JSON object for json_object, json_schema's schema checked and bounded (output_schema)."""
    if response_format is None:
        return None
    given: dict = response_format if isinstance(response_format, dict) else {}
    kind = given.get("type")
    spec = given.get("json_schema") if kind == "json_schema" else None
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "object"}
    if not isinstance(spec, dict) or not isinstance(spec.get("schema", {}), dict):
        raise RequestError(FORMATS, "response_format")
    return output_schema(spec.get("schema", {}), "response_format.json_schema.schema", constrain)


def output_schema(schema: dict, where: str, constrain: bool = False) -> dict:
    """A JSON Schema for the final answer, as the protocol takes it: its local $refs inlined, within the bounds of
    a tool's parameters (size, nesting and, with ``constrain``, repetition counts), and valid as a schema (draft
    2020-12). A RequestError names ``where``."""
    inlined = inline_refs(schema, where, MAX_SCHEMA_CHARS, MAX_REPEAT if constrain else None).schema
    try:
        Draft202012Validator.check_schema(inlined)
    except SchemaError as error:
        at = "".join(f"[{part!r}]" if isinstance(part, str) else f"[{part}]" for part in error.path)
        raise RequestError(f"{where} is not a valid JSON Schema: {at + ': ' if at else ''}"
                           f"{error.message[:200]}", where) from None
    return inlined


def tool_registry(tools: object, constrain: bool = False) -> Registry:
    """The client's function tools as a registry (whose tools are never run here: the client runs them), their
    parameters at most MAX_SCHEMA_CHARS together once inlined. ``constrain``: replies will be held to the schema
    by a grammar, which spells out repetition counts: they are held to MAX_REPEAT."""
    return _registry(tools, constrain)[0]


def _registry(tools: object, constrain: bool) -> tuple[Registry, int]:
    """tool_registry, and the size of the tools' inlined parameters."""
    if not isinstance(tools, list) or not tools:
        raise RequestError("tools must be a non-empty array of function tools", "tools")
    if len(tools) > MAX_TOOLS:
        raise RequestError(f"at most {MAX_TOOLS} tools per request, got {len(tools)}", "tools")
    registry, size = Registry(), 0
    for index, spec in enumerate(tools):
        where = f"tools[{index}]"
        function = spec.get("function") if isinstance(spec, dict) else None
        if not isinstance(spec, dict) or spec.get("type", "function") != "function" or not isinstance(function, dict):
            raise RequestError(f'{where} must be {{"type": "function", "function": {{"name", "parameters"}}}}', where)
        name, description = function.get("name"), function.get("description") or ""
        parameters = function.get("parameters", {"type": "object", "properties": {}})
        if not isinstance(name, str):
            raise RequestError(f"{where}.function.name must be a string", f"{where}.function.name")
        if not isinstance(description, str):
            raise RequestError(f"{where}.function.description must be a string", f"{where}.function.description")
        if not isinstance(parameters, dict):
            raise RequestError(f"{where}.function.parameters must be a JSON Schema object", f"{where}.function")
        inlined = inline_refs(parameters, f"{where}.function.parameters", MAX_SCHEMA_CHARS - size,
                              MAX_REPEAT if constrain else None)
        size += inlined.size
        try:
            registry.add(Tool(name, description, inlined.schema, _elsewhere))
        except ValueError as error:
            raise RequestError(f"{where}: {error}", where) from None
    return registry, size


def _elsewhere(**arguments) -> None:
    raise ToolError("this tool runs in the client, not in agent serve")


@dataclass
class Inlined:
    schema: dict
    size: int  # characters of the schema as JSON


KEPT = ("const", "enum", "default", "examples")  # keywords whose values are data, not schemas: taken as they are
REPEATS = ("minItems", "maxItems", "minLength", "maxLength", "minProperties", "maxProperties")
_QUANTIFIER = re.compile(r"\{(\d+)(?:,(\d*))?\}")


def inline_refs(schema: dict, where: str, room: int = MAX_SCHEMA_CHARS, most: int | None = None) -> Inlined:
    """``schema`` with its local references (``#/$defs/X``, ``#/definitions/X``, as pydantic writes them) replaced
    by what they point to: each branch of the action schema must stand alone, and grammar converters want no
    references. A recursive or remote reference, a schema larger than ``room`` characters once inlined (each
    reference counts the whole of what it points to) or nested deeper than MAX_SCHEMA_DEPTH, and with ``most``,
    a repetition count above it, is a RequestError naming ``where``."""
    definitions = {**_object(schema.get("definitions")), **_object(schema.get("$defs"))}
    size, measured = 0, {}  # characters so far; the size and depth of each value taken as it is, by id

    def grow(amount: int) -> None:
        nonlocal size
        size += amount
        if size > room:
            raise RequestError(f"{where} is too large once its $refs are inlined: over {room:,} characters (with "
                               f"the request's other tools, the limit is {MAX_SCHEMA_CHARS:,}); refer to less, or "
                               "send fewer tools", where)

    def deep(depth: int) -> None:
        if depth > MAX_SCHEMA_DEPTH:
            raise RequestError(f"{where} is nested more than {MAX_SCHEMA_DEPTH} levels deep", where)

    def resolve(node, seen: tuple, depth: int):
        if isinstance(node, list):
            deep(depth)
            grow(2 + len(node))
            return [resolve(item, seen, depth + 1) for item in node]
        if not isinstance(node, dict):
            grow(len(json.dumps(node)) if isinstance(node, str) else 6)
            return node
        deep(depth)
        node = {k: v for k, v in node.items() if k not in ("$defs", "definitions")}
        ref = node.pop("$ref", None)
        if ref is not None:
            name = ref.rsplit("/", 1)[-1] if isinstance(ref, str) else None
            local = isinstance(ref, str) and ref.startswith(("#/$defs/", "#/definitions/"))
            if not local or name not in definitions:
                raise RequestError(f"{where}: the $ref {str(ref)[:80]!r} does not point into the schema's own $defs "
                                   "(only local references are supported)", where)
            if name in seen:
                raise RequestError(f"{where}: the $ref to {name!r} is recursive, which is not supported", where)
            if not isinstance(definitions[name], dict):
                raise RequestError(f"{where}: $defs.{str(name)[:80]} is not a schema object", where)
            return resolve({**definitions[name], **node}, (*seen, name), depth)
        grow(2 + sum(len(key) + 4 for key in node))
        if most is not None:
            _check_repeats(node, most, where)
        return {key: resolve(value, seen, depth + 1) if key not in KEPT else taken(value, depth + 1)
                for key, value in node.items()}

    def taken(value, depth: int):
        if id(value) not in measured:
            measured[id(value)] = _measure(value)
        chars, levels = measured[id(value)]
        deep(depth + levels - 1)
        grow(chars)
        return value

    return Inlined(resolve(schema, (), 1), size)


def _object(value) -> dict:
    return value if isinstance(value, dict) else {}


def _measure(value) -> tuple[int, int]:
    """A JSON value's size as text (roughly: each string exactly) and how deeply its arrays and objects nest,
    without recursing."""
    chars, levels, stack = 0, 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            levels = max(levels, depth)
            children = list(item.values()) if isinstance(item, dict) else item
            chars += 2 + sum(len(key) + 4 for key in item) if isinstance(item, dict) else 2 + len(item)
            stack += [(child, depth + 1) for child in children]
        else:
            chars += len(json.dumps(item)) if isinstance(item, str) else 6
    return chars, levels


def _check_repeats(node: dict, most: int, where: str) -> None:
    """Refuse the repetition counts a grammar would have to spell out one by one past ``most``."""
    for key in REPEATS:
        value = node.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > most:
            raise RequestError(f"{where}: {key} {value} is over {most:,}, which the grammar that constrains replies "
                               "cannot spell out; send a smaller bound (or serve without --constrain)", where)
    pattern = node.get("pattern")
    counts = [int(n) for match in _QUANTIFIER.findall(pattern) for n in match if n] if isinstance(pattern, str) else []
    if counts and max(counts) > most:
        raise RequestError(f"{where}: the pattern repeats {max(counts):,} times, over {most:,}, which the grammar "
                           "that constrains replies cannot spell out; send a smaller bound (or serve without "
                           "--constrain)", where)


def _choice(value: object, registry: Registry) -> str:
    """tool_choice as PromptProtocol's choice: "auto", "none", "required" or a tool's name."""
    if value in ("auto", "none", "required"):
        return value
    function = value.get("function") if isinstance(value, dict) and value.get("type") == "function" else None
    name = function.get("name") if isinstance(function, dict) else None
    if not isinstance(name, str):
        raise RequestError('tool_choice must be "none", "auto", "required" or '
                           '{"type": "function", "function": {"name": NAME}}', "tool_choice")
    if name not in registry:
        raise RequestError(f"tool_choice names the function {name[:80]!r}, which is not among the tools "
                           f"({', '.join(registry.names)})", "tool_choice")
    return name


def conversation(given: object, protocol: PromptProtocol, system: str | None = None) -> list[dict]:
    """The client's messages in the protocol's text form, after a system prompt holding the protocol and the
    tools, then the client's own system messages: each assistant message's tool calls as the protocol's JSON
    action, the tool messages that answer them as the protocol's result message; an answer as a final action."""
    messages = _check_roles(given)
    system = system or protocol.system_prompt()
    own = [_text(m, i) for i, m in enumerate(messages) if m["role"] in ("system", "developer")]
    system = with_instructions(system, "\n\n".join(t.strip() for t in own if t.strip()))
    history: list[dict] = [{"role": "system", "content": system}]
    index = 0
    while index < len(messages):
        message, index = messages[index], index + 1
        role = message["role"]
        if role == "user":
            history.append({"role": "user", "content": _user_content(message, index - 1)})
        elif role == "tool":
            raise RequestError(f"messages[{index - 1}] is a tool message that answers no tool call of the assistant "
                               "message before it", f"messages[{index - 1}]")
        elif role == "assistant" and message.get("tool_calls"):
            calls = _calls(message, index - 1)
            outputs, index = _results(messages, index, calls)
            history += [{"role": "assistant", "content": protocol.written(calls)}, *protocol.results(calls, outputs)]
        elif role == "assistant":
            answer = _text(message, index - 1)
            history.append({"role": "assistant", "content": json.dumps({"type": "final", "answer": _answer(
                answer, protocol)}, ensure_ascii=False)})
    return history


def _answer(text: str, protocol: PromptProtocol) -> object:
    """An earlier answer as the final action's value: with an answer schema, the JSON it is (else its text)."""
    if protocol.output_schema is None:
        return text
    try:
        return load_json(text)
    except ParseError:
        return text


def _check_roles(messages: object) -> list[dict]:
    """``messages``, once they are known to be a non-empty list of objects with a role."""
    if not isinstance(messages, list) or not messages:
        raise RequestError("messages must be a non-empty array", "messages")
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            raise RequestError(f"messages[{index}] must be an object with a role ({', '.join(ROLES)})",
                               f"messages[{index}]")
    return messages


def _calls(message: dict, index: int) -> list[ToolCall]:
    calls = message["tool_calls"]
    where = f"messages[{index}].tool_calls"
    if not isinstance(calls, list):
        raise RequestError(f"{where} must be an array", where)
    found = []
    for number, call in enumerate(calls):
        function = call.get("function") if isinstance(call, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        raw = function.get("arguments", "{}") if isinstance(function, dict) else None
        if not isinstance(name, str) or not isinstance(call.get("id"), str) or not isinstance(raw, str):
            raise RequestError(f'{where}[{number}] must be {{"id", "type": "function", "function": {{"name", '
                               '"arguments": "<JSON text>"}}', f"{where}[{number}]")
        try:
            arguments: Any = load_json(raw) if raw.strip() else {}
        except ParseError as error:
            raise RequestError(f"{where}[{number}].function.arguments is not JSON text: {error.message}",
                               f"{where}[{number}]") from None
        found.append(ToolCall(name, arguments, id=call["id"]))
    return found


def _results(messages: list, index: int, calls: list[ToolCall]) -> tuple[list[str], int]:
    """The outputs of ``calls``, in their order, from the tool messages from ``index`` on; and the index after them."""
    outputs: dict[str, str] = {}
    ids = [str(c.id) for c in calls]  # _calls gives each call its id
    while index < len(messages) and messages[index]["role"] == "tool":
        call_id = messages[index].get("tool_call_id")
        if not isinstance(call_id, str):
            raise RequestError(f"messages[{index}].tool_call_id must be a string: the id of the tool call it answers",
                               f"messages[{index}].tool_call_id")
        if call_id not in ids or call_id in outputs:
            raise RequestError(f"messages[{index}] is a tool message for tool_call_id {str(call_id)[:80]!r}, which "
                               "answers no (other) tool call of the assistant message before it",
                               f"messages[{index}]")
        outputs[call_id] = _text(messages[index], index)
        index += 1
    missing = [i for i in ids if i not in outputs]
    if missing:
        raise RequestError(f"the tool call {missing[0][:80]!r} has no tool message answering it; send each call's "
                           f"result as a tool message right after the assistant message (before messages[{index}])",
                           "messages")
    return [outputs[i] for i in ids], index


def _text(message: dict, index: int) -> str:
    """A message's content as text: a string, or the text of an array of text parts."""
    content = message.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) and isinstance(p.get("text"), str) for p in content):
        return "".join(p["text"] for p in content)
    raise RequestError(f"messages[{index}].content must be a string or an array of text parts",
                       f"messages[{index}].content")


def _user_content(message: dict, index: int) -> str | list:
    """A user message's content: text as text; an array with other parts (images) is passed on as it is."""
    content = message.get("content")
    if isinstance(content, list) and content and all(isinstance(p, dict) and isinstance(p.get("type"), str)
                                                     for p in content):
        if all(p["type"] == "text" and isinstance(p.get("text"), str) for p in content):
            return "".join(p["text"] for p in content)
        return content
    return _text(message, index)


def completion(turn: Final | Step, model: str, usage: dict) -> dict:
    """The parsed reply as a chat completion: tool calls (with fresh ids, arguments as JSON text) and finish
    reason "tool_calls", or the final answer as content and "stop"."""
    if isinstance(turn, Final):
        message: dict = {"role": "assistant", "content": turn.answer}
        finish = "stop"
    else:
        message = {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{uuid.uuid4().hex[:24]}", "type": "function",
             "function": {"name": c.tool, "arguments": json.dumps(c.arguments, ensure_ascii=False)}}
            for c in turn.calls]}
        finish = "tool_calls"
    return _completion(message, finish, model, usage)


def passed_on(reply: Reply, model: str) -> dict:
    """A backend's reply to a request without tools (answered by a model with no pass-through), as a completion."""
    message: dict = {"role": "assistant", "content": reply.content}
    if reply.tool_calls:
        message["tool_calls"] = reply.tool_calls
    return _completion(message, reply.finish_reason or "stop", model, reply.usage)


def _completion(message: dict, finish: str, model: str, usage: dict | None) -> dict:
    """The completion; its usage null when an upstream call reported none (llama-cpp-python's server sends no
    usage in a stream): a count of 0 would be a wrong number, not an unknown one."""
    counted = None
    if usage is not None and not usage.get("usage_missing"):
        prompt, produced = usage.get("prompt_tokens") or 0, usage.get("completion_tokens") or 0
        counted = {"prompt_tokens": prompt, "completion_tokens": produced, "total_tokens": prompt + produced}
    return {"id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion", "created": int(time.time()),
            "model": model, "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
            "usage": counted}


def chunks(done: dict, include_usage: bool) -> list[dict]:
    """A completion as the chunks of a stream, as OpenAI sends them: the role, the content, each tool call's id and
    name then its arguments (deltas with the call's index), the finish reason, and the usage when asked for."""
    choice = done["choices"][0]
    message = choice["message"]
    head = {"id": done["id"], "object": "chat.completion.chunk", "created": done["created"], "model": done["model"]}

    def chunk(delta: dict, finish: str | None = None) -> dict:
        return {**head, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}

    out = [chunk({"role": "assistant", "content": ""})]
    if message.get("content"):
        out.append(chunk({"content": message["content"]}))
    for number, call in enumerate(message.get("tool_calls") or []):
        out.append(chunk({"tool_calls": [{"index": number, "id": call["id"], "type": "function",
                                          "function": {"name": call["function"]["name"], "arguments": ""}}]}))
        out.append(chunk({"tool_calls": [{"index": number, "function": {"arguments": call["function"]["arguments"]}}]}))
    out.append(chunk({}, choice["finish_reason"]))
    if include_usage:
        out.append({**head, "choices": [], "usage": done["usage"]})
    return out
