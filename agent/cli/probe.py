"""`agent probe`: what the endpoint supports (native tool calls, replies constrained by a JSON Schema) and the
arm it recommends; and `--protocol auto`, which uses that recommendation, kept per base URL and model in the
user's cache folder."""
from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timezone

from agent.cli import EXIT_CODES
from agent.cli.arguments import Parser
from agent.cli.environment import environment, probe_cache
from agent.cli.setup import add_model_options, choose_endpoint, interrupts_deferred
from agent.config import DEFAULT_BASE_URL, Endpoint, Environment
from agent.models import ModelError
from agent.evaluation.probe import Probe, probe
from agent.tools.files import atomic_write

LOCAL_ARM = "prompt-constrained"  # the embedded model: its grammar constrains every reply, nothing to ask
MAX_CACHE_BYTES = 1024 * 1024


def probe_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="agent probe", description="Ask the endpoint, with two cheap requests, whether it "
                    "returns well-formed native tool calls and honours response_format with a JSON Schema; print "
                    "what it found and the arm it recommends (what --protocol auto uses).")
    parser.add_argument("--json", action="store_true", help="print what was found as JSON")
    add_model_options(parser)
    return parser


def probe_command(argv: list[str]) -> int:
    args = probe_parser().parse_args(argv)
    env = environment()
    endpoint = choose_endpoint(args, env)
    if endpoint is None:
        found = None
    else:
        try:
            found = probe_endpoint(args, endpoint)
        except ModelError as error:
            print(f"agent probe: {error}", file=sys.stderr)
            return EXIT_CODES["model_error"]
        remember(env, endpoint, found)
    if args.json:
        print(json.dumps(found.as_dict() if found else {"backend": "local", "arm": LOCAL_ARM}))
    elif found is None:
        print("the embedded local model: replies are constrained by a grammar, nothing to probe\n"
              f"recommended arm: {LOCAL_ARM}")
    else:
        print(report(found))
    return 0


def report(found: Probe) -> str:
    mark = {True: "yes", False: "no "}
    return (f"native tool calls (tools):          {mark[found.native]}  {found.native_detail}\n"
            f"constrained replies (json_schema):  {mark[found.constrained]}  {found.constrained_detail}\n"
            f"recommended arm: {found.arm}  (agent eval --arm {found.arm} ... compares it with the others)")


def probe_endpoint(args: argparse.Namespace, endpoint: Endpoint) -> Probe:
    with interrupts_deferred():
        from agent.models.openai_compatible import OpenAIModel

    model = OpenAIModel(endpoint.model, base_url=endpoint.base_url, api_key=endpoint.api_key,
                        timeout=args.timeout, temperature=args.temperature)
    return probe(model)


def cache_key(endpoint: Endpoint) -> str:
    return f"{endpoint.base_url or DEFAULT_BASE_URL} {endpoint.model}"


def _read_cache(env: Environment) -> dict:
    path = probe_cache(env.process)
    try:
        if path.is_file() and path.stat().st_size <= MAX_CACHE_BYTES:
            data = json.loads(path.read_text(encoding="utf-8"))
            return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        pass  # a cache that cannot be read is probed afresh and rewritten
    return {}


def remember(env: Environment, endpoint: Endpoint, found: Probe) -> None:
    path = probe_cache(env.process)
    cache = _read_cache(env)
    cache[cache_key(endpoint)] = {**found.as_dict(), "probed": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, json.dumps(cache, indent=2) + "\n")
    except OSError as error:
        print(f"agent: note: cannot keep the probe's result in {path} ({error})", file=sys.stderr)


def recalled(env: Environment, endpoint: Endpoint) -> Probe | None:
    entry = _read_cache(env).get(cache_key(endpoint))
    try:
        return Probe.from_dict(entry) if isinstance(entry, dict) else None
    except (KeyError, TypeError):
        return None


def auto_arm(args: argparse.Namespace, env: Environment, endpoint: Endpoint | None) -> str:
    """The arm `--protocol auto` means here: prompt-constrained for the local model, else the endpoint's
    recommendation, probed once and then recalled (``--reprobe`` probes again)."""
    if endpoint is None:
        return LOCAL_ARM
    found = None if getattr(args, "reprobe", False) else recalled(env, endpoint)
    if found is None:
        found = probe_endpoint(args, endpoint)  # a ModelError: the endpoint does not answer, exit 3
        remember(env, endpoint, found)
        print(f"agent: probed {endpoint.base_url or DEFAULT_BASE_URL} ({endpoint.model}): using the {found.arm} "
              "arm (`agent probe` says why; --reprobe asks again)", file=sys.stderr)
    return found.arm


def settle_auto(args: argparse.Namespace, env: Environment) -> Endpoint | None:
    """For `agent` and `agent chat`: replace ``--protocol auto`` by the protocol (and --constrain) it means; the
    endpoint, chosen once, is returned for `resolve`."""
    endpoint = choose_endpoint(args, env)
    arm = auto_arm(args, env, endpoint)
    args.protocol = "native" if arm == "native" else "prompt"
    if args.constrain is None and args.protocol == "prompt":
        args.constrain = arm == "prompt-constrained"
    return endpoint
