"""The embedded local model: llama.cpp in-process (llama-cpp-python), one loaded model per file and process.

Prompt mode can constrain decoding by the action schema (a llama.cpp grammar); native mode renders the
tools with the model's own chat template and reads its tool calls back the way llama.cpp's server does.
"""
from __future__ import annotations

import atexit
import json
import os
import re
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable

from agent.config import ConfigError
from agent.models import ModelError, Reply, tool_call
from agent.models.local_batch import first_call
from agent.models.local_files import built_in, cache_dir, embedded_model, user_model
from agent.models.local_grammar import gbnf, sampling
from agent.models.prompt_state import PromptStates, RecentStates
from agent.models.runtime_check import build_id, check_runtime

MAX_TOKENS = 512
INSTALL_HINT = ("the local model needs llama-cpp-python, which the `{extra}` extra installs: {install} "
                "(or configure an endpoint: set AGENT_BASE_URL or AGENT_API_KEY)")
TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
FENCED = re.compile(r"```(?:json|xml)?\s*\n(.*?)\s*```", re.DOTALL)
TOOL_NAME = re.compile(r'"name"\s*:\s*"([^"]*)"')

# the Llama, its lock, its identity, the states it held lately
_loaded: dict[tuple[Path, int], tuple[Any, threading.Lock, dict, RecentStates]] = {}
_loading = threading.Lock()


def load_local_model(model_path: str | None = None, *, local_model: str | None = None,
                     temperature: float | None = None, n_ctx: int = 8192, max_tokens: int = MAX_TOKENS,
                     cache: Path | None = None, warm_start: bool = True) -> LocalModel:
    """The GGUF file at ``model_path``, else the built-in model named ``local_model`` (default: the larger one),
    verified before every load and assembled on first use in ``cache`` (by default ``cache_dir({})``). Before
    the first load of a llama.cpp build, a child process checks that it runs on this CPU. With ``warm_start``,
    the state after a process's first prompt is kept in the cache for the next process (see prompt_state)."""
    embedded = built_in(local_model)
    folder = cache or cache_dir({})
    path = user_model(model_path) if model_path else folder / embedded.name
    try:
        import llama_cpp
    except ImportError as error:
        raise ConfigError(INSTALL_HINT.format(extra=embedded.extra, install=embedded.install())) from error
    with _loading:
        if (path, n_ctx) not in _loaded:
            if not model_path:
                embedded_model(embedded, path.parent)
            model_id = _file_identity(path) if model_path else embedded.sha256
            build = build_id(Path(llama_cpp.__file__).parent, llama_cpp.__version__)
            check_runtime(path, model_id, build, llama_cpp.__version__, folder / "runtime", _usable_cores())
            try:
                llama = llama_cpp.Llama(str(path), n_ctx=n_ctx, n_threads=_usable_cores(), verbose=False)
            except ValueError as error:
                raise ConfigError(f"llama.cpp cannot load {path} ({error}); is it a GGUF model file? "
                                  "Check --model-path / AGENT_MODEL_PATH") from error
            if not _loaded:  # free the models before the interpreter tears down what llama.cpp's finaliser needs
                atexit.register(_close_all)
            identity = {"model": model_id, "runtime": build, "n_ctx": n_ctx}
            _loaded[path, n_ctx] = llama, threading.Lock(), identity, RecentStates()
        llama, lock, identity, recent = _loaded[path, n_ctx]
    states = PromptStates(folder / "states", identity) if warm_start else None
    return LocalModel(llama, lock, n_ctx=n_ctx, temperature=temperature, max_tokens=max_tokens, states=states,
                      recent=recent)


def _file_identity(path: Path) -> str:
    """A user's GGUF file, which is not hashed: its place, size and modification time."""
    info = path.stat()
    return f"{path.resolve()}:{info.st_size}:{info.st_mtime_ns}"


def _close_all() -> None:
    with _loading:
        for llama, *_ in _loaded.values():
            llama.close()
        _loaded.clear()


def _usable_cores() -> int:
    """The cores this process may run on (``taskset`` and container limits narrow them), for llama.cpp's
    threads: one thread more than there are cores makes every step wait for a core that is busy."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class LocalModel:
    """A loaded llama.cpp model; calls from several threads take turns."""

    def __init__(self, llama, lock: threading.Lock, *, n_ctx: int, temperature: float | None = None,
                 max_tokens: int = MAX_TOKENS, states: PromptStates | None = None, recent: RecentStates | None = None):
        self.llama, self.lock, self.n_ctx = llama, lock, n_ctx
        self.temperature = 0.0 if temperature is None else temperature
        self.max_tokens = max_tokens
        self.states = states  # where a fresh context's first prompt state is kept and found
        self.recent = recent  # the states of the prompts this model's context held lately

    def complete(self, messages: list[dict], **options) -> Reply:
        messages, request = self._request(messages, options)
        with self._calling(messages, request):
            response = self.llama.create_chat_completion(messages=messages, **request)
        return _reply(self._first_call(messages, options, request, response), request.get("tools"))

    def stream(self, messages: list[dict], on_text: Callable[[str], None], **options) -> Reply:
        """As ``complete``, giving ``on_text`` each piece of the content as llama.cpp writes it. The stream
        reports no usage: the completion's tokens are its text tokenized again, the prompt's are the rest of
        what the model holds after the call (each within a token of llama.cpp's own count)."""
        messages, request = self._request(messages, options)
        pieces, finish = [], None
        with self._calling(messages, request):
            for chunk in self.llama.create_chat_completion(messages=messages, stream=True, **request):
                choice = chunk["choices"][0]
                text = choice["delta"].get("content")
                if text:
                    pieces.append(text)
                    on_text(text)
                finish = choice.get("finish_reason") or finish
            content = "".join(pieces)
            completion = len(self.llama.tokenize(content.encode("utf-8"), add_bos=False)) if content else 0
            prompt = max(self.llama.n_tokens - completion, 0)
        response = {"choices": [{"message": {"content": content or None}, "finish_reason": finish}],
                    "usage": {"prompt_tokens": prompt, "completion_tokens": completion}}
        return _reply(self._first_call(messages, options, request, response), request.get("tools"))

    def _first_call(self, messages: list[dict], options: dict, request: dict, response: dict) -> dict:
        """``response``, or where it is a greedy batch whose first call is not the one a reply of one call would
        make, the batch written again from that call (agent.models.local_batch). The usage adds the completions
        made to find out; the prompt, which the context keeps, counts once."""
        content = response["choices"][0]["message"].get("content")
        if "logits_processor" not in request or not content:
            return response
        made = []

        def decode(opening: str, max_tokens: int | None, stop: str | None) -> str:
            _, again = self._request(messages, options, opening)
            again["max_tokens"] = max_tokens or again["max_tokens"]
            if stop:
                again["stop"] = [stop]
            with self._calling(messages, again):
                made.append(self.llama.create_chat_completion(messages=messages, **again))
            return made[-1]["choices"][0]["message"].get("content") or ""

        if first_call(content, _schema(options.get("response_format") or {}), decode) is None:
            return _with_usage(response, made)
        return _with_usage(made[-1], [response, *made[:-1]])

    def _request(self, messages: list[dict], options: dict, opening: str = "") -> tuple[list[dict], dict]:
        request = {"temperature": self.temperature, "max_tokens": self.max_tokens,
                   **{key: value for key, value in options.items() if value is not None}}
        response_format = request.pop("response_format", None)
        if response_format:
            request.update(_constraint(response_format, request["temperature"], self.llama, messages, opening))
        if request.get("tools"):
            messages = [_with_argument_objects(m) for m in messages]
        return messages, request

    @contextmanager
    def _calling(self, messages: list[dict], request: dict):
        """The model's lock held, and llama.cpp's failures as ModelErrors that say what to do. The context starts
        from the state in memory that shares most of this prompt's start, if one shares more than it; a fresh
        context from the state kept on disk for how this prompt starts, if there is one (else it is kept after)."""
        try:
            with self.lock:
                start = json.dumps([messages[:1], request.get("tools")], sort_keys=True)
                if self.recent is not None:
                    self.recent.before(self.llama, start)
                fresh = self.states is not None and self.llama.n_tokens == 0
                restored = fresh and self.states is not None and self.states.restore(self.llama, start)
                yield
                if fresh and not restored and self.states is not None:
                    self.states.save(self.llama, start)
        except ValueError as error:
            if "exceed context window" in str(error):
                raise ModelError(f"the conversation no longer fits the local model's context ({self.n_ctx} tokens); "
                                 "give a shorter task or keep less tool output (--max-output)") from error
            raise ModelError(f"the local model failed: {error}") from error
        except RuntimeError as error:
            raise ModelError(f"the local model failed: {error}") from error


def _constraint(response_format: dict, temperature: float, llama, messages: list[dict], opening: str = "") -> dict:
    """OpenAI's response_format as llama-cpp-python arguments; a schema becomes a grammar, never silently dropped."""
    kind = response_format.get("type")
    if kind == "json_schema" or (kind == "json_object" and "schema" in response_format):
        schema = _schema(response_format)
        return sampling(gbnf(json.dumps(schema)), temperature, llama, messages, schema, opening)
    if kind == "json_object":
        return {"response_format": {"type": "json_object"}}
    return {}


def _schema(response_format: dict) -> object:
    """The JSON Schema a response_format holds replies to (None: no schema)."""
    if response_format.get("type") == "json_schema":
        return response_format["json_schema"]["schema"]
    return response_format.get("schema")


def _with_usage(response: dict, others: list[dict]) -> dict:
    """``response`` with the completion tokens of ``others`` (made for the same prompt) added to its usage."""
    usage = dict(response.get("usage") or {})
    usage["completion_tokens"] = (usage.get("completion_tokens") or 0) + sum(
        (other.get("usage") or {}).get("completion_tokens") or 0 for other in others)
    return {**response, "usage": usage}


def _with_argument_objects(message: dict) -> dict:
    """The chat template writes tool-call arguments with ``tojson``: give it objects, not JSON text."""
    if not message.get("tool_calls"):
        return message
    calls = []
    for call in message["tool_calls"]:
        try:
            arguments = json.loads(call["function"]["arguments"])
        except (TypeError, json.JSONDecodeError):
            arguments = call["function"]["arguments"]
        calls.append({**call, "function": {**call["function"], "arguments": arguments}})
    return {**message, "tool_calls": calls}


def _reply(response: dict, tools: list[dict] | None) -> Reply:
    choice = response["choices"][0]
    message, finish = choice["message"], choice.get("finish_reason")
    content, tool_calls = message.get("content"), list(message.get("tool_calls") or [])
    if tools and not tool_calls and content:
        content, tool_calls = _find_tool_calls(content, {t["function"]["name"] for t in tools})
        finish = "tool_calls" if tool_calls and finish == "stop" else finish
    usage = response.get("usage")
    if usage:
        usage = {"prompt_tokens": usage.get("prompt_tokens") or 0,
                 "completion_tokens": usage.get("completion_tokens") or 0}
    return Reply(content=content, tool_calls=tool_calls, finish_reason=finish, usage=usage)


def _find_tool_calls(content: str, names: set[str]) -> tuple[str | None, list[dict]]:
    """Tool calls in a Qwen 2.5 reply, read as llama.cpp's server reads them (its Hermes 2 Pro format).

    ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks, or a reply that is just one such
    object for a known tool, bare or in a ```json fence. Returns the remaining text and the calls.
    """
    if "<tool_call>" in content:
        calls = [_tool_call(text, n) for n, text in enumerate(TOOL_CALL.findall(content), 1)]
        return content[:content.index("<tool_call>")].strip() or None, calls
    fenced = FENCED.fullmatch(content.strip())
    try:
        value = json.loads(fenced.group(1) if fenced else content)
    except json.JSONDecodeError:
        return content, []
    if (isinstance(value, dict) and isinstance(value.get("name"), str) and value["name"] in names
            and isinstance(value.get("arguments", {}), dict)):
        return None, [tool_call("call_1", value["name"], value.get("arguments", {}))]
    return content, []


def _tool_call(text: str, number: int) -> dict:
    """One ``{"name": ..., "arguments": {...}}`` text in OpenAI form; a malformed one is passed on as it is."""
    try:
        call = json.loads(text)
        return tool_call(f"call_{number}", str(call["name"]), call.get("arguments", {}))
    except (json.JSONDecodeError, TypeError, KeyError, AttributeError):
        named = TOOL_NAME.search(text)
        return tool_call(f"call_{number}", named.group(1) if named else "", text)
