"""Where the endpoint settings come from: flags first, then the environment."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping


DEFAULT_BASE_URL = "https://api.openai.com/v1"  # where an endpoint with a key and no base URL goes


class ConfigError(Exception):
    """A setting is missing or wrong; the message says which flag or variable to set."""


@dataclass(frozen=True)
class Endpoint:
    model: str
    base_url: str | None = None
    api_key: str | None = None


def first(*values: str | None) -> str | None:
    return next((v for v in values if v), None)


def resolve_endpoint(env: Mapping[str, str], base_url: str | None = None, api_key: str | None = None,
                     model: str | None = None) -> Endpoint | None:
    """The OpenAI-compatible endpoint to use, or None when none is configured at all."""
    base_url = first(base_url, env.get("AGENT_BASE_URL"), env.get("OPENAI_BASE_URL"))
    api_key = first(api_key, env.get("AGENT_API_KEY"), env.get("OPENAI_API_KEY"))
    model = first(model, env.get("AGENT_MODEL"))
    if not (base_url or api_key):
        if model:
            raise ConfigError(f"model {model!r} is set but no endpoint: set AGENT_BASE_URL (or --base-url) "
                              "for a server, or AGENT_API_KEY (or --api-key) for OpenAI")
        return None
    if not model:
        raise ConfigError("no model set: pass --model NAME or set AGENT_MODEL")
    return Endpoint(model=model, base_url=base_url, api_key=api_key)
