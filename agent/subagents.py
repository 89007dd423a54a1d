"""Sub-agents: what runs behind the spawn_agent tool. Each task gets a fresh loop with its own history and step
budget, the same model and the parent's tools but spawn_agent (one level deep); its events go to the parent's
trace nested under the call, and what it spent counts in the parent's totals."""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from agent.config import Settings
from agent.loop import Agent
from agent.models import Model
from agent.protocols import ActionProtocol
from agent.tools import Plan, Registry, Tool, ToolResult
from agent.tools.spawn import spawn_tool
from agent.trace import Emit, ignore


class SubAgents:
    """The spawn_agent tool (``tool``) and the runner behind it: each helper runs on ``model`` with ``tools`` (the
    parent's, but spawn_agent; a plan of its own), the protocol ``make_protocol(registry)`` makes and
    ``settings``; ``emit`` is the parent's trace."""

    def __init__(self, model: Model, tools: Iterable[Tool], make_protocol: Callable[[Registry], ActionProtocol],
                 settings: Settings, *, instructions: str = "", emit: Emit = ignore):
        self.tool = spawn_tool(self.run)
        self.model, self.make_protocol, self.settings = model, make_protocol, settings
        self.tools = [t for t in tools if t.name != self.tool.name]
        self.instructions, self.emit = instructions, emit
        self.spawned = 0  # sub-agents started in this process, to tell their events apart
        self._lock = threading.Lock()  # the calls of one batch run at once

    def run(self, task: str) -> ToolResult:
        with self._lock:
            self.spawned += 1
            number = self.spawned
        # a plan of its own, so that the parent's stays the parent's
        tools = Registry([Plan().tool if t.name == "todo_write" else t for t in self.tools])

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
            return ToolResult(True, result.answer or "", spent)
        return ToolResult(False, f"error: the helper ended without an answer ({result.status}: {result.error}); "
                                 "do this part yourself, or hand over a smaller one", spent)
