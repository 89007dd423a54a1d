"""OpenAI's Responses API ⇄ chat completions, for `agent serve`: a Responses request (``input`` items,
``instructions``, function ``tools``, ``tool_choice``, ``text.format``) becomes a chat completions request, which
serve answers as it answers any other; the completion that comes back becomes a Response, or the events of its
stream. Plain data in, plain data out: no HTTP here."""
from __future__ import annotations

import json
import re
import time
import uuid
from dataclasses import dataclass, field

from agent.serve.translate import SAMPLING, RequestError

# what a Response repeats of its request, with the defaults OpenAI's answers show
ECHOED: dict[str, object] = {
    "instructions": None, "max_output_tokens": None, "metadata": {}, "parallel_tool_calls": True,
    "previous_response_id": None, "store": True, "temperature": None, "tool_choice": "auto", "tools": [],
    "top_p": None, "truncation": "disabled", "text": {"format": {"type": "text"}}}
# fields this server does not do, with what to do instead
REFUSED = {"background": "background responses are not run here; leave background out (or false)",
           "conversation": "conversation objects are not kept here; send previous_response_id, or the whole "
                           "conversation as input",
           "prompt": "stored prompt templates are not kept here; send instructions and input instead"}
ROLES = ("user", "assistant", "system", "developer")
TEXT_PARTS = ("input_text", "output_text", "text", "refusal")
ITEMS = "message, function_call and function_call_output items"


@dataclass
class Translated:
    """A Responses request as chat completions: the request, where each of its messages came from (for errors),
    the messages to keep for a later previous_response_id (all but the instructions), and what the Response
    repeats of the request."""

    chat: dict
    origins: list[str]
    kept: list[dict]
    echo: dict
    stream: bool
    store: bool
    id: str = field(default_factory=lambda: f"resp_{uuid.uuid4().hex}")


def to_chat(body: object, earlier: list[dict] | None = None) -> Translated:
    """The Responses request ``body`` (decoded JSON) as a chat completions request, after ``earlier`` (the
    messages kept for its previous_response_id, if any); a RequestError names the Responses field at fault."""
    if not isinstance(body, dict):
        raise RequestError("the body must be a JSON object (a Responses API request)")
    for name, advice in REFUSED.items():
        if body.get(name) not in (None, False):
            raise RequestError(f"{name}: {advice}", name)
    for name in ("stream", "store", "parallel_tool_calls"):
        if body.get(name) is not None and not isinstance(body[name], bool):
            raise RequestError(f"{name} must be true or false", name)
    stream, store = body.get("stream") is True, body.get("store") is not False
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise RequestError("instructions must be a string", "instructions")
    new, origins = _messages(body.get("input"))
    kept = [*(earlier or []), *new]
    origins = ["previous_response_id"] * len(earlier or []) + origins
    messages = kept
    if instructions:
        messages, origins = [{"role": "system", "content": instructions}, *kept], ["instructions", *origins]
    chat = {"model": body.get("model"), "messages": messages, "stream": False}
    chat.update({key: body[key] for key in SAMPLING if key in body and key != "max_tokens"})
    if body.get("max_output_tokens") is not None:
        chat["max_tokens"] = body["max_output_tokens"]
    if body.get("parallel_tool_calls") is not None:
        chat["parallel_tool_calls"] = body["parallel_tool_calls"]
    tools = _tools(body.get("tools"))
    if tools:
        chat["tools"] = tools
        chat["tool_choice"] = _tool_choice(body.get("tool_choice", "auto"))
    elif body.get("tool_choice") not in (None, "auto", "none"):
        raise RequestError("tool_choice names a tool, but the request has no tools", "tool_choice")
    text = body.get("text")
    if text is not None:
        if not isinstance(text, dict):
            raise RequestError('text must be an object, like {"format": {"type": "text"}}', "text")
        if text.get("format") is not None:
            chat["response_format"] = _format(text["format"])
    metadata = body.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise RequestError("metadata must be an object of strings", "metadata")
    echo = {**ECHOED, **{key: body[key] for key in ECHOED if body.get(key) is not None}}
    return Translated(chat, origins, kept, echo, stream, store)


def _messages(value: object) -> tuple[list[dict], list[str]]:
    """``input`` (a text, or an array of items) as chat messages, and the item each came from."""
    if isinstance(value, str):
        return [{"role": "user", "content": value}], ["input"]
    if not isinstance(value, list) or not value:
        raise RequestError(f"input must be a string or a non-empty array of items ({ITEMS})", "input")
    messages: list[dict] = []
    origins: list[str] = []
    for index, item in enumerate(value):
        where = f"input[{index}]"
        if not isinstance(item, dict):
            raise RequestError(f"{where} must be an object: one of {ITEMS}", where)
        kind = item.get("type", "message" if "role" in item else None)
        if kind == "message":
            message = _message(item, where)
        elif kind == "function_call":
            call = _function_call(item, where)
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant" and origins[-1].startswith("input["):
                last.setdefault("tool_calls", []).append(call)  # calls of one reply: one assistant message
                continue
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
        elif kind == "function_call_output":
            message = {"role": "tool", "tool_call_id": _string(item, "call_id", where),
                       "content": _output(item.get("output"), f"{where}.output")}
        elif kind == "reasoning":  # another server's reasoning, which no model here can read: left out
            continue
        elif kind == "item_reference":
            raise RequestError(f"{where}: item references are not kept here; send the item itself", where)
        else:
            raise RequestError(f"{where}.type {str(kind)[:40]!r} is not supported: agent serve takes {ITEMS}",
                               f"{where}.type")
        messages.append(message)
        origins.append(where)
    return messages, origins


def _message(item: dict, where: str) -> dict:
    role = item.get("role")
    if role not in ROLES:
        raise RequestError(f"{where}.role must be one of {', '.join(ROLES)}", f"{where}.role")
    content = item.get("content")
    if isinstance(content, str):
        return {"role": role, "content": content}
    if not isinstance(content, list):
        raise RequestError(f"{where}.content must be a string or an array of content parts", f"{where}.content")
    parts = []
    for number, part in enumerate(content):
        at = f"{where}.content[{number}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in TEXT_PARTS and isinstance(part.get("text", part.get("refusal")), str):
            parts.append({"type": "text", "text": part.get("text", part.get("refusal"))})
        elif kind == "input_image" and role == "user" and isinstance(part.get("image_url"), str):
            parts.append({"type": "image_url", "image_url": {"url": part["image_url"],
                                                             "detail": part.get("detail") or "auto"}})
        else:
            raise RequestError(f"{at} must be a text part ({', '.join(TEXT_PARTS)}), or in a user message an "
                               "input_image with an image_url (files are not supported)", at)
    if all(p["type"] == "text" for p in parts):
        return {"role": role, "content": "".join(p["text"] for p in parts)}
    return {"role": role, "content": parts}


def _function_call(item: dict, where: str) -> dict:
    arguments = item.get("arguments", "{}")
    if not isinstance(arguments, str):
        raise RequestError(f"{where}.arguments must be JSON text (a string)", f"{where}.arguments")
    return {"id": _string(item, "call_id", where), "type": "function",
            "function": {"name": _string(item, "name", where), "arguments": arguments}}


def _string(item: dict, key: str, where: str) -> str:
    value = item.get(key)
    if not isinstance(value, str) or not value:
        raise RequestError(f"{where}.{key} must be a non-empty string", f"{where}.{key}")
    return value


def _output(value: object, where: str) -> str:
    """A function_call_output's output: a text, or the text of an array of text parts."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(p, dict) and p.get("type") in TEXT_PARTS
                                       and isinstance(p.get("text"), str) for p in value):
        return "".join(p["text"] for p in value)
    raise RequestError(f"{where} must be a string or an array of text parts", where)


def _tools(value: object) -> list[dict]:
    """Function tools in chat completions' form; a tool of another type (web_search, file_search, mcp...) is refused."""
    if value is None or value == []:
        return []
    if not isinstance(value, list):
        raise RequestError("tools must be an array of function tools", "tools")
    tools = []
    for index, tool in enumerate(value):
        where = f"tools[{index}]"
        kind = tool.get("type") if isinstance(tool, dict) else None
        if kind != "function":
            raise RequestError(f'{where} must be {{"type": "function", "name", "parameters"}}: agent serve offers '
                               f"function tools only (got type {str(kind)[:40]!r})", f"{where}.type")
        function = {"name": tool.get("name"), "description": tool.get("description") or ""}
        if tool.get("parameters") is not None:
            function["parameters"] = tool["parameters"]
        tools.append({"type": "function", "function": function})
    return tools


def _tool_choice(value: object) -> object:
    if value in ("auto", "none", "required"):
        return value
    if isinstance(value, dict) and value.get("type") == "function" and isinstance(value.get("name"), str):
        return {"type": "function", "function": {"name": value["name"]}}
    raise RequestError('tool_choice must be "none", "auto", "required" or {"type": "function", "name": NAME}',
                       "tool_choice")


def _format(value: object) -> dict:
    """text.format as chat completions' response_format."""
    given: dict = value if isinstance(value, dict) else {}
    kind = given.get("type")
    if kind in ("text", "json_object"):
        return {"type": kind}
    if kind == "json_schema" and isinstance(given.get("schema", {}), dict):
        return {"type": "json_schema", "json_schema": {"name": given.get("name") or "answer",
                                                       "schema": given.get("schema", {}),
                                                       "strict": given.get("strict") is True}}
    raise RequestError('text.format must be {"type": "text"}, {"type": "json_object"} or {"type": "json_schema", '
                       '"name", "schema": {...}}', "text.format")


# chat completions' names of a request's fields and things, and the Responses API's
_RENAMED = [(re.compile(pattern), name) for pattern, name in [
    (r"response_format\.json_schema\.schema", "text.format.schema"), (r"response_format", "text.format"),
    (r"max_tokens", "max_output_tokens"), (r"(tools\[\d+\])\.function\b", r"\1"),
    (r"\btool message\b", "function_call_output"), (r"\btool_call_id\b", "call_id"),
    (r"\bthe assistant message\b", "the function_call items")]]
_MESSAGE = re.compile(r"messages\[(\d+)\]")


def renamed(error: RequestError, origins: list[str]) -> RequestError:
    """An error about the chat completions request, naming the Responses request's fields instead."""

    def rename(text: str) -> str:
        text = _MESSAGE.sub(lambda m: origins[int(m[1])] if int(m[1]) < len(origins) else m[0], text)
        for pattern, name in _RENAMED:
            text = pattern.sub(name, text)
        return "input" if text == "messages" else text

    param = rename(error.param) if error.param is not None else None
    return RequestError(rename(error.message), param, error.status)


def response(done: dict, request: Translated) -> dict:
    """A chat completion (serve's answer to the translated request) as a Response: the answer as a message item
    with one output_text, each tool call as a function_call item (its id the call_id)."""
    choice = done["choices"][0]
    message, output = choice["message"], []
    if message.get("content"):
        output.append({"id": f"msg_{uuid.uuid4().hex}", "type": "message", "status": "completed", "role": "assistant",
                       "content": [{"type": "output_text", "text": message["content"], "annotations": [],
                                    "logprobs": []}]})
    for call in message.get("tool_calls") or []:
        output.append({"id": f"fc_{uuid.uuid4().hex}", "type": "function_call", "status": "completed",
                       "call_id": call["id"], "name": call["function"]["name"],
                       "arguments": call["function"]["arguments"]})
    usage, counted = done.get("usage"), None  # null when the upstream counted nothing, as the completion's is
    if isinstance(usage, dict):
        prompt, produced = usage.get("prompt_tokens") or 0, usage.get("completion_tokens") or 0
        counted = {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": produced,
                   "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": prompt + produced}
    cut = choice.get("finish_reason") == "length"
    return {"id": request.id, "object": "response", "created_at": done.get("created", int(time.time())),
            "status": "incomplete" if cut else "completed", "completed_at": int(time.time()),
            "model": done["model"], "output": output, "error": None,
            "incomplete_details": {"reason": "max_output_tokens"} if cut else None, **request.echo,
            "reasoning": {"effort": None, "summary": None},
            "usage": counted}


def kept_messages(request: Translated, done: dict) -> list[dict]:
    """What a later request naming this response as its previous_response_id continues: its messages (not
    its instructions) and the answer."""
    message = done["choices"][0]["message"]
    answer = {"role": "assistant", "content": message.get("content")}
    if message.get("tool_calls"):
        answer["tool_calls"] = message["tool_calls"]
    return [*request.kept, answer]


def events(done: dict) -> list[dict]:
    """A Response as the events of its stream, as OpenAI sends them: created and in progress, then each output
    item added, its text or arguments as a delta and done, the item done; then completed (or incomplete)."""
    started = {**done, "status": "in_progress", "output": [], "usage": None, "incomplete_details": None,
               "completed_at": None}
    out: list[dict] = [{"type": "response.created", "response": started},
                       {"type": "response.in_progress", "response": started}]
    for index, item in enumerate(done["output"]):
        at = {"output_index": index, "item_id": item["id"]}
        if item["type"] == "message":
            part = item["content"][0]
            out += [{"type": "response.output_item.added", "output_index": index,
                     "item": {**item, "status": "in_progress", "content": []}},
                    {"type": "response.content_part.added", **at, "content_index": 0,
                     "part": {**part, "text": ""}},
                    {"type": "response.output_text.delta", **at, "content_index": 0, "delta": part["text"],
                     "logprobs": []},
                    {"type": "response.output_text.done", **at, "content_index": 0, "text": part["text"],
                     "logprobs": []},
                    {"type": "response.content_part.done", **at, "content_index": 0, "part": part}]
        else:
            out += [{"type": "response.output_item.added", "output_index": index,
                     "item": {**item, "status": "in_progress", "arguments": ""}},
                    {"type": "response.function_call_arguments.delta", **at, "delta": item["arguments"]},
                    {"type": "response.function_call_arguments.done", **at, "name": item["name"],
                     "arguments": item["arguments"]}]
        out.append({"type": "response.output_item.done", "output_index": index, "item": item})
    out.append({"type": "response.incomplete" if done["status"] == "incomplete" else "response.completed",
                "response": done})
    return [{**event, "sequence_number": number} for number, event in enumerate(out)]


def sse(event: dict) -> str:
    return f"event: {event['type']}\ndata: {json.dumps(event, ensure_ascii=False)}\n\n"
