"""The two ways of asking a model for actions: a JSON protocol in the prompt, or native tool calls.

Both give the loop the same six things (``ActionProtocol``): a name, the system prompt, the request options, a
reader of a streaming reply's answer, a parsed turn for each reply, and the messages that carry tool results back.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Protocol

from agent import prompts
from agent.models import Reply, tool_call
from jsonschema import Draft202012Validator

from agent.parsing import MAX_BATCH, ParseError, action_schema, load_json, parse_action, parse_answer
from agent.streaming import AnswerReader, ContentReader, FinalAnswerReader, Unshown
from agent.text import scrub
from agent.tools.registry import unknown_tool


@dataclass
class ToolCall:
    tool: str
    arguments: dict
    id: str | None = None
    error: str | None = None  # a malformed call is answered with this text instead of being run
    error_kind: str | None = None


@dataclass
class Final:
    """A reply that is the final answer; ``message`` is how it stays in the history."""

    answer: str
    message: dict
    repairs: list[str] = field(default_factory=list)  # what the parser repaired to read the reply


@dataclass
class Step:
    """A reply that asks for tool calls, run together as one step of the run."""

    calls: list[ToolCall]
    message: dict
    repairs: list[str] = field(default_factory=list)


@dataclass
class Reask:
    """A reply the loop cannot act on; ``messages`` (the reply and the re-ask) go back to the model."""

    kind: str
    problem: str
    messages: list[dict]


Turn = Final | Step | Reask


class ActionProtocol(Protocol):
    """A way of asking a model for actions, as the loop, `agent serve` and the evaluation use it."""

    name: str  # "prompt" or "native", as a run's result and trace name it
    options: dict  # sent with every request (native tools, response_format)

    def system_prompt(self) -> str: ...

    def answer_reader(self) -> AnswerReader:
        """A fresh reader of one streaming reply's answer."""
        ...

    def parse(self, reply: Reply) -> Turn: ...

    def results(self, calls: list[ToolCall], outputs: list[str]) -> list[dict]:
        """The messages that give the calls' ``outputs`` back to the model, in order."""
        ...


class PromptProtocol:
    """Actions as JSON text, described in the system prompt and checked against one JSON Schema."""

    name = "prompt"

    def __init__(self, registry, constrain: bool = False, choice: str = "auto", parallel: bool = True,
                 output_schema: dict | None = None):
        """``choice`` narrows what a reply may be, as OpenAI's tool_choice does: "auto" (a call or the final
        answer), "none" (the final answer), "required" (calls), or a tool's name (calls to it alone);
        ``parallel`` false allows one call per reply. Both change the schema, so the constraint too.
        ``output_schema`` (a JSON Schema without $refs): the final answer is a JSON value valid against it, not
        a text; the final action carries it, so the schema and the constraint hold it too."""
        self.registry, self.parallel = registry, parallel
        self.output_schema = output_schema
        tools = registry.parameters()
        if choice == "none":
            tools = {}
        elif choice not in ("auto", "required"):
            tools = {choice: tools[choice]}
        self.actions = action_schema(tools, batch=parallel, final=choice in ("auto", "none"), answer=output_schema)
        self.rules = "" if choice == "auto" else prompts.render(f"choice_{choice}" if choice in ("none", "required")
                                                               else "choice_tool", tool=choice)
        self.rules += "" if parallel or not tools else prompts.load("one_call")
        if output_schema is not None:
            self.rules += prompts.render("output_schema", schema=json.dumps(output_schema, ensure_ascii=False))
        self.options: dict = {}
        if constrain:
            self.options["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "action", "schema": explicit_types(self.actions.schema)},
            }

    def system_prompt(self) -> str:
        """The protocol and a worked example, then the offered tools' documentation and their own notes: all that
        comes before the tools is the same for any tools that bring no example, so a prompt cache keeps it.

        The reply forms are shown as the example writes calls. Tools with a worked example of their own (the
        built-in ones) get three forms, a single call among them; others get a neutral example that sends two
        independent calls together, and two forms, calls always as an array, so that a call can be followed by
        another in the same reply (the grammar and the parser still take a single call)."""
        tools = list(self.registry)
        own = next((t for t in tools if t.example), None)
        batch = self._batch()
        example = _worked_example(own) if own else _neutral_example(tools, batch)
        forms = "calls" if batch else "call"
        hints = _hints(tools)
        return prompts.render("prompt_protocol", forms=prompts.load(f"forms_{forms}"),
                              several=prompts.load(f"several_{forms}"), example=example.rstrip(),
                              names=", ".join(t.name for t in tools) or "(none)", tools=self.registry.describe(),
                              hints=f"Notes on the tools:\n{hints}" if hints else "",
                              ).rstrip() + "\n" + (f"\n{self.rules}" if self.rules else "")

    def written(self, calls: list[ToolCall]) -> str:
        """``calls`` as a reply that makes them is written in the forms this prompt shows (a single call as an
        object, unless calls are shown as an array): how a conversation's earlier calls are given back."""
        actions = [{"type": "tool_call", "tool": c.tool, "arguments": c.arguments} for c in calls]
        return json.dumps(actions if len(actions) > 1 or self._batch() else actions[0], ensure_ascii=False)

    def _batch(self) -> bool:
        """Whether the prompt shows calls always as an array: tools with no worked example of their own, several
        calls to a reply allowed."""
        return self.parallel and not any(t.example for t in self.registry)

    def answer_reader(self) -> FinalAnswerReader | Unshown:
        """What shows a reply's answer as it streams in: the final action's answer field (nothing of an answer
        that is JSON: it is shown whole at the end)."""
        return FinalAnswerReader() if self.output_schema is None else Unshown()

    def parse(self, reply: Reply) -> Turn:
        try:
            parsed = parse_action(reply.content, self.actions, reply.finish_reason)
        except ParseError as error:
            expected = prompts.load("action_format") + (prompts.load("output_format") if self.output_schema else "")
            reask = prompts.render("reask", kind=error.kind, problem=error.message, expected=expected)
            failed = {"role": "assistant", "content": scrub(reply.content or "")}
            return Reask(error.kind, error.message, [failed, {"role": "user", "content": reask}])
        value = parsed.value
        message = {"role": "assistant", "content": json.dumps(value, ensure_ascii=False)}
        if isinstance(value, dict) and value["type"] == "final":
            answer = value["answer"] if self.output_schema is None else json.dumps(value["answer"], ensure_ascii=False)
            return Final(answer, message, parsed.repairs)
        actions = value if isinstance(value, list) else [value]
        return Step([ToolCall(a["tool"], a["arguments"]) for a in actions], message, parsed.repairs)

    def results(self, calls: list[ToolCall], outputs: list[str]) -> list[dict]:
        if len(calls) == 1:
            content = prompts.render("tool_result", tool=calls[0].tool, result=outputs[0])
        else:
            numbered = "\n".join(f"{i}. {c.tool}: {o}" for i, (c, o) in enumerate(zip(calls, outputs), 1))
            content = prompts.render("tool_results", results=numbered)
        return [{"role": "user", "content": content}]


def asks_for_tools(message: dict) -> bool:
    """Whether a message of the history is a step: an assistant message with native tool calls, or with a
    prompt-protocol tool call (or batch of them) as its text."""
    if message["role"] != "assistant":
        return False
    if message.get("tool_calls"):
        return True
    try:
        value = json.loads(message.get("content") or "")
    except ValueError:
        return False
    actions = value if isinstance(value, list) and value else [value]
    return all(isinstance(a, dict) and a.get("type") == "tool_call" for a in actions)


def with_instructions(system: str, instructions: str) -> str:
    """A protocol's system prompt with the user's own instructions, if there are any, after it (`agent --system`,
    the system messages a client of `agent serve` sends)."""
    instructions = scrub(instructions.strip())
    return f"{system}\nInstructions from the user:\n{instructions}\n" if instructions else system


def _hints(tools) -> str:
    return "".join(f"- {t.hint}\n" for t in tools if t.hint)


def _worked_example(tool) -> str:
    example = tool.example
    call = {"type": "tool_call", "tool": tool.name, "arguments": example["arguments"]}
    final = {"type": "final", "answer": example["answer"]}
    return prompts.render("example_call", task=example["task"], call=json.dumps(call, ensure_ascii=False),
                          tool=tool.name, result=example["result"], final=json.dumps(final, ensure_ascii=False))


NEUTRAL_TOOL = "count_letters"  # the tool of the example for tools that bring none


def _neutral_example(tools, batch: bool = True) -> str:
    """For tools with no example of their own: one with a tool that is not offered, first declining a near miss,
    a task it does not do, then calling it where it does, though the answer is easy to know (as choosing among
    unseen tools, the model had answered such questions itself): twice at once, or with ``batch`` false (one
    call per reply) once. Left out if an offered tool has its name."""
    if any(t.name == NEUTRAL_TOOL for t in tools):
        return ""
    return prompts.load("example_neutral" if batch else "example_neutral_one")


ANY_JSON = ["string", "number", "boolean", "object", "array", "null"]
_SHAPED_BY = {"type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "properties", "items", "prefixItems"}


def explicit_types(schema):
    """A copy of ``schema`` where a sub-schema that leaves the type open (a parameter taking any JSON
    value) says so with an explicit list of types, which grammar converters (llama.cpp's) need."""
    if not isinstance(schema, dict):
        return schema
    out = {key: explicit_types(value) if key in ("items", "additionalProperties") else value
           for key, value in schema.items()}
    for key in ("properties", "$defs"):
        if isinstance(schema.get(key), dict):
            out[key] = {name: explicit_types(sub) for name, sub in schema[key].items()}
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        if isinstance(schema.get(key), list):
            out[key] = [explicit_types(sub) for sub in schema[key]]
    if not (_SHAPED_BY & schema.keys()):
        out["type"] = ANY_JSON
    return out


_WRAPPER = re.compile(r"^\s*(?:```(?:json)?|<tool_call>)\s*(.*?)\s*(?:```|</tool_call>)?\s*$", re.S)


def written_call(text: str) -> tuple[str, dict] | None:
    """The (name, arguments) of a tool call written out as a reply's whole text, as JSON (fenced, or in
    <tool_call> tags): {"name", "arguments"}, {"function": {...}} or this protocol's own tool_call object."""
    match = _WRAPPER.match(text)
    try:
        value = load_json(match.group(1) if match else text)
    except ParseError:
        return None
    if isinstance(value, dict) and isinstance(value.get("function"), dict):
        value = value["function"]
    if not isinstance(value, dict):
        return None
    name = value.get("tool") if value.get("type") == "tool_call" else value.get("name")
    arguments = value.get("arguments", value.get("parameters", {}))
    if isinstance(arguments, str):
        try:
            arguments = load_json(arguments)
        except ParseError:
            return None
    if not isinstance(name, str) or not name or not isinstance(arguments, dict) or not value.keys() <= {
            "type", "tool", "name", "arguments", "parameters", "id"}:
        return None
    return name, arguments


class NativeProtocol:
    """Actions as the API's own ``tool_calls``; a reply without tool calls is the final answer."""

    name = "native"

    def __init__(self, registry, output_schema: dict | None = None):
        """``output_schema`` (a JSON Schema): the answer is a JSON value valid against it, checked here and
        re-asked when it is not; it is not sent as response_format (a grammar-constrained upstream, llama.cpp's,
        would hold the tool calls to it too, and many servers refuse response_format with tools)."""
        self.registry = registry
        self.options = {"tools": registry.openai_tools()}
        self.output_schema = output_schema
        self.answer = Draft202012Validator(output_schema) if output_schema is not None else None

    def system_prompt(self) -> str:
        """The rules both protocols share and the offered tools' own hints; the API carries the tools."""
        prompt = prompts.render("native_protocol", hints=_hints(self.registry))
        if self.output_schema is not None:
            prompt += "\n" + prompts.render("native_output_schema",
                                            schema=json.dumps(self.output_schema, ensure_ascii=False))
        return prompt

    def answer_reader(self) -> ContentReader | Unshown:
        """What shows a reply's answer as it streams in: its text, unless it begins like a call written out
        (nothing of an answer that is JSON: it is shown whole at the end)."""
        return ContentReader() if self.output_schema is None else Unshown()

    def parse(self, reply: Reply) -> Turn:
        """Calls whose arguments are checked (or carry the error to answer them with), a final answer, or a re-ask."""
        if not reply.tool_calls:
            if reply.finish_reason == "length":
                return self._reask(reply, "truncated", "your reply was cut off at the token limit; answer more briefly")
            if not (reply.content or "").strip():
                return self._reask(reply, "empty", "the reply was empty; call a tool or answer in text")
            if self.answer is not None:
                try:
                    value = parse_answer(reply.content, self.answer, reply.finish_reason)
                    answer = json.dumps(value, ensure_ascii=False)
                    return Final(answer, {"role": "assistant", "content": answer})
                except ParseError as error:
                    failure = error
            written = written_call(reply.content or "")
            if written and written[0] not in self.registry:  # as prompt mode would: a call, to no such tool
                return self._reask(reply, "unknown_tool", unknown_tool(written[0], self.registry.names))
            if written:  # a call to a real tool, written as text instead of sent as a tool call
                reply = Reply(tool_calls=[tool_call("call_1", *written)], finish_reason="tool_calls", usage=reply.usage)
                return self.parse(reply)
            if self.answer is not None:
                return self._reask(reply, failure.kind, failure.message)
            answer = scrub(reply.content)
            return Final(answer, {"role": "assistant", "content": answer})
        if len(reply.tool_calls) > MAX_BATCH:
            return self._reask(reply, "too_many_calls", f"your reply had {len(reply.tool_calls)} tool calls; "
                                                        f"at most {MAX_BATCH} can run from one reply, none was run")
        made = [self._call(tc, f"call_{i}") for i, tc in enumerate(reply.tool_calls, 1)]
        tool_calls = [scrub(tool_call(c.id or "", c.tool, raw)) for c, raw in made]  # _call gives each an id
        calls = [c for c, _ in made]
        # content "" rather than null beside the calls: llama-cpp-python's server refuses a null one (HTTP 500)
        message = {"role": "assistant", "content": scrub(reply.content or ""), "tool_calls": tool_calls}
        errors = [c.error for c in calls if c.error]
        if len(errors) == len(calls):
            problem = "; ".join(e.removeprefix("error: ") for e in errors)
            return Reask(calls[0].error_kind or "", problem, [message] + self.results(calls, errors))
        return Step(calls, message)

    def _call(self, item: object, default_id: str) -> tuple[ToolCall, str]:
        """The call with its arguments decoded and checked (or the error to answer it with), and its
        arguments as JSON text for the history. An odd shape is an error too, never an exception."""
        item = item if isinstance(item, dict) else {}
        function = item["function"] if isinstance(item.get("function"), dict) else {}
        name, raw, id = function.get("name"), function.get("arguments"), item.get("id")
        call = ToolCall(name if isinstance(name, str) else "", {}, id=id if isinstance(id, str) and id else default_id)
        if raw is None or isinstance(raw, str) and not raw.strip():
            raw = "{}"  # no arguments
        if not call.tool:
            call.error_kind = "schema"
            call.error = f"error: a tool call without a tool name; available tools: {', '.join(self.registry.names)}"
            return call, "{}"
        try:
            arguments = load_json(raw) if isinstance(raw, str) else None
        except ParseError as error:
            call.error_kind = error.kind
            call.error = f"error: the arguments of {name} are not valid JSON ({error.message}); send a JSON object"
            return call, raw
        if not isinstance(arguments, dict):
            call.error_kind, call.error = "bad_arguments", f"error: the arguments of {name} must be a JSON object"
            return call, raw if isinstance(raw, str) else "{}"
        call.arguments = arguments
        problem = self.registry.check_arguments(name, arguments)
        if problem:
            call.error_kind = "bad_arguments" if name in self.registry else "unknown_tool"
            call.error = f"error: {problem}"
        return call, raw

    def _reask(self, reply: Reply, kind: str, problem: str) -> Reask:
        return Reask(kind, problem, [
            {"role": "assistant", "content": scrub(reply.content or "")},
            {"role": "user", "content": prompts.render("reask", kind=kind, problem=problem, expected="").strip()},
        ])

    def results(self, calls: list[ToolCall], outputs: list[str]) -> list[dict]:
        return [{"role": "tool", "tool_call_id": c.id, "content": o} for c, o in zip(calls, outputs)]
