"""Where settings and the user's files come from: the process environment, ./.env and the user's configuration
file (read, never loaded into the process), and the user's folders for configuration, cache and data."""
from __future__ import annotations

import io
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from agent.config import ConfigError, Environment

MAX_SETTINGS_BYTES = 1_000_000  # of a dotenv file: past it, it is no settings file


def environment() -> Environment:
    """The process environment, then ./.env, then the user's configuration file (both read with python-dotenv,
    never loaded into the process). ./.env's ${VARIABLES} are not expanded: a cloned repository's file could
    otherwise copy your key (AGENT_API_KEY=${OPENAI_API_KEY}) to sit beside its own base URL."""
    return Environment(os.environ, read_settings(Path.cwd() / ".env", interpolate=False),
                       read_settings(config_file(os.environ)))


def read_settings(path: Path, interpolate: bool = True) -> dict:
    """The settings of a dotenv-format file; none when it does not exist (or is no regular file: a FIFO, a
    device); a file past MAX_SETTINGS_BYTES is a ConfigError."""
    from dotenv import dotenv_values

    if not path.is_file():
        return {}
    try:
        with open(path, "rb") as file:
            data = file.read(MAX_SETTINGS_BYTES + 1)
        if len(data) > MAX_SETTINGS_BYTES:
            raise ConfigError(f"{path} is larger than {MAX_SETTINGS_BYTES:,} bytes, which is no settings file; "
                              "fix or remove it")
        return dotenv_values(stream=io.StringIO(data.decode("utf-8")), interpolate=interpolate)
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"cannot read {path} ({error}); fix or remove the file") from error


def trusted_only(env: Environment | Mapping[str, str]) -> dict:
    """The settings of the environment and your configuration file, without ./.env's: for what a cloned
    repository's file may not choose (where files are written, which model file is loaded). A plain mapping is
    the environment alone."""
    return {**env.user, **env.process} if isinstance(env, Environment) else dict(env)


def trusted(env: Environment, name: str) -> str | None:
    return trusted_only(env).get(name)


def config_file(env: Mapping[str, str]) -> Path:
    """The user's configuration file, in the platform's folder for them (XDG_CONFIG_HOME on Linux)."""
    return _user_folder(env, ("APPDATA", "Roaming"), ("XDG_CONFIG_HOME", ".config")) / "config.env"


def probe_cache(env: Mapping[str, str]) -> Path:
    """Where `agent probe` keeps what it found per endpoint and model: the user's cache folder (XDG_CACHE_HOME
    on Linux)."""
    return _user_folder(env, ("LOCALAPPDATA", "Local"), ("XDG_CACHE_HOME", ".cache")) / "probes.json"


def data_dir(env: Mapping[str, str]) -> Path:
    """The user's folder for what the agent keeps (sessions, the chat's line history): XDG_DATA_HOME on Linux."""
    return _user_folder(env, ("LOCALAPPDATA", "Local"), ("XDG_DATA_HOME", ".local/share"))


def sessions_dir(env: Environment) -> Path:
    """AGENT_SESSIONS_DIR from the environment or the user's configuration file, never from ./.env (a cloned
    repository's file must not choose where conversations are kept); else the data folder's sessions/."""
    chosen = env.process.get("AGENT_SESSIONS_DIR") or env.user.get("AGENT_SESSIONS_DIR")
    return Path(chosen).expanduser() if chosen else data_dir(env.process) / "sessions"


def logs_dir(env: Environment) -> Path:
    """AGENT_LOGS_DIR from the environment or the user's configuration file, never from ./.env (as for
    sessions); else the data folder's logs/."""
    chosen = env.process.get("AGENT_LOGS_DIR") or env.user.get("AGENT_LOGS_DIR")
    return Path(chosen).expanduser() if chosen else data_dir(env.process) / "logs"


def _user_folder(env: Mapping[str, str], windows: tuple[str, str], unix: tuple[str, str]) -> Path:
    """This project's folder in one of the user's platform folders: (variable, default under AppData) on
    Windows, Application Support on macOS, (variable, default under ~) elsewhere."""
    if sys.platform == "win32":
        base = Path(env.get(windows[0]) or Path.home() / "AppData" / windows[1])
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support"
    else:
        base = Path(env.get(unix[0]) or Path.home() / unix[1])
    return base / "prompt-protocol-agent"
