"""The loop's settings, and where the endpoint settings come from: flags first, then the process environment,
then ./.env (the command line reads them and passes them here)."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

DEFAULT_BASE_URL = "https://api.openai.com/v1"  # where an endpoint with a key and no base URL goes


class ConfigError(Exception):
    """A setting is missing or wrong; the message says which flag or variable to set."""


@dataclass
class Settings:
    """The loop's limits; these defaults are the command line's too."""

    max_steps: int = 15  # steps that run tools
    max_reasks: int = 3  # malformed replies in a row before giving up
    max_output_chars: int = 4000  # per tool result; head and tail are kept
    max_history_chars: int | None = None  # older tool results are dropped beyond this; None: no limit


@dataclass(frozen=True)
class Endpoint:
    model: str
    base_url: str | None = None
    api_key: str | None = None
    note: str | None = None  # something the user should know, e.g. that a key was held back


class Environment(Mapping):
    """The process environment over the values of a .env file: the process always wins.

    Read it like a dict for settings that are not secrets; the endpoint is resolved source by source.
    """

    def __init__(self, process: Mapping[str, str], dotenv: Mapping[str, str | None] | None = None):
        self.process = process
        self.dotenv = {k: v for k, v in (dotenv or {}).items() if v is not None}

    def __getitem__(self, name: str) -> str:
        return self.process[name] if name in self.process else self.dotenv[name]

    def __iter__(self):
        return iter({**self.dotenv, **self.process})

    def __len__(self) -> int:
        return len({**self.dotenv, **self.process})


def resolve_endpoint(env: Mapping[str, str], base_url: str | None = None, api_key: str | None = None,
                     model: str | None = None) -> Endpoint | None:
    """The OpenAI-compatible endpoint to use, or None when none is configured at all.

    Each setting comes from the most trusted source that has it (flags, the process environment, .env;
    AGENT_* before OPENAI_* within one source). A key is sent only to a base URL from a source at least
    as trusted as the key's own: a .env file cannot redirect a key from the environment to its server.
    """
    process, dotenv = (env.process, env.dotenv) if isinstance(env, Environment) else (env, {})
    sources = [("--flags", {"AGENT_BASE_URL": base_url, "AGENT_API_KEY": api_key, "AGENT_MODEL": model}),
               ("the environment", process), ("./.env", dotenv)]
    base_url, url_rank = _pick(sources, "AGENT_BASE_URL", "OPENAI_BASE_URL")
    trusted = sources[url_rank:] if base_url else sources
    api_key, _ = _pick(trusted, "AGENT_API_KEY", "OPENAI_API_KEY")
    held_back, key_rank = _pick(sources, "AGENT_API_KEY", "OPENAI_API_KEY")
    model, _ = _pick(sources, "AGENT_MODEL")
    if not (base_url or held_back):
        if model:
            raise ConfigError(f"model {model!r} is set but no endpoint: set AGENT_BASE_URL (or --base-url) "
                              "for a server, or AGENT_API_KEY (or --api-key) for OpenAI")
        return None
    note = None
    if held_back and held_back != api_key:
        note = (f"the API key from {sources[key_rank][0]} is not sent to {base_url}, which comes from "
                f"{sources[url_rank][0]}; pass --base-url, or set the key in {sources[url_rank][0]} too")
    if base_url:
        check_base_url(base_url, sources[url_rank][0])
    if api_key and not (api_key.isascii() and api_key.isprintable() and " " not in api_key):
        raise ConfigError("the API key holds characters an HTTP header cannot carry (spaces, control or non-ASCII "
                          "characters); check --api-key / AGENT_API_KEY")
    if not model:
        raise ConfigError("no model set: pass --model NAME or set AGENT_MODEL")
    return Endpoint(model=model, base_url=base_url, api_key=api_key, note=note)


def check_base_url(url: str, source: str = "--base-url") -> None:
    try:
        parts = urlsplit(url)
        valid = parts.scheme in ("http", "https") and bool(parts.hostname) and parts.port != 0
    except ValueError:  # a port that is not a number, a bracketed host that is not an address
        valid = False
    if not valid or any(c.isspace() or not c.isprintable() for c in url):
        raise ConfigError(f"base URL {url!r} (from {source}) is not an http:// or https:// URL; "
                          "pass one like --base-url http://localhost:11434/v1")


def _pick(sources: list[tuple[str, Mapping]], *names: str) -> tuple[str | None, int]:
    """The first value set for one of ``names``, taking the sources in order; and its source's index."""
    for rank, (_, values) in enumerate(sources):
        for name in names:
            if values.get(name):
                return values[name], rank
    return None, 0
