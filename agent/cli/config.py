"""`agent config path` and `agent keys set NAME`: the user's configuration file, and API keys kept in it."""
from __future__ import annotations

import getpass
import os
import sys
from pathlib import Path

from agent.cli.arguments import Parser
from agent.cli.environment import config_file, read_settings
from agent.config import ConfigError

KEYS = {"openai": "OPENAI_API_KEY", "agent": "AGENT_API_KEY"}


def config_command(argv: list[str]) -> int:
    parser = Parser(prog="agent config", description="Where the user's configuration file is. It holds settings "
                    "like .env does (AGENT_MODEL=..., OPENAI_API_KEY=...), below flags, the environment and ./.env.")
    parser.add_argument("action", choices=["path"], help="path: print the file's path")
    parser.parse_args(argv)
    print(config_file(os.environ))
    return 0


def keys_command(argv: list[str]) -> int:
    parser = Parser(prog="agent keys", description="Store an API key in the user's configuration file, readable "
                                                   "by you only. The key is read from the terminal, or from stdin.")
    parser.add_argument("action", choices=["set"])
    parser.add_argument("name", choices=KEYS, help="openai: OPENAI_API_KEY; agent: AGENT_API_KEY")
    args = parser.parse_args(argv)
    key = read_key(args.name)
    path = config_file(os.environ)
    store(path, KEYS[args.name], key)
    print(f"agent keys: {KEYS[args.name]} saved in {path}", file=sys.stderr)
    return 0


def read_key(name: str) -> str:
    key = getpass.getpass(f"{name} API key: ") if sys.stdin.isatty() else sys.stdin.readline()
    key = key.strip()
    if not key:
        raise ConfigError("no key given; type or pipe it in: agent keys set openai")
    if not (key.isascii() and key.isprintable() and " " not in key):
        raise ConfigError("the key holds spaces, control or non-ASCII characters, which no HTTP header can carry")
    return key


def store(path: Path, variable: str, value: str) -> None:
    """Set ``variable`` in the file, keeping its other lines; the file and its folder are the user's only."""
    from agent.tools.files import atomic_write

    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    read_settings(path)  # a file that cannot be read is reported, not overwritten
    lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
    kept = [line for line in lines if line.split("=", 1)[0].strip().removeprefix("export ").strip() != variable]
    atomic_write(path, "\n".join([*kept, f"{variable}={value}"]) + "\n", mode=0o600)
