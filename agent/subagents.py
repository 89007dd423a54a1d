"""Sub-agents: what runs behind the spawn_agent tool. Each task gets a fresh loop with its own history and step
budget, the same model and the parent's tools but spawn_agent (one level deep); its events go to the parent's
trace nested under the call, and what it spent counts in the parent's totals."""
from __future__ import annotations

import threading
from typing import Callable

from agent.config import Settings
from agent.loop import Agent, ignore
from agent.models import Model
from agent.tools import Plan, Registry, ToolError, ToolResult
from agent.tools.spawn import spawn_tool


class SubAgents:
    """The spawn_agent tool (``tool``) and the runner behind it. The tool is made first, to go in the registry;
    ``attach`` then gives it what a run needs: the model, the registry, the protocol and the settings."""

    def __init__(self):
        self.tool = spawn_tool(self.run)
        self.model: Model | None = None
        self.registry: Registry | None = None
        self.make_protocol: Callable | None = None
        self.settings, self.instructions, self.emit = Settings(), "", ignore
        self.spawned = 0  # sub-agents started in this process, to tell their events apart
        self._lock = threading.Lock()  # the calls of one batch run at once

    def attach(self, model: Model, registry: Registry, make_protocol: Callable, settings: Settings, *,
               instructions: str = "", emit: Callable[..., None] = ignore) -> None:
        """``make_protocol(registry)`` makes the sub-agent's protocol; ``emit`` is the parent's trace."""
        self.model, self.registry, self.make_protocol = model, registry, make_protocol
        self.settings, self.instructions, self.emit = settings, instructions, emit

    def run(self, task: str) -> ToolResult:
        if self.model is None:
            raise ToolError("spawn_agent is not set up (no model attached); do this part yourself")
        with self._lock:
            self.spawned += 1
            number = self.spawned
        # the parent's tools but this one; a plan of its own, so that the parent's stays the parent's
        tools = Registry([Plan().tool if t.name == "todo_write" else t for t in self.registry
                          if t.name != self.tool.name])

        def nested(event: str, **data) -> None:
            self.emit("subagent", agent=number, inner={"event": event, **data})

        child = Agent(self.model, tools, self.make_protocol(tools), self.settings, emit=nested,
                      instructions=self.instructions)
        result = child.run(task)
        if result.status == "interrupted":  # Ctrl-C stops the whole run, not just the helper
            raise KeyboardInterrupt
        spent = {"model_calls": result.model_calls, "prompt_tokens": result.prompt_tokens,
                 "completion_tokens": result.completion_tokens, "usage_missing": result.usage_missing}
        if result.status == "final":
            return ToolResult(True, result.answer, spent)
        return ToolResult(False, f"error: the helper ended without an answer ({result.status}: {result.error}); "
                                 "do this part yourself, or hand over a smaller one", spent)
