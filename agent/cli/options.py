"""What the commands share: the model and limit options and their resolution, once, into a Setup (`agent`,
`agent eval`); the tool options and the tools they choose, a Toolbox (`agent`, `agent tools`)."""
from __future__ import annotations

import argparse
import difflib
import math
import os
import signal
import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, Mapping

from agent.config import DEFAULT_BASE_URL, OPENAI_DEFAULT_MODEL, ConfigError, Endpoint, Environment, Settings, resolve_endpoint
from agent.models import Model
from agent.models.local_files import BUILT_IN, DEFAULT

if TYPE_CHECKING:  # imported when a command needs them: `agent --help` stays quick
    from agent.subagents import SubAgents
    from agent.tools import Memory, Plan, Registry

PROTOCOLS = ("prompt", "native")
ARMS = ("prompt", "prompt-constrained", "native")  # what `agent eval` compares: the prompt protocol with and
# without constrained decoding, and native tool calls
DEFAULTS = Settings()
TIMEOUT = 60.0  # seconds for a whole request
SHELL_TIMEOUT = 30.0  # seconds for one run_shell command
LOCAL_HISTORY_CHARS = 18_000  # about 6,000 tokens: leaves room in the local model's 8,192 for the reply


class Parser(argparse.ArgumentParser):
    """A usage error is one line with a hint (a near miss for a misspelt option), not the whole usage block."""

    def error(self, message: str):
        hint = ""
        if message.startswith("unrecognized arguments: "):
            word = message.split(": ", 1)[1].split()[0].split("=")[0]
            close = difflib.get_close_matches(word, list(self._option_string_actions), n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]}?" if close and word.startswith("-") else ""
        self.exit(2, f"{self.prog}: {message}{hint} (see {self.prog} --help)\n")


@dataclass(frozen=True)
class Setup:
    """The command line and the environment, resolved once: the model, the loop's settings, and a protocol
    factory ``make(registry)`` for each protocol asked for, by label."""

    endpoint: Endpoint | None  # None: the embedded local model
    model: Model
    settings: Settings
    constrain: bool  # prompt-protocol replies constrained by the action schema
    protocols: dict[str, Callable]
    model_path: str | None = None  # the local model's own GGUF file, if one was given

    @property
    def local(self) -> bool:
        return self.endpoint is None

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
                        help=f"re-asks of unusable replies in a row; the next unusable reply ends the run, default {DEFAULTS.max_reasks}")
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


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def positive_float(text: str) -> float:
    value = float(text)
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a number of seconds more than 0, got {text}")
    return value


def temperature(text: str) -> float:
    value = float(text)
    if not (0 <= value <= 2):
        raise argparse.ArgumentTypeError(f"must be a number from 0 to 2, got {text}")
    return value


def resolve(args: argparse.Namespace, env: Environment, protocols: list[str], arms: list[str] = (),
            endpoint: Endpoint | None | bool = False) -> Setup:
    """The flags of `add_model_options` and the environment as one Setup, for the protocols named (prompt
    constrained by --constrain) and the ``arms`` named (each as it says); the model is built (the local one
    loaded) last, once everything else is known to be right. ``endpoint``: one already chosen (None: local)."""
    if args.constrain and "prompt" not in protocols:
        raise ConfigError("--constrain applies to the prompt protocol only; drop it or use --protocol prompt")
    if endpoint is False:
        endpoint = choose_endpoint(args, env)
    local = endpoint is None
    constrain = args.constrain if args.constrain is not None else local
    # the local model's small context: older results dropped, unless a brief is to replace them
    history = args.max_history or (LOCAL_HISTORY_CHARS if local and not args.context_window else None)
    settings = Settings(max_steps=args.max_steps, max_reasks=args.max_reasks, max_output_chars=args.max_output,
                        max_history_chars=history,
                        context_window=args.context_window)
    model_path = (args.model_path or trusted(env, "AGENT_MODEL_PATH")) if local else None
    factories = {**protocol_factories(protocols, constrain), **arm_factories(arms)}
    return Setup(endpoint, build_model(args, endpoint, env, model_path), settings, constrain, factories, model_path)


def choose_endpoint(args: argparse.Namespace, env: Environment, need_model: bool = True) -> Endpoint | None:
    """The endpoint the flags and the environment name; None means the embedded local model."""
    if args.local or args.local_model or args.model_path:  # naming a local model is asking for one
        return None
    endpoint = resolve_endpoint(env, args.base_url, args.api_key, args.model, need_model)
    if endpoint and endpoint.note:
        print(f"agent: note: {endpoint.note}", file=sys.stderr)
    return endpoint


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
                                local_model=args.local_model or env.get("AGENT_LOCAL_MODEL"))
    with interrupts_deferred():
        from agent.models.openai_compatible import OpenAIModel

    return OpenAIModel(endpoint.model, base_url=endpoint.base_url, api_key=endpoint.api_key,
                       timeout=args.timeout, temperature=args.temperature,
                       connections=getattr(args, "workers", None) or 1)


def protocol_factories(names: list[str], constrain: bool) -> dict[str, Callable]:
    """Label → factory; the prompt protocol is the arm "prompt-constrained" when its replies are constrained."""
    return arm_factories(["prompt-constrained" if name == "prompt" and constrain else name for name in names])


def arm_factories(arms: list[str]) -> dict[str, Callable]:
    """Arm → factory ``make(registry) -> protocol``: prompt, prompt-constrained (the same protocol, its replies
    constrained by the action schema, per call) and native."""
    from agent.protocols import NativeProtocol, PromptProtocol

    known = {"prompt": PromptProtocol, "prompt-constrained": partial(PromptProtocol, constrain=True),
             "native": NativeProtocol}
    return {arm: known[arm] for arm in arms}


def environment() -> Environment:
    """The process environment, then ./.env, then the user's configuration file (both read with python-dotenv,
    never loaded into the process). ./.env's ${VARIABLES} are not expanded: a cloned repository's file could
    otherwise copy your key (AGENT_API_KEY=${OPENAI_API_KEY}) to sit beside its own base URL."""
    return Environment(os.environ, read_settings(Path.cwd() / ".env", interpolate=False),
                       read_settings(config_file(os.environ)))


def config_file(env) -> Path:
    """The user's configuration file, in the platform's folder for them (XDG_CONFIG_HOME on Linux)."""
    return _user_folder(env, ("APPDATA", "Roaming"), ("XDG_CONFIG_HOME", ".config")) / "config.env"


def probe_cache(env) -> Path:
    """Where `agent probe` keeps what it found per endpoint and model: the user's cache folder (XDG_CACHE_HOME
    on Linux)."""
    return _user_folder(env, ("LOCALAPPDATA", "Local"), ("XDG_CACHE_HOME", ".cache")) / "probes.json"


def data_dir(env) -> Path:
    """The user's folder for what the agent keeps (sessions, the chat's line history): XDG_DATA_HOME on Linux."""
    return _user_folder(env, ("LOCALAPPDATA", "Local"), ("XDG_DATA_HOME", ".local/share"))


def _user_folder(env, windows: tuple[str, str], unix: tuple[str, str]) -> Path:
    """This project's folder in one of the user's platform folders: (variable, default under AppData) on
    Windows, Application Support on macOS, (variable, default under ~) elsewhere."""
    if sys.platform == "win32":
        base = Path(env.get(windows[0]) or Path.home() / "AppData" / windows[1])
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support"
    else:
        base = Path(env.get(unix[0]) or Path.home() / unix[1])
    return base / "prompt-protocol-agent"


def trusted_only(env: Environment | Mapping[str, str]) -> dict:
    """The settings of the environment and your configuration file, without ./.env's: for what a cloned
    repository's file may not choose (where files are written, which model file is loaded). A plain mapping is
    the environment alone."""
    return {**env.user, **env.process} if isinstance(env, Environment) else dict(env)


def trusted(env: Environment, name: str) -> str | None:
    return trusted_only(env).get(name)


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


MAX_SETTINGS_BYTES = 1_000_000  # of a dotenv file: past it, it is no settings file


def read_settings(path: Path, interpolate: bool = True) -> dict:
    """The settings of a dotenv-format file; none when it does not exist (or is no regular file: a FIFO, a
    device); a file past MAX_SETTINGS_BYTES is a ConfigError."""
    import io

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


DEFAULT_TOOLS = ("calculator", "read_file", "write_file", "list_dir", "current_time", "run_shell", "todo_write")


def add_tool_options(parser: argparse.ArgumentParser) -> None:
    """Options that choose the tools and what they may do, shared by `agent` and `agent tools`."""
    group = parser.add_argument_group("tools")
    group.add_argument("--tools", type=names, metavar="NAME,...",
                       help=f"the tools the model is offered, default {','.join(DEFAULT_TOOLS)} (and remember, "
                            "with --memory); spawn_agent, a helper agent, only when named; none: no built-in tool; "
                            "an MCP server's tools (--mcp) are all offered besides; `agent tools` lists them")
    group.add_argument("--read-only", action="store_true",
                       help="leave out every tool that can change something: write_file, remember, and the "
                            "run_shell commands that are not read-only")
    group.add_argument("--yes", action="store_true",
                       help="approve every command and file replacement of the run without asking")
    group.add_argument("--shell-timeout", type=positive_float, default=SHELL_TIMEOUT, metavar="SECONDS",
                       help="for one run_shell command, which is then stopped with all it started, "
                            f"default {SHELL_TIMEOUT:g}")
    group.add_argument("--memory", metavar="FILE",
                       help="notes kept between runs (memory.md, say): shown to the model at the start of the run; "
                            "the remember tool adds to them")


def names(text: str) -> list[str]:
    chosen = [name.strip() for name in text.split(",") if name.strip()]
    if not chosen:
        raise argparse.ArgumentTypeError("names no tool; pass tool names separated by commas (agent tools lists them)")
    return chosen


@dataclass(frozen=True)
class Toolbox:
    """The tools of a run: those offered to the model (the registry), the others by name with why they are off,
    and the plan and memory the tools keep."""

    registry: Registry
    off: dict[str, str]
    plan: Plan
    memory: Memory | None
    subagents: SubAgents  # spawn_agent's runner, given the model once there is one


def toolbox(args: argparse.Namespace, approve: Callable[[str], bool] | None) -> Toolbox:
    """The tools ``--tools`` chooses among the built-in ones (the default ones when it is not given), as the
    other flags make them; a name that is unknown, or a tool --read-only leaves out, is a usage error."""
    from agent.subagents import SubAgents
    from agent.tools import Memory, Plan, Registry, file_tools, shell_tool
    from agent.tools.calculator import calculator
    from agent.tools.clock import current_time

    workspace = getattr(args, "workspace", ".")
    if not Path(workspace).is_dir():
        raise ConfigError(f"workspace {workspace!r} is not a folder; pass --workspace DIR")
    memory = Memory(args.memory) if args.memory else None
    if memory:
        check_output_file(args.memory, "--memory", "memory file")
        if os.path.exists(args.memory) and not os.path.isfile(args.memory):
            raise ConfigError(f"--memory {args.memory!r} is not a regular file (a device or a FIFO): its notes "
                              "cannot be read or kept there; pass a file, like --memory memory.md")
    plan = Plan()
    shell = shell_tool(workspace, approve, args.shell_timeout)
    subagents = SubAgents()
    every = [calculator, *file_tools(workspace, approve), current_time, shell, plan.tool, subagents.tool]
    every += [memory.tool] if memory else []
    available = [t.name for t in every] + ([] if memory else ["remember"])
    wanted = args.tools or [*DEFAULT_TOOLS, *(["remember"] if memory else [])]
    wanted = [] if wanted == ["none"] else wanted  # only an MCP server's tools (--mcp)
    unknown = [name for name in wanted if name not in available]
    if unknown:
        close = difflib.get_close_matches(unknown[0], available, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise ConfigError(f"--tools: no tool named {', '.join(unknown)}{hint}; the tools are {', '.join(available)}")
    if "remember" in wanted and not memory:
        raise ConfigError("--tools remember needs --memory FILE, the file it writes to")
    changing = [t.name for t in every if t.writes and t.name in wanted]
    if args.read_only and args.tools and changing:
        raise ConfigError(f"--tools {','.join(changing)} and --read-only: --read-only leaves out what can change "
                          "files; drop one of them")
    on = [t for t in every if t.name in wanted and not (args.read_only and t.writes)]
    off = {t.name: "--read-only" if t.name in wanted else "not in --tools" for t in every if t not in on}
    if not memory:
        off["remember"] = "needs --memory FILE"
    return Toolbox(Registry(on), off, plan, memory, subagents)


def check_output_file(path: str, flag: str, what: str, force: bool | None = None) -> None:
    """Before anything is loaded or run: an output flag (--trace, eval --out) names a file in a folder that
    exists; with ``force`` False, not a file that exists already (a device such as /dev/null is fine)."""
    target = Path(path)
    if not path.strip():
        raise ConfigError(f"{flag} is empty, which is not a file name; pass {flag} FILE")
    if target.is_dir() or path.endswith(("/", "\\")):
        raise ConfigError(f"{flag} {path!r} is not a file name: it is a folder; pass {flag} FILE")
    if force is False and target.is_file():
        raise ConfigError(f"{flag} {path!r}: the file exists already; pass --force to overwrite it, or choose "
                          "another name")
    if not target.resolve().parent.is_dir():
        raise ConfigError(f"cannot write the {what} {path!r}: the folder {str(target.parent)!r} does not exist; "
                          f"pass {flag} FILE in a folder that exists")
