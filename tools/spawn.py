"""spawn_agent: a self-contained part of the task handed to a helper agent, whose final answer is the result.
The helper is whatever ``run`` the caller gives (the agent's own loop); this module knows nothing of it."""

from __future__ import annotations

from typing import Callable

from .registry import Tool, ToolResult, tool

PARAMETERS = {"type": "object", "properties": {"task": {
    "type": "string", "minLength": 1, "maxLength": 4000,
    "description": "the sub-task, with every detail the helper needs: it sees nothing of this conversation"}},
    "required": ["task"], "additionalProperties": False}


def spawn_tool(run: Callable[[str], ToolResult]) -> Tool:
    """The spawn_agent tool; ``run(task)`` does the work and gives its result."""

    def spawn_agent(task: str) -> ToolResult:
        return run(task)

    return tool(spawn_agent, name="spawn_agent", parameters=PARAMETERS,
                description="Hand a self-contained part of the task to a helper agent, which has the same tools "
                            "(but this one) and its own steps, sees nothing of this conversation, and gives back "
                            "only its final answer.",
                hint="Use spawn_agent for a part of the work that takes several steps of its own and can be "
                     "described in full; you get back only the helper's answer.")
