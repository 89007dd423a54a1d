"""`agent tools`: the tools a run would offer and their parameters (as the prompt shows them, or as native tool
specs), which are off, and which ask the user first."""
from __future__ import annotations

import argparse
import json

from agent.cli.approval import approver
from agent.cli.arguments import Parser
from agent.cli.environment import environment
from agent.cli.servers import add_mcp_options, config_approval, open_servers
from agent.cli.toolbox import Toolbox, add_tool_options, builtin_names, toolbox


def tools_parser() -> Parser:
    parser = Parser(prog="agent tools", description="List the tools a run offers, with their parameters.")
    parser.add_argument("--json", action="store_true", help="print the native tool specs as JSON")
    parser.add_argument("--quiet", action="store_true", help=argparse.SUPPRESS)  # `agent --quiet tools` is fine
    add_tool_options(parser)
    add_mcp_options(parser)
    return parser


def tools_command(argv: list[str]) -> int:
    args = tools_parser().parse_args(argv)
    taken = builtin_names(args)
    with open_servers(args, environment(), taken, config_approval(args.yes), quiet=True) as servers:
        return show(args, toolbox(args, approver(args.read_only, args.yes), extra=servers.tools))


def show(args: argparse.Namespace, tools: Toolbox) -> int:
    if args.json:
        print(json.dumps(tools.registry.openai_tools(), indent=2))
        return 0
    print(tools.registry.describe() + "\n")
    print(f"on: {', '.join(tools.registry.names) or 'none'} (choose with --tools)")
    if tools.off:
        print(f"off: {', '.join(f'{name} ({why})' for name, why in tools.off.items())}")
    asking = [t for t in tools.registry if t.asks]
    if asking and not args.yes:
        print("asks first, on the terminal (--yes approves everything; --read-only runs none of it):")
        print("\n".join(f"  {t.name}, {t.asks}" for t in asking))
    elif asking:
        print("asks first: nothing (--yes approves everything)")
    return 0
