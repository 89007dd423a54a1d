"""`agent tools`: the built-in tools and their parameters, as the prompt shows them or as native tool specs."""
from __future__ import annotations

import argparse
import json

from agent.cli.options import builtin_tools


def tools_command(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="agent tools", description="List the tools and their parameters.")
    parser.add_argument("--json", action="store_true", help="print the native tool specs as JSON")
    args = parser.parse_args(argv)
    registry = builtin_tools(".")
    print(json.dumps(registry.openai_tools(), indent=2) if args.json else registry.describe())
    return 0
