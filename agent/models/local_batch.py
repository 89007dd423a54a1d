"""A batch's first call named as a reply of one call would name it, on the embedded model.

Native tool calling names a reply's first call before it decides whether another follows (Qwen 2.5 writes one
``<tool_call>`` block, then another or the end). The protocol's batch is a JSON array, whose "[" comes before any
call: a model that has committed to several calls may name a preparatory one first. On BFCL's `multiple_13`
("How much revenue would company XYZ generate if we increase the sales units of product A by 10% while keeping
the price the same?") the model opened a batch ("[" 0.39 against '{"' 0.16) whose first call fetched the
product's price, which the forecast it called second does not need; its reply opened as one call names the
forecast, and with that call first in the array it closes the array (0.98).

So where a greedy reply is a batch of several calls, the model is asked, from the same prompt, for the tool of
one call (its reply made to open with PROBE, until the tool's name is written); where that is another of the
batch's own tools, not its first, the batch is written again, made to open with a call of that tool. Where one
call names a tool the batch does not hold, the two plans disagree, and the batch, written whole, stands: on the
own suite's "What dates are 30, 60 and 90 days after 2026-03-15?" one call named days_between where the batch
held three right add_to_date calls. Batches whose first call is the one call's (on BFCL's seeded draws and all
of `multiple`, 215 of 219) cost the question's few tokens.
"""
from __future__ import annotations

import json
from collections.abc import Callable

from agent.models.local_named import tool_names

PROBE = '{"type": "tool_call", "tool": "'
PROBE_TOKENS = 64  # enough for the opening and a tool's name
PROBE_STOP = '"arguments"'  # what follows the name: the question is answered


def first_call(content: str, schema: object, decode: Callable[[str, int | None, str | None], str]) -> str | None:
    """The batch ``content`` written again from the call a reply of one call would make, or None where it stands.
    ``schema`` is the action schema the reply was held to; ``decode(opening, max_tokens, stop)`` is the model's
    reply to the same prompt, made to start with ``opening``."""
    tools = batch_tools(content)
    if tools is None:
        return None
    tool = named_tool(decode(PROBE, PROBE_TOKENS, PROBE_STOP))
    if tool is None or tool not in tools[1:] or tool == tools[0] or tool not in tool_names(schema):
        return None
    return decode(opening(tool), None, None)


def batch_tools(content: str) -> list[str] | None:
    """The tools a reply that is a JSON array of two or more calls names, in order; else None."""
    try:
        value = json.loads(content)
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, list) or len(value) < 2:
        return None
    tools = [call.get("tool") if isinstance(call, dict) and call.get("type") == "tool_call" else None
             for call in value]
    return tools if all(isinstance(tool, str) for tool in tools) else None  # type: ignore[return-value]


def named_tool(text: str) -> str | None:
    """The tool a reply that opens with PROBE names, if its name is written to its end."""
    text = text.lstrip()
    if not text.startswith(PROBE):
        return None
    try:
        name, _ = json.JSONDecoder().raw_decode('"' + text[len(PROBE):])
    except ValueError:
        return None
    return name if isinstance(name, str) else None


def opening(tool: str) -> str:
    """The start of a batch whose first call is of ``tool``, up to where its arguments come."""
    return '[{"type": "tool_call", "tool": ' + json.dumps(tool) + ","
