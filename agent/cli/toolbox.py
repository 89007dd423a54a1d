"""The tools of a run: the options that choose them (`agent`, `agent chat`, `agent tools`), and the Toolbox they
make, built once with what the run gives it (its events, the helpers' model, an MCP server's tools)."""
from __future__ import annotations

import argparse
import difflib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from agent.cli.arguments import check_output_file, positive_float
from agent.config import ConfigError
from agent.trace import Emit, ignore

if TYPE_CHECKING:  # imported when a command needs them: `agent --help` stays quick
    from agent.subagents import SubAgents
    from agent.tools import Memory, Registry, Tool, ToolResult

DEFAULT_TOOLS = ("calculator", "read_file", "write_file", "list_dir", "current_time", "run_shell", "todo_write")
SHELL_TIMEOUT = 30.0  # seconds for one run_shell command


def add_tool_options(parser: argparse.ArgumentParser) -> None:
    """Options that choose the tools and what they may do, shared by `agent` and `agent tools`."""
    group = parser.add_argument_group("tools")
    group.add_argument("--tools", type=names, metavar="NAME,...",
                       help=f"the tools the model is offered, default {','.join(DEFAULT_TOOLS)} (and remember, "
                            "with --memory); spawn_agent, a helper agent, only when named; none: no built-in tool; "
                            "an MCP server's tools (--mcp) are all offered besides; `agent tools` lists them")
    group.add_argument("--read-only", action="store_true",
                       help="leave out every tool that can change something: write_file, remember, and the "
                            "run_shell commands that are not read-only")
    group.add_argument("--yes", action="store_true",
                       help="approve every command and file replacement of the run without asking")
    group.add_argument("--shell-timeout", type=positive_float, default=SHELL_TIMEOUT, metavar="SECONDS",
                       help="for one run_shell command, which is then stopped with all it started, "
                            f"default {SHELL_TIMEOUT:g}")
    group.add_argument("--memory", metavar="FILE",
                       help="notes kept between runs (memory.md, say): shown to the model at the start of the run; "
                            "the remember tool adds to them")


def names(text: str) -> list[str]:
    chosen = [name.strip() for name in text.split(",") if name.strip()]
    if not chosen:
        raise argparse.ArgumentTypeError("names no tool; pass tool names separated by commas (agent tools lists them)")
    return chosen


@dataclass(frozen=True)
class Toolbox:
    """The tools of a run: those offered to the model (the registry), the others by name with why they are off,
    and the memory file, if there is one."""

    registry: Registry
    off: dict[str, str]
    memory: Memory | None


def toolbox(args: argparse.Namespace, approve: Callable[[str], bool] | None, *, extra: Sequence[Tool] = (),
            emit: Emit = ignore, helpers: Callable[[list[Tool]], SubAgents] | None = None) -> Toolbox:
    """The tools ``--tools`` chooses among the built-in ones (the default ones when it is not given), as the
    other flags make them, and ``extra`` ones besides (an MCP server's; with --read-only, those it marks
    read-only); a name that is unknown, or a tool --read-only leaves out, is a usage error. ``emit`` hears the
    plan's changes; ``helpers(tools)`` makes spawn_agent's runner, given the run's other tools (without it,
    spawn_agent can be listed but not run)."""
    from agent.tools import Memory, Plan, Registry, file_tools, shell_tool
    from agent.tools.calculator import calculator
    from agent.tools.clock import current_time
    from agent.tools.spawn import spawn_tool

    workspace = getattr(args, "workspace", ".")
    if not Path(workspace).is_dir():
        raise ConfigError(f"workspace {workspace!r} is not a folder; pass --workspace DIR")
    memory = Memory(args.memory) if args.memory else None
    if memory:
        check_output_file(args.memory, "--memory", "memory file")
        if os.path.exists(args.memory) and not os.path.isfile(args.memory):
            raise ConfigError(f"--memory {args.memory!r} is not a regular file (a device or a FIFO): its notes "
                              "cannot be read or kept there; pass a file, like --memory memory.md")
    plan = Plan(on_change=lambda todos: emit("plan", todos=todos))
    spawn = spawn_tool(_no_helpers)  # the helpers' own, below, when they can run
    shell = shell_tool(workspace, approve, args.shell_timeout)
    every = [calculator, *file_tools(workspace, approve), current_time, shell, plan.tool, spawn,
             *([memory.tool] if memory else [])]
    available = [t.name for t in every] + ([] if memory else ["remember"])
    wanted = args.tools or [*DEFAULT_TOOLS, *(["remember"] if memory else [])]
    wanted = [] if wanted == ["none"] else wanted  # only an MCP server's tools (--mcp)
    unknown = [name for name in wanted if name not in available]
    if unknown:
        close = difflib.get_close_matches(unknown[0], available, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise ConfigError(f"--tools: no tool named {', '.join(unknown)}{hint}; the tools are {', '.join(available)}")
    if "remember" in wanted and not memory:
        raise ConfigError("--tools remember needs --memory FILE, the file it writes to")
    changing = [t.name for t in every if t.writes and t.name in wanted]
    if args.read_only and args.tools and changing:
        raise ConfigError(f"--tools {','.join(changing)} and --read-only: --read-only leaves out what can change "
                          "files; drop one of them")
    on = [t for t in every if t.name in wanted and not (args.read_only and t.writes)]
    off = {t.name: "--read-only" if t.name in wanted else "not in --tools" for t in every if t not in on}
    if not memory:
        off["remember"] = "needs --memory FILE"
    for tool in extra:
        if args.read_only and tool.writes:
            off[tool.name] = "--read-only (its server does not mark it read-only)"
        else:
            on.append(tool)
    if helpers and spawn in on:
        runner = helpers([t for t in on if t is not spawn])
        on = [runner.tool if t is spawn else t for t in on]
    return Toolbox(Registry(on), off, memory)


def _no_helpers(task: str) -> ToolResult:
    from agent.tools import ToolError

    raise ToolError("spawn_agent is not set up (no model to run a helper on); do this part yourself")


def builtin_names(args: argparse.Namespace) -> set[str]:
    """Every built-in tool's name, offered or not (an MCP server's tool may take none of them), once the tool
    options are checked: what is wrong with them is a usage error before anything is loaded or started."""
    tools = toolbox(args, None)
    return {*tools.registry.names, *tools.off}


def memory_notes(memory: Memory, path: str) -> str:
    """The memory file's notes for the system prompt, as data."""
    from agent import prompts
    from agent.tools import ToolError

    try:
        notes = memory.read() or "(none yet)"
    except ToolError as error:
        notes = f"(none: {error})"
    return prompts.render("memory", path=path, notes=notes)
