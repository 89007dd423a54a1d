"""MCP servers for a command: `--mcp "COMMAND ARGS..."` and the `[mcp.servers.NAME]` tables of agent.toml (in
the current folder, then in your configuration folder), started once for the command and stopped after it."""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from agent.cli.arguments import positive_float
from agent.cli.environment import config_file
from agent.config import ConfigError, Environment

if TYPE_CHECKING:
    from agent.tools.mcp import MCPServers, ServerSpec

CONFIG_NAME = "agent.toml"
MAX_CONFIG_BYTES = 1_000_000
_NAME = {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,24}$"}
CONFIG_SCHEMA = {
    "type": "object", "additionalProperties": False,
    "properties": {
        "mcp": {
            "type": "object", "additionalProperties": False,
            "properties": {
                "timeout": {"type": "number", "exclusiveMinimum": 0, "maximum": 3600},
                "servers": {
                    "type": "object", "propertyNames": _NAME,
                    "additionalProperties": {
                        "type": "object", "required": ["command"], "additionalProperties": False,
                        "properties": {
                            "command": {"type": "string", "minLength": 1},
                            "args": {"type": "array", "items": {"type": "string"}},
                            "env": {"type": "object", "additionalProperties": {"type": "string"}},
                        },
                    },
                },
            },
        },
    },
}


def add_mcp_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("MCP servers (the mcp extra)")
    group.add_argument("--mcp", action="append", default=[], metavar='"COMMAND ARGS..."',
                       help="start this MCP server (stdio) and offer its tools, named SERVER_TOOL; repeatable; "
                            "NAME=COMMAND names it; more in agent.toml")
    group.add_argument("--mcp-timeout", type=positive_float, metavar="SECONDS",
                       help="for one call to an MCP server, and for it to start (at least 10); default 30 (or "
                            "agent.toml's mcp.timeout)")


def config_files(env: Environment) -> list[tuple[Path, bool]]:
    """The agent.toml files that exist, each with whether it is the current folder's (which asks first, whatever
    it links to: it may have come with a cloned repository): the current folder's, then your configuration
    folder's. One file that is both (a link to yours, or the current folder being your configuration folder) is
    yours."""
    yours = config_file(env.process).parent / CONFIG_NAME
    here = Path.cwd() / CONFIG_NAME
    found = [(path, path is here) for path in (here, yours) if path.is_file()]
    if len(found) == 2 and here.resolve() == yours.resolve():
        found = found[1:]
    return found


def read_config(path: Path) -> dict:
    """agent.toml, checked against CONFIG_SCHEMA; a file that cannot be used is a ConfigError naming it."""
    import tomllib

    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import best_match

    try:
        if path.stat().st_size > MAX_CONFIG_BYTES:
            raise ConfigError(f"{path}: larger than {MAX_CONFIG_BYTES:,} bytes, which is not a configuration file; "
                              "fix or remove it")
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path}: cannot read it ({error}); fix or remove the file") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: not valid TOML ({error}); fix it (the format is in the README, MCP servers)") \
            from None
    problem = best_match(Draft202012Validator(CONFIG_SCHEMA).iter_errors(data))
    if problem is not None:
        where = ".".join(map(str, problem.absolute_path)) or "the top level"
        raise ConfigError(f"{path}: {where}: {' '.join(problem.message.split())[:200]}; see the README, "
                          "MCP servers, for the format")
    return data


def server_specs(args, env: Environment, approve: Callable[[str], bool] | None) -> tuple[list[ServerSpec], float]:
    """The servers to start: agent.toml's (those of the current folder's file only once the user approves:
    it may have come with a cloned repository, and starting a server runs its command), then --mcp's; and the
    timeout."""
    from agent.tools.mcp import TIMEOUT, ServerSpec, parse_command

    specs, timeout = [], None
    for path, asks in config_files(env):
        config = read_config(path).get("mcp", {})
        timeout = timeout or config.get("timeout")
        found = [ServerSpec(name, s["command"], s.get("args", []), s.get("env", {}), origin=str(path))
                 for name, s in config.get("servers", {}).items()]
        if found and asks:
            shown = "; ".join(f"{s.name}: {' '.join([s.command, *s.args])}" for s in found)
            target = f", a link to {path.resolve()}" if path.is_symlink() else ""
            if approve is None or not approve(f"starting the MCP servers of {path}{target} ({shown})"):
                print(f"agent: the MCP servers of {path} were not started (pass --yes, or answer y on a terminal)",
                      file=sys.stderr)
                continue
        specs += found
    try:
        specs += [parse_command(text) for text in getattr(args, "mcp", [])]
    except ValueError as error:
        raise ConfigError(str(error)) from None
    return specs, getattr(args, "mcp_timeout", None) or timeout or TIMEOUT


def open_servers(args, env: Environment, taken, approve: Callable[[str], bool] | None, *,
                 quiet: bool = False) -> Started:
    """The command's MCP servers (none, when neither --mcp nor agent.toml names one), to start with ``with``.
    Their messages go to stderr; ``taken``: the names their tools must not take (the built-in tools')."""
    from agent.tools.mcp import MCPServers, MCPUnavailable

    specs, timeout = server_specs(args, env, approve)
    if specs:  # the SDK logs what a server does wrong (a line that is not JSON-RPC) with a traceback: the
        # messages that matter come from MCPServers, one line each
        sdk_log = logging.getLogger("mcp")
        sdk_log.addHandler(logging.NullHandler())
        sdk_log.propagate = False

    def warn(message: str) -> None:
        print(f"agent: {message}", file=sys.stderr, flush=True)

    try:
        return Started(MCPServers(specs, timeout=timeout, warn=warn, taken=set(taken)), quiet)
    except (MCPUnavailable, ValueError) as error:
        raise ConfigError(str(error)) from None


class Started:
    """MCPServers that say, when they have started, how many tools each brings."""

    def __init__(self, servers: MCPServers, quiet: bool):
        self.servers, self.quiet = servers, quiet

    def __enter__(self) -> MCPServers:
        self.servers.start()
        if not self.quiet:
            for server in self.servers.servers:
                count = len(server.tools)
                if not server.dead:
                    print(f"agent: MCP server {server.spec.name}: {count} tool{'s' * (count != 1)}", file=sys.stderr)
        return self.servers

    def __exit__(self, *exc) -> None:
        self.servers.close()


def config_approval(yes: bool) -> Callable[[str], bool]:
    """What approves starting the servers of the current folder's agent.toml: --yes, or the user on the terminal."""
    from agent.cli.approval import TerminalApproval
    from agent.tools import approve_everything

    return approve_everything if yes else TerminalApproval()
