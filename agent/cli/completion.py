"""`agent completion bash|zsh`: a shell completion script, generated from the commands' own parsers."""
from __future__ import annotations

import argparse

from agent.cli.arguments import Parser

SCRIPT = """# agent completion for {shell}: eval "$(agent completion {shell})" in your shell's rc file
{prelude}_agent() {{
    local cur=${{COMP_WORDS[COMP_CWORD]}} command="" word
    for word in "${{COMP_WORDS[@]:1:COMP_CWORD-1}}"; do
        case "$word" in {names}) command=$word; break;; --) break;; esac
    done
    case "$command" in
{cases}
        *) COMPREPLY=($(compgen -W "{commands} {run}" -- "$cur"));;
    esac
}}
complete -o default -F _agent agent
"""


def completion_command(argv: list[str]) -> int:
    parser = Parser(prog="agent completion", description="Print a completion script for bash or zsh.")
    parser.add_argument("shell", choices=["bash", "zsh"])
    print(script(parser.parse_args(argv).shell), end="")
    return 0


def script(shell: str) -> str:
    from agent.cli import COMMANDS
    from agent.cli.chat import chat_parser
    from agent.cli.config import KEYS
    from agent.cli.eval import eval_parser
    from agent.cli.logs import logs_parser
    from agent.cli.models import models_parser
    from agent.cli.probe import probe_parser
    from agent.cli.run import run_parser
    from agent.cli.serve import serve_parser
    from agent.cli.tools import tools_parser

    parsers = {"chat": chat_parser(), "sessions": ["rm", "--json"], "eval": eval_parser(), "tools": tools_parser(),
               "models": models_parser(), "probe": probe_parser(), "config": ["path"], "keys": ["set", *KEYS],
               "completion": ["bash", "zsh"], "logs": ["show", *_options(logs_parser())], "serve": serve_parser()}
    cases = "\n".join(f'        {name}) COMPREPLY=($(compgen -W "{" ".join(_options(p))}" -- "$cur"));;'
                      for name, p in parsers.items())
    prelude = "autoload -U +X bashcompinit && bashcompinit\n" if shell == "zsh" else ""
    return SCRIPT.format(shell=shell, prelude=prelude, names="|".join(COMMANDS), cases=cases,
                         commands=" ".join(COMMANDS), run=" ".join(_options(run_parser())))


def _options(parser) -> list[str]:
    if isinstance(parser, list):
        return parser
    return sorted(o for action in parser._actions for o in action.option_strings
                  if o.startswith("--") and action.help != argparse.SUPPRESS)
