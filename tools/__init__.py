"""Tools as plain data, a registry for them, and the built-in tools."""

from __future__ import annotations

import os
from typing import Callable

from .calculator import calculator
from .clock import current_time
from .files import file_tools
from .memory import Memory
from .plan import Plan
from .registry import Registry, Tool, ToolError, ToolResult, tool
from .shell import shell_tool

__all__ = ["Memory", "Plan", "Registry", "Tool", "ToolError", "ToolResult", "approve_everything", "builtin_registry",
           "file_tools", "shell_tool", "tool"]


def builtin_registry(workspace: str | os.PathLike, approve: Callable[[str], bool] | None = None) -> Registry:
    """calculator, read_file, write_file, list_dir and current_time, with files confined to `workspace`;
    ``approve(request) -> bool`` is asked before write_file replaces a file (without it, replacing is refused)."""
    return Registry([calculator, *file_tools(workspace, approve), current_time])


def approve_everything(request: str) -> bool:
    """An approver that says yes to every request (--yes, or a throwaway workspace)."""
    return True
