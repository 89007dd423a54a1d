"""`agent serve`: an OpenAI-compatible endpoint in front of an upstream model (or the embedded one) that answers
requests with tools through the prompt protocol; uvicorn runs agent.serve.app."""
from __future__ import annotations

import argparse
import ipaddress
import socket
import sys
from functools import partial

from agent.cli.arguments import Parser, positive_float, positive_int, temperature
from agent.cli.environment import environment, trusted
from agent.cli.setup import DEFAULTS, TIMEOUT, build_model, choose_endpoint, local_model
from agent.config import ConfigError
from agent.models.local_files import BUILT_IN

HOST, PORT = "127.0.0.1", 8765
CLIENT_TIMEOUT = 30.0  # seconds for a request's headers, then for its body
KEEP_ALIVE = 5  # seconds an idle connection stays open between requests (uvicorn's timeout_keep_alive)
MAX_CONNECTIONS = 100
INSTALL = "agent serve needs starlette and uvicorn, which the `serve` extra installs: pip install '.[serve]' " \
          "in the project folder"


def serve_parser() -> Parser:
    parser = Parser(prog="agent serve", description=(
        "Serve an OpenAI-compatible endpoint (POST /v1/chat/completions, GET /v1/models) that gives the upstream "
        "model tool calling: a request with tools is answered through the prompt protocol (validated, re-asked "
        "when malformed) as standard tool_calls; one without tools is passed on unchanged."))
    server = parser.add_argument_group("server")
    server.add_argument("--host", default=HOST, help=f"address to listen on, default {HOST} (this machine only)")
    server.add_argument("--port", type=port, default=PORT, help=f"default {PORT}; 0 picks a free one")
    server.add_argument("--api-key", dest="client_key", metavar="KEY",
                        help="clients must send this key as a bearer token (env AGENT_SERVE_API_KEY)")
    server.add_argument("--max-body", type=positive_int, default=8 * 2**20, metavar="BYTES",
                        help="largest request body taken, default 8 MiB")
    server.add_argument("--client-timeout", type=positive_float, default=CLIENT_TIMEOUT, metavar="SECONDS",
                        help=f"for a request's headers to arrive, then for its body, default {CLIENT_TIMEOUT:g} "
                             f"(an idle connection closes after {KEEP_ALIVE} s)")
    server.add_argument("--max-connections", type=positive_int, default=MAX_CONNECTIONS, metavar="N",
                        help=f"connections open at once; one more is answered 503, default {MAX_CONNECTIONS}")
    upstream = parser.add_argument_group("upstream model")
    upstream.add_argument("--upstream-url", "--base-url", dest="base_url",
                          help="the OpenAI-compatible endpoint to serve (env AGENT_BASE_URL, OPENAI_BASE_URL); "
                               "default: the embedded local model")
    upstream.add_argument("--upstream-key", dest="api_key", metavar="KEY",
                          help="the upstream's API key (env AGENT_API_KEY, OPENAI_API_KEY); never sent to clients")
    upstream.add_argument("-m", "--model", help="the upstream's model name (env AGENT_MODEL)")
    upstream.add_argument("--timeout", type=positive_float, default=TIMEOUT, metavar="SECONDS",
                          help=f"for a whole upstream request, default {TIMEOUT:g}")
    upstream.add_argument("--temperature", type=temperature, help="sent upstream when the client sends none")
    upstream.add_argument("--local", action="store_true", help="serve the embedded local model")
    upstream.add_argument("--model-path", help="a GGUF file for the local model (env AGENT_MODEL_PATH)")
    upstream.add_argument("--local-model", choices=BUILT_IN, help="the built-in local model (env AGENT_LOCAL_MODEL)")
    upstream.add_argument("--constrain", action=argparse.BooleanOptionalAction,
                          help="constrain tool replies to the action schema (as tool_choice narrows it): "
                               "response_format for servers, a grammar for the local model; default: on for the "
                               "local model only")
    upstream.add_argument("--max-reasks", type=positive_int, default=DEFAULTS.max_reasks, metavar="N",
                          help=f"re-asks of a malformed reply before answering 502, default {DEFAULTS.max_reasks}")
    return parser


def port(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be 0 to 65535, got {value}")
    return value


def serve_command(argv: list[str]) -> int:
    args = serve_parser().parse_args(argv)
    try:
        import uvicorn

        from agent.serve.app import create_app
        from agent.serve.connections import BoundedHttp
    except ImportError as error:
        raise ConfigError(f"{INSTALL} ({error})") from None
    env = environment()
    client_key = args.client_key or env.get("AGENT_SERVE_API_KEY")
    if client_key is not None and not (client_key.isascii() and client_key.isprintable() and client_key.strip()
                                       and " " not in client_key):
        raise ConfigError("--api-key / AGENT_SERVE_API_KEY must be printable ASCII without spaces")
    endpoint = choose_endpoint(args, env)
    listener = _listen(args.host, args.port)  # before the model loads: a taken port is a usage error at once
    model_path = (args.model_path or trusted(env, "AGENT_MODEL_PATH")) if endpoint is None else None
    model = build_model(args, endpoint, env, model_path)
    name = endpoint.model if endpoint else (local_model(args, env) or "local")
    constrain = args.constrain if args.constrain is not None else endpoint is None
    app = create_app(model, name, api_key=client_key, constrain=constrain, max_reasks=args.max_reasks,
                     max_body=args.max_body, secrets=(endpoint.api_key,) if endpoint and endpoint.api_key else (),
                     client_timeout=args.client_timeout, threads=args.max_connections)
    host, bound = listener.getsockname()[:2]
    upstream = endpoint.base_url or "OpenAI" if endpoint else "the embedded local model"
    print(f"agent serve: listening on http://{_url_host(host)}:{bound}/v1 (model {name} at {upstream}"
          f"{', replies constrained' if constrain else ''}; Ctrl-C stops)", file=sys.stderr, flush=True)
    if not client_key and not _loopback(args.host):
        print(f"agent serve: warning: {args.host} is reachable from other machines and no --api-key is set: "
              "anyone who can reach it can use the upstream model", file=sys.stderr, flush=True)
    http = partial(BoundedHttp, header_timeout=args.client_timeout, max_connections=args.max_connections)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, timeout_graceful_shutdown=5,
                                           http=http,  # type: ignore[arg-type]  # uvicorn takes any factory
                                           timeout_keep_alive=KEEP_ALIVE,
                                           limit_concurrency=args.max_connections + 1))
    server.run(sockets=[listener])
    return 0


def _listen(host: str, port: int) -> socket.socket:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, kind, proto, _, address = infos[0]
        listener = socket.socket(family, kind, proto)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(address)
        listener.listen(128)
    except OSError as error:
        raise ConfigError(f"cannot listen on {host}:{port} ({error.strerror or error}); pass another --port "
                          "or --host") from None
    listener.set_inheritable(True)
    return listener


def _loopback(host: str) -> bool:
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
