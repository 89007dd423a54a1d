"""Tools as plain data, a registry for them, and the built-in tools."""

from __future__ import annotations

import os

from .calculator import calculator
from .clock import current_time
from .files import file_tools
from .registry import Registry, Tool, ToolError, ToolResult, tool

__all__ = ["Registry", "Tool", "ToolError", "ToolResult", "builtin_registry", "tool"]


def builtin_registry(workspace: str | os.PathLike) -> Registry:
    """calculator, read_file, write_file, list_dir and current_time, with files confined to `workspace`."""
    return Registry([calculator, *file_tools(workspace), current_time])
