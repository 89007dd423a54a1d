"""`agent tools`: the built-in tools and their parameters, as the prompt shows them or as native tool specs."""
from __future__ import annotations

import argparse
import json

from agent.cli.options import Parser, builtin_tools


def tools_parser() -> Parser:
    parser = Parser(prog="agent tools", description="List the tools and their parameters.")
    parser.add_argument("--json", action="store_true", help="print the native tool specs as JSON")
    parser.add_argument("--quiet", action="store_true", help=argparse.SUPPRESS)  # `agent --quiet tools` is fine
    return parser


def tools_command(argv: list[str]) -> int:
    args = tools_parser().parse_args(argv)
    registry = builtin_tools(".")
    print(json.dumps(registry.openai_tools(), indent=2) if args.json else registry.describe())
    return 0
