"""The command line: the composition root, the one place that reads the environment and puts the pieces together.

One module per command: run.py (`agent TASK`), chat.py (`agent chat`), sessions.py (`agent sessions`), tools.py
(`agent tools`), eval.py (`agent eval`), models.py (`agent models`), config.py (`agent config`, `agent keys`),
completion.py, logs.py (`agent logs`), probe.py (`agent probe`, `--protocol auto`), serve.py (`agent serve`).
What they share, one module per idea: arguments.py (the parser and the option types), environment.py (settings
and the user's folders), setup.py (the model and the settings, resolved once), toolbox.py (the tools a run
offers), servers.py (the MCP servers a command starts), approval.py (asking the user before a tool acts),
turns.py (a turn of `agent` and `agent chat`: the agent equipped, its events recorded, the result reported),
display.py (what a run shows on the terminal as it goes), eval_progress.py (`agent eval`'s progress), signals.py.
A command's module is imported when it runs, so Ctrl-C at start-up is handled like later.
"""
from __future__ import annotations

import importlib
import os
import sys

from agent.config import ConfigError
from agent.models import ModelError

EXIT_CODES = {"final": 0, "model_error": 3, "step_limit": 4, "format_errors": 4, "loop": 4, "error": 4,
              "interrupted": 130}
USAGE_ERROR = 2
# each command's module and function, imported when the command runs
HANDLERS = {"chat": ("agent.cli.chat", "chat_command"), "sessions": ("agent.cli.sessions", "sessions_command"),
            "tools": ("agent.cli.tools", "tools_command"), "eval": ("agent.cli.eval", "eval_command"),
            "models": ("agent.cli.models", "models_command"), "config": ("agent.cli.config", "config_command"),
            "keys": ("agent.cli.config", "keys_command"), "completion": ("agent.cli.completion", "completion_command"),
            "logs": ("agent.cli.logs", "logs_command"), "probe": ("agent.cli.probe", "probe_command"),
            "serve": ("agent.cli.serve", "serve_command")}
COMMANDS = (*HANDLERS, "help")
# options of `agent TASK` that take a value: the word after one is its value, not a command or the task
VALUE_OPTIONS = {"--protocol", "--workspace", "--trace", "--base-url", "--api-key", "--model", "-m", "--timeout",
                 "--temperature", "--model-path", "--local-model", "--max-steps", "--max-reasks", "--max-output",
                 "--max-history", "--system", "-s", "--tools", "--shell-timeout", "--memory", "--session",
                 "--context-window", "--mcp", "--mcp-timeout", "--output-schema"}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    for stream in (sys.stdout, sys.stderr):  # text that cannot be encoded is shown replaced, not a crash
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="replace")
    try:
        command, rest = split_command(argv)
        return dispatch(command, rest)
    except ConfigError as error:
        print(f"agent: {error}", file=sys.stderr)
        return USAGE_ERROR
    except ModelError as error:  # before any run: `--protocol auto` probing an endpoint that does not answer
        print(f"agent: {error}", file=sys.stderr)
        return EXIT_CODES["model_error"]
    except KeyboardInterrupt:
        print("agent: interrupted", file=sys.stderr)
        return EXIT_CODES["interrupted"]
    except BrokenPipeError:  # `agent tools --json | head`: the reader has all it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the exit flush does not fail again
        return 0


def split_command(argv: list[str]) -> tuple[str | None, list[str]]:
    """The command named by the first word that is neither an option nor an option's value, and the other
    words; no command (None) when that word is anything else, or comes after `--`: then it is the task."""
    index = 0
    while index < len(argv):
        word = argv[index]
        if word == "--":
            return None, argv
        if word.startswith("-") and word != "-":
            index += 2 if word in VALUE_OPTIONS else 1
            continue
        if word in COMMANDS:
            return word, argv[:index] + argv[index + 1:]
        return None, argv
    return None, argv


def dispatch(command: str | None, argv: list[str]) -> int:
    if command in HANDLERS:
        module, function = HANDLERS[command]
        return getattr(importlib.import_module(module), function)(argv)
    from agent.cli.run import run_command
    return run_command(["--help"] if command == "help" else argv)
