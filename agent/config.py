"""The loop's settings, and where the endpoint settings come from: flags first, then the process environment,
then ./.env (the command line reads them and passes them here)."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

DEFAULT_BASE_URL = "https://api.openai.com/v1"  # where an endpoint with a key and no base URL goes
OPENAI_DEFAULT_MODEL = "gpt-4.1-mini"  # the model for OpenAI's own endpoint when none is named


class ConfigError(Exception):
    """A setting is missing or wrong; the message says which flag or variable to set."""


@dataclass
class Settings:
    """The loop's limits; these defaults are the command line's too."""

    max_steps: int = 15  # steps that run tools
    max_reasks: int = 3  # re-asks in a row; the next unusable reply ends the run
    max_output_chars: int = 4000  # per tool result; head and tail are kept
    max_history_chars: int | None = None  # older tool results are dropped beyond this; None: no limit
    context_window: int | None = None  # the model's, in tokens: past a share of it, older steps are summarised


@dataclass(frozen=True)
class Endpoint:
    model: str
    base_url: str | None = None
    api_key: str | None = None
    note: str | None = None  # something the user should know, e.g. that a key was held back
    chosen_by: str | None = None  # the variable that chose this endpoint when no flag did, e.g. OPENAI_API_KEY


class Environment(Mapping):
    """The process environment over the values of a ./.env file, over those of the user's configuration file:
    the first that has a setting wins.

    Read it like a dict for settings that are not secrets; the endpoint is resolved source by source.
    """

    def __init__(self, process: Mapping[str, str], dotenv: Mapping[str, str | None] | None = None,
                 user: Mapping[str, str | None] | None = None):
        self.process = process
        self.dotenv = {k: v for k, v in (dotenv or {}).items() if v is not None}
        self.user = {k: v for k, v in (user or {}).items() if v is not None}

    def _merged(self) -> dict:
        return {**self.user, **self.dotenv, **self.process}

    def __getitem__(self, name: str) -> str:
        return self._merged()[name]

    def __iter__(self):
        return iter(self._merged())

    def __len__(self) -> int:
        return len(self._merged())


def resolve_endpoint(env: Mapping[str, str], base_url: str | None = None, api_key: str | None = None,
                     model: str | None = None, need_model: bool = True) -> Endpoint | None:
    """The OpenAI-compatible endpoint to use, or None when none is configured at all.

    Each setting comes from the first source that has it: flags, the process environment, ./.env, the user's
    configuration file (AGENT_* before OPENAI_* within one source). A key is sent only to a base URL from a
    source at least as trusted as the key's own, trusted in the order flags, environment, the user's file,
    ./.env: a .env file (which may have come with a cloned repository) cannot redirect your key to its server.
    """
    if isinstance(env, Environment):
        process, dotenv, user = env.process, env.dotenv, env.user
    else:
        process, dotenv, user = env, {}, {}
    flags = {"AGENT_BASE_URL": base_url, "AGENT_API_KEY": api_key, "AGENT_MODEL": model}
    sources = [_Source("--flags", flags, 4), _Source("the environment", process, 3), _Source("./.env", dotenv, 1),
               _Source("your configuration file", user, 2)]
    base_url, url_source = _pick(sources, "AGENT_BASE_URL", "OPENAI_BASE_URL")
    chosen_by = _name(sources, "AGENT_BASE_URL", "OPENAI_BASE_URL", "AGENT_API_KEY", "OPENAI_API_KEY")
    trusted = [s for s in sources if s.trust <= url_source.trust] if base_url else sources
    api_key, _ = _pick(trusted, "AGENT_API_KEY", "OPENAI_API_KEY")
    held_back, key_source = _pick(sources, "AGENT_API_KEY", "OPENAI_API_KEY")
    model, _ = _pick(sources, "AGENT_MODEL")
    if not (base_url or held_back):
        if model:
            raise ConfigError(f"model {model!r} is set but no endpoint: set AGENT_BASE_URL (or --base-url) "
                              "for a server, or AGENT_API_KEY (or --api-key) for OpenAI")
        return None
    notes = []
    if (url_source if base_url else key_source).name == "./.env":
        notes.append(f"the endpoint {base_url or DEFAULT_BASE_URL} is chosen by {chosen_by}, a file of this folder "
                     "that may have come with a cloned repository: the task and what the tools read go there; pass "
                     "--base-url or --local to choose")
    if held_back and held_back != api_key:
        notes.append(f"the API key from {key_source.name} is not sent to {base_url}, which comes from "
                     f"{url_source.name}; pass --base-url, or set the key in {url_source.name} too")
    if base_url:
        check_base_url(base_url, url_source.name)
    if api_key and not (api_key.isascii() and api_key.isprintable() and " " not in api_key):
        raise ConfigError("the API key holds characters an HTTP header cannot carry (spaces, control or non-ASCII "
                          "characters); check --api-key / AGENT_API_KEY")
    if not model and base_url and need_model:
        raise ConfigError(f"no model named for {base_url}{_because(chosen_by)}: pass --model NAME (`agent models` "
                          "lists what it serves) or set AGENT_MODEL; or pass --local for the embedded model")
    if not model and not need_model:
        model = ""
    elif not model:
        model = OPENAI_DEFAULT_MODEL
        notes.append(f"using OpenAI's {model}{_because(chosen_by)}; pass --model NAME for another, "
                     "or --local for the embedded model")
    return Endpoint(model=model, base_url=base_url, api_key=api_key, note="; ".join(notes) or None,
                    chosen_by=chosen_by)


def _because(variable: str | None) -> str:
    return f" (chosen because {variable} is set)" if variable else ""


def _name(sources: list[_Source], *names: str) -> str | None:
    """The variable among ``names`` that is set, when no flag set any of them."""
    if any(sources[0].values.get(name) for name in names):
        return None
    for source in sources[1:]:
        for name in names:
            if source.values.get(name):
                return name if source.name == "the environment" else f"{name} in {source.name}"
    return None


def check_base_url(url: str, source: str = "--base-url") -> None:
    try:
        parts = urlsplit(url)
        valid = parts.scheme in ("http", "https") and bool(parts.hostname) and parts.port != 0
    except ValueError:  # a port that is not a number, a bracketed host that is not an address
        valid = False
    if not valid or any(c.isspace() or not c.isprintable() for c in url):
        raise ConfigError(f"base URL {url!r} (from {source}) is not an http:// or https:// URL; "
                          "pass one like --base-url http://localhost:11434/v1")


@dataclass(frozen=True)
class _Source:
    name: str
    values: Mapping[str, str | None]
    trust: int  # a key goes only to a base URL from a source at least this trusted


_NOWHERE = _Source("nowhere", {}, 0)  # where a setting that is not set comes from


def _pick(sources: list[_Source], *names: str) -> tuple[str | None, _Source]:
    """The first value set for one of ``names``, taking the sources in order, and its source (_NOWHERE if none)."""
    for source in sources:
        for name in names:
            if source.values.get(name):
                return source.values[name], source
    return None, _NOWHERE
