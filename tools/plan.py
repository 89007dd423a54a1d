"""todo_write: the run's plan, a task list the model replaces whole as it works."""

from __future__ import annotations

from typing import Callable

from .registry import Tool, ToolError, tool

STATUSES = ("pending", "in_progress", "completed")
MAX_TODOS = 20
MAX_CONTENT = 200  # characters of one task

PARAMETERS = {"type": "object", "properties": {"todos": {
    "type": "array", "maxItems": MAX_TODOS, "description": "the whole plan, in order; it replaces the previous one",
    "items": {"type": "object", "properties": {
        "content": {"type": "string", "minLength": 1, "maxLength": MAX_CONTENT, "description": "one step, briefly"},
        "status": {"type": "string", "enum": list(STATUSES)}},
        "required": ["content", "status"], "additionalProperties": False}}},
    "required": ["todos"], "additionalProperties": False}


class Plan:
    """The current task list; ``on_change(todos)`` hears of every new one (the command line shows and traces it)."""

    def __init__(self, on_change: Callable[[list[dict]], None] | None = None):
        self.todos: list[dict] = []
        self.on_change = on_change
        self.tool: Tool = tool(
            self.todo_write, name="todo_write", parameters=PARAMETERS, keep_latest=True,
            description="Write the plan for a task of several steps: the whole task list, each step pending, "
                        "in_progress (one at a time) or completed; it replaces the previous list.",
            hint="When a task needs three or more steps, first write a plan with todo_write, and update it as each "
                 "step is done.")

    def todo_write(self, todos: list[dict]) -> str:
        doing = [t["content"] for t in todos if t["status"] == "in_progress"]
        if len(doing) > 1:
            raise ToolError(f"{len(doing)} steps are in_progress ({'; '.join(doing)}); mark only the one you are "
                            "doing now in_progress, and the others pending or completed")
        self.todos = [{"content": " ".join(t["content"].split()), "status": t["status"]} for t in todos]
        if self.on_change:
            self.on_change(self.todos)
        return checklist(self.todos)


def checklist(todos: list[dict]) -> str:
    """The plan as the model and the user see it: one line per step, [x] when completed."""
    if not todos:
        return "(the plan is empty)"
    done = sum(t["status"] == "completed" for t in todos)
    lines = [f"[{'x' if t['status'] == 'completed' else ' '}] {t['content']}"
             f"{' (in progress)' if t['status'] == 'in_progress' else ''}" for t in todos]
    return f"Plan, {done} of {len(todos)} done:\n" + "\n".join(lines)
