"""The two ways of asking a model for actions: a JSON protocol in the prompt, or native tool calls.

Both give the loop the same four things: the system prompt, the request options, a parsed
turn for each reply, and the messages that carry tool results back.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import prompts
from agent.model import Reply, tool_call
from agent.parsing import MAX_BATCH, ActionSchema, ParseError, action_schema, load_json, parse_action
from agent.text import scrub


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
        self.actions = ActionSchema(self.schema)  # the validators, built once
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
            value = parse_action(reply.content, self.actions, reply.finish_reason).value
        except ParseError as error:
            reask = prompts.render("reask", kind=error.kind, problem=error.message,
                                   expected=prompts.load("action_format"))
            failed = {"role": "assistant", "content": scrub(reply.content or "")}
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
        """Calls whose arguments are checked (or carry the error to answer them with), a final answer, or a re-ask."""
        if not reply.tool_calls:
            if reply.finish_reason == "length":
                return self._reask(reply, "truncated", "your reply was cut off at the token limit; answer more briefly")
            if not (reply.content or "").strip():
                return self._reask(reply, "empty", "the reply was empty; call a tool or answer in text")
            answer = scrub(reply.content)
            return Final(answer, {"role": "assistant", "content": answer})
        if len(reply.tool_calls) > MAX_BATCH:
            return self._reask(reply, "too_many_calls", f"your reply had {len(reply.tool_calls)} tool calls; "
                                                        f"at most {MAX_BATCH} can run from one reply, none was run")
        calls = [self._call(tc, f"call_{i}") for i, tc in enumerate(reply.tool_calls, 1)]
        tool_calls = [scrub(tool_call(c.id, c.tool, raw)) for c, raw in calls]
        calls = [c for c, _ in calls]
        message = {"role": "assistant", "content": scrub(reply.content), "tool_calls": tool_calls}
        if all(c.error for c in calls):
            problem = "; ".join(c.error.removeprefix("error: ") for c in calls)
            return FormatError(calls[0].error_kind, problem, [message] + self.results(calls, [c.error for c in calls]))
        return Calls(calls, message)

    def _call(self, item: object, default_id: str) -> tuple[Call, str]:
        """The call with its arguments decoded and checked (or the error to answer it with), and its
        arguments as JSON text for the history. An odd shape is an error too, never an exception."""
        item = item if isinstance(item, dict) else {}
        function = item.get("function") if isinstance(item.get("function"), dict) else {}
        name, raw, id = function.get("name"), function.get("arguments"), item.get("id")
        call = Call(name if isinstance(name, str) else "", {}, id=id if isinstance(id, str) and id else default_id)
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

    def _reask(self, reply: Reply, kind: str, problem: str) -> FormatError:
        return FormatError(kind, problem, [
            {"role": "assistant", "content": scrub(reply.content or "")},
            {"role": "user", "content": prompts.render("reask", kind=kind, problem=problem, expected="").strip()},
        ])

    def results(self, calls: list[Call], texts: list[str]) -> list[dict]:
        return [{"role": "tool", "tool_call_id": c.id, "content": t} for c, t in zip(calls, texts)]
