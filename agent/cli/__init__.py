"""The command line: the composition root, the one place that reads the environment and puts the pieces together.

One module per command: run.py (`agent TASK`), tools.py (`agent tools`), eval.py (`agent eval`); options.py
holds what they share. A command's module is imported when it runs, so Ctrl-C at start-up is handled like later.
"""
from __future__ import annotations

import sys

from agent.config import ConfigError

EXIT_CODES = {"final": 0, "model_error": 3, "step_limit": 4, "format_errors": 4, "loop": 4, "error": 4,
              "interrupted": 130}
USAGE_ERROR = 2


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    for stream in (sys.stdout, sys.stderr):  # text that cannot be encoded is shown replaced, not a crash
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="replace")
    try:
        if argv[:1] == ["tools"]:
            from agent.cli.tools import tools_command
            return tools_command(argv[1:])
        if argv[:1] == ["eval"]:
            from agent.cli.eval import eval_command
            return eval_command(argv[1:])
        from agent.cli.run import run_command
        return run_command(argv)
    except ConfigError as error:
        print(f"agent: {error}", file=sys.stderr)
        return USAGE_ERROR
    except KeyboardInterrupt:
        print("agent: interrupted", file=sys.stderr)
        return EXIT_CODES["interrupted"]
