"""`agent models`: the models an endpoint serves, or the built-in local models."""
from __future__ import annotations

import sys

from agent.cli.arguments import Parser
from agent.cli.environment import environment
from agent.cli.setup import add_model_options, choose_endpoint, interrupts_deferred
from agent.models import ModelError


def models_parser() -> Parser:
    parser = Parser(prog="agent models", description="List the models the endpoint serves (GET /v1/models), "
                                                     "or the built-in local models.")
    add_model_options(parser)
    return parser


def models_command(argv: list[str]) -> int:
    args = models_parser().parse_args(argv)
    endpoint = choose_endpoint(args, environment(), need_model=False)
    if endpoint is None:
        from agent.models.local_files import BUILT_IN, DEFAULT

        for built in BUILT_IN.values():
            print(f"{built.choice}\t{built.title}{' (default)' if built is DEFAULT else ''}")
        return 0
    from agent.cli import EXIT_CODES
    with interrupts_deferred():
        from agent.models.openai_compatible import OpenAIModel

    model = OpenAIModel(endpoint.model, base_url=endpoint.base_url, api_key=endpoint.api_key, timeout=args.timeout)
    try:
        names = model.list_models()
    except ModelError as error:
        print(f"agent models: {error}", file=sys.stderr)
        return EXIT_CODES["model_error"]
    print("\n".join(names))
    return 0
