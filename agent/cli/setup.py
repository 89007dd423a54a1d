"""The model and the loop's settings, as the model options and the environment choose them: resolved once into a
Setup (`agent`, `agent chat`, `agent eval`), the model built last; and the model alone (`agent serve`)."""
from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Literal
from urllib.parse import urlsplit, urlunsplit

from agent.cli.arguments import positive_float, positive_int, temperature
from agent.cli.environment import trusted, trusted_only
from agent.config import (DEFAULT_BASE_URL, OPENAI_DEFAULT_MODEL, ConfigError, Endpoint, Environment, Settings,
                          resolve_endpoint)
from agent.models import Model
from agent.models.local_files import BUILT_IN, DEFAULT

if TYPE_CHECKING:  # imported when a command needs them: `agent --help` stays quick
    from agent.protocols import ActionProtocol

PROTOCOLS = ("prompt", "native")
ARMS = ("prompt", "prompt-constrained", "native")  # what `agent eval` compares: the prompt protocol with and
# without constrained decoding, and native tool calls
DEFAULTS = Settings()
TIMEOUT = 60.0  # seconds for a whole request
LOCAL_HISTORY_CHARS = 18_000  # about 6,000 tokens: leaves room in the local model's 8,192 for the reply

MakeProtocol = Callable[..., "ActionProtocol"]  # make(registry, **options): a protocol for these tools


@dataclass(frozen=True)
class Setup:
    """The command line and the environment, resolved once: the model, the loop's settings, and a protocol
    factory ``make(registry)`` for each protocol asked for, by label."""

    endpoint: Endpoint | None  # None: the embedded local model
    model: Model
    settings: Settings
    constrain: bool  # prompt-protocol replies constrained by the action schema
    protocols: dict[str, MakeProtocol]
    model_path: str | None = None  # the local model's own GGUF file, if one was given
    local_model: str | None = None  # the built-in local model chosen (--local-model, AGENT_LOCAL_MODEL), if one was

    @property
    def local(self) -> bool:
        return self.endpoint is None

    @property
    def label(self) -> str:
        """The model's name, as a session and the run log record it."""
        if self.endpoint is not None:
            return self.endpoint.model
        if self.model_path:
            return f"local:{Path(self.model_path).name}"
        from agent.models.local_files import built_in

        return f"local:{built_in(self.local_model).choice}"

    def describe(self) -> dict:
        """What we know about the model, never the key."""
        if self.endpoint is None:
            return {"backend": "local", "model_path": self.model_path}
        return {"backend": "openai-compatible", "base_url": self.endpoint.base_url or DEFAULT_BASE_URL,
                "model": self.endpoint.model}


def add_model_options(parser: argparse.ArgumentParser) -> None:
    """Options that choose and tune the model and the protocol, shared by `agent` and `agent eval`."""
    group = parser.add_argument_group("model")
    group.add_argument("--base-url", help="OpenAI-compatible endpoint (env AGENT_BASE_URL, OPENAI_BASE_URL)")
    group.add_argument("--api-key", help="API key (env AGENT_API_KEY, OPENAI_API_KEY); not needed for local servers")
    group.add_argument("-m", "--model", help="model name (env AGENT_MODEL; for OpenAI's own endpoint, default "
                                             f"{OPENAI_DEFAULT_MODEL})")
    group.add_argument("--timeout", type=positive_float, default=TIMEOUT, metavar="SECONDS",
                       help=f"for a whole request, default {TIMEOUT:g}")
    group.add_argument("--temperature", type=temperature, help="sent only when given")
    group.add_argument("--local", action="store_true", help=f"use the embedded local model (the `{DEFAULT.extra}` "
                                                            "extra); implied by --local-model and --model-path")
    group.add_argument("--model-path", help="a GGUF file for the local model (env AGENT_MODEL_PATH)")
    models = " or ".join(f"{m.choice} ({'default; ' if m is DEFAULT else ''}{m.shipped()})" for m in BUILT_IN.values())
    group.add_argument("--local-model", choices=BUILT_IN,
                       help=f"the built-in local model: {models} (env AGENT_LOCAL_MODEL); --model-path overrides it")
    group.add_argument("--constrain", action=argparse.BooleanOptionalAction,
                       help="constrain replies to the action schema (prompt protocol): sent as response_format "
                            "to servers, a grammar for the local model; default: on for the local model only")
    limits = parser.add_argument_group("limits")
    limits.add_argument("--max-steps", type=positive_int, default=DEFAULTS.max_steps, metavar="N",
                        help=f"tool steps, default {DEFAULTS.max_steps}")
    limits.add_argument("--max-reasks", type=positive_int, default=DEFAULTS.max_reasks, metavar="N",
                        help="re-asks of unusable replies in a row; the next unusable reply ends the run, "
                             f"default {DEFAULTS.max_reasks}")
    limits.add_argument("--max-output", type=positive_int, default=DEFAULTS.max_output_chars, metavar="CHARS",
                        help=f"tool output kept per call, default {DEFAULTS.max_output_chars}")
    limits.add_argument("--context-window", type=positive_int, metavar="TOKENS",
                        help="the model's context window: past 3/4 of it, the older steps' long results are replaced "
                             "by the model's notes of them, and the oldest steps by a brief (the task, the plan and "
                             "the latest steps are kept); default: off")
    limits.add_argument("--max-history", type=positive_int, metavar="CHARS",
                        help="drop the oldest tool results beyond this many characters of conversation; "
                             f"default: {LOCAL_HISTORY_CHARS} for the local model without --context-window, "
                             "no limit otherwise")


def resolve(args: argparse.Namespace, env: Environment, protocols: list[str], arms: list[str] | tuple[str, ...] = (),
            endpoint: Endpoint | None | Literal[False] = False) -> Setup:
    """The flags of `add_model_options` and the environment as one Setup, for the protocols named (prompt
    constrained by --constrain) and the ``arms`` named (each as it says); the model is built (the local one
    loaded) last, once everything else is known to be right. ``endpoint``: one already chosen (None: local)."""
    if args.constrain and "prompt" not in protocols:
        raise ConfigError("--constrain applies to the prompt protocol only; drop it or use --protocol prompt")
    chosen = choose_endpoint(args, env) if endpoint is False else endpoint
    local = chosen is None
    constrain = args.constrain if args.constrain is not None else local
    # the local model's small context: older results dropped, unless a brief is to replace them
    history = args.max_history or (LOCAL_HISTORY_CHARS if local and not args.context_window else None)
    settings = Settings(max_steps=args.max_steps, max_reasks=args.max_reasks, max_output_chars=args.max_output,
                        max_history_chars=history,
                        context_window=args.context_window)
    model_path = (args.model_path or trusted(env, "AGENT_MODEL_PATH")) if local else None
    factories = {**protocol_factories(protocols, constrain), **arm_factories(arms)}
    return Setup(chosen, build_model(args, chosen, env, model_path), settings, constrain, factories, model_path,
                 local_model(args, env) if local else None)


def choose_endpoint(args: argparse.Namespace, env: Environment, need_model: bool = True) -> Endpoint | None:
    """The endpoint the flags and the environment name; None means the embedded local model."""
    if args.local or args.local_model or args.model_path:  # naming a local model is asking for one
        return None
    endpoint = resolve_endpoint(env, args.base_url, args.api_key, args.model, need_model)
    if endpoint and endpoint.note:
        print(f"agent: note: {endpoint.note}", file=sys.stderr)
    return endpoint


def local_model(args: argparse.Namespace, env: Environment) -> str | None:
    """The built-in local model the flags or the environment name (None: the default one)."""
    return args.local_model or env.get("AGENT_LOCAL_MODEL")


@contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Ctrl-C held back until the block ends (it arrives right after). For the SDK's import: a KeyboardInterrupt
    raised inside pydantic's set-up can be swallowed ('Exception ignored in ...'), and the run went on as if
    nothing had been pressed."""
    if not hasattr(signal, "pthread_sigmask") or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def build_model(args: argparse.Namespace, endpoint: Endpoint | None, env: Environment,
                model_path: str | None) -> Model:
    """The OpenAI-compatible model for ``endpoint``; the embedded local model when there is none."""
    if endpoint is None:
        with interrupts_deferred():
            from agent.models.local import load_local_model
            from agent.models.local_files import cache_dir

        return load_local_model(model_path, temperature=args.temperature, cache=cache_dir(trusted_only(env)),
                                local_model=local_model(args, env))
    with interrupts_deferred():
        from agent.models.openai_compatible import OpenAIModel

    return OpenAIModel(endpoint.model, base_url=endpoint.base_url, api_key=endpoint.api_key,
                       timeout=args.timeout, temperature=args.temperature,
                       connections=getattr(args, "workers", None) or 1)


def protocol_factories(names: list[str], constrain: bool) -> dict[str, MakeProtocol]:
    """Label → factory; the prompt protocol is the arm "prompt-constrained" when its replies are constrained."""
    return arm_factories(["prompt-constrained" if name == "prompt" and constrain else name for name in names])


def arm_factories(arms: list[str] | tuple[str, ...]) -> dict[str, MakeProtocol]:
    """Arm → factory ``make(registry) -> protocol``: prompt, prompt-constrained (the same protocol, its replies
    constrained by the action schema, per call) and native."""
    from agent.protocols import NativeProtocol, PromptProtocol

    known: dict[str, MakeProtocol] = {"prompt": PromptProtocol, "native": NativeProtocol,
                                      "prompt-constrained": partial(PromptProtocol, constrain=True)}
    return {arm: known[arm] for arm in arms}


def url_without_secrets(url: str) -> str:
    """``url`` without what may hold a key: a user and password, a query string."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2], query="", fragment=""))
