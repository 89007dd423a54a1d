"""The two ways of asking a model for actions: a JSON protocol in the prompt, or native tool calls.

Both give the loop the same four things: the system prompt, the request options, a parsed
turn for each reply, and the messages that carry tool results back.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import prompts
from agent.model import Reply
from agent.parsing import ParseError, action_schema, parse_action


@dataclass
class Call:
    tool: str
    arguments: dict
    id: str | None = None
    error: str | None = None  # a malformed call is answered with this text instead of being run
    error_kind: str | None = None


@dataclass
class Final:
    answer: str
    message: dict


@dataclass
class Calls:
    calls: list[Call]
    message: dict


@dataclass
class FormatError:
    """A reply the loop cannot act on; ``messages`` (the reply and the re-ask) go back to the model."""

    kind: str
    problem: str
    messages: list[dict]


Turn = Final | Calls | FormatError


class PromptProtocol:
    """Actions as JSON text, described in the system prompt and checked against one JSON Schema."""

    name = "prompt"

    def __init__(self, registry, constrain: bool = False):
        self.registry = registry
        self.schema = action_schema(registry.parameters())
        self.options: dict = {}
        if constrain:
            single = action_schema(registry.parameters(), batch=False)
            self.options["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "action", "schema": single},
            }

    def system_prompt(self) -> str:
        return prompts.render("prompt_protocol", tools=self.registry.describe())

    def parse(self, reply: Reply) -> Turn:
        try:
            value = parse_action(reply.content, self.schema, reply.finish_reason).value
        except ParseError as error:
            reask = prompts.render("reask", kind=error.kind, problem=error.message,
                                   expected=prompts.load("action_format"))
            failed = {"role": "assistant", "content": reply.content or ""}
            return FormatError(error.kind, error.message, [failed, {"role": "user", "content": reask}])
        message = {"role": "assistant", "content": json.dumps(value, ensure_ascii=False)}
        if isinstance(value, dict) and value["type"] == "final":
            return Final(value["answer"], message)
        actions = value if isinstance(value, list) else [value]
        return Calls([Call(a["tool"], a["arguments"]) for a in actions], message)

    def results(self, calls: list[Call], texts: list[str]) -> list[dict]:
        if len(calls) == 1:
            content = prompts.render("tool_result", tool=calls[0].tool, result=texts[0])
        else:
            numbered = "\n".join(f"{i}. {c.tool}: {t}" for i, (c, t) in enumerate(zip(calls, texts), 1))
            content = prompts.render("tool_results", results=numbered)
        return [{"role": "user", "content": content}]


class NativeProtocol:
    """Actions as the API's own ``tool_calls``; a reply without tool calls is the final answer."""

    name = "native"

    def __init__(self, registry):
        self.registry = registry
        self.options = {"tools": registry.openai_tools()}

    def system_prompt(self) -> str:
        return prompts.load("native_protocol")

    def parse(self, reply: Reply) -> Turn:
        if not reply.tool_calls:
            if reply.finish_reason == "length":
                return self._reask(reply, "truncated", "your reply was cut off at the token limit; answer more briefly")
            if not (reply.content or "").strip():
                return self._reask(reply, "empty", "the reply was empty; call a tool or answer in text")
            return Final(reply.content, {"role": "assistant", "content": reply.content})
        tool_calls = [{**tc, "id": tc.get("id") or f"call_{i}"} for i, tc in enumerate(reply.tool_calls, 1)]
        calls = [self._call(tc) for tc in tool_calls]
        message = {"role": "assistant", "content": reply.content, "tool_calls": tool_calls}
        if all(c.error for c in calls):
            problem = "; ".join(c.error.removeprefix("error: ") for c in calls)
            return FormatError(calls[0].error_kind, problem, [message] + self.results(calls, [c.error for c in calls]))
        return Calls(calls, message)

    def _call(self, tool_call: dict) -> Call:
        name = tool_call["function"]["name"]
        raw = tool_call["function"].get("arguments") or "{}"
        call = Call(name, {}, id=tool_call["id"])
        try:
            arguments = json.loads(raw)
        except json.JSONDecodeError as error:
            call.error_kind = "invalid_json"
            call.error = f"error: the arguments of {name} are not valid JSON ({error}); send a JSON object"
            return call
        if not isinstance(arguments, dict):
            call.error_kind, call.error = "bad_arguments", f"error: the arguments of {name} must be a JSON object"
            return call
        call.arguments = arguments
        problem = self.registry.check_arguments(name, arguments)
        if problem:
            call.error_kind = "bad_arguments" if name in self.registry else "unknown_tool"
            call.error = f"error: {problem}"
        return call

    def _reask(self, reply: Reply, kind: str, problem: str) -> FormatError:
        return FormatError(kind, problem, [
            {"role": "assistant", "content": reply.content or ""},
            {"role": "user", "content": prompts.render("reask", kind=kind, problem=problem, expected="").strip()},
        ])

    def results(self, calls: list[Call], texts: list[str]) -> list[dict]:
        return [{"role": "tool", "tool_call_id": c.id, "content": t} for c, t in zip(calls, texts)]
