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
from functools import lru_cache
from pathlib import Path
from typing import Callable

from agent.config import ConfigError
from agent.models import ModelError, Reply, tool_call
from agent.models.local_files import built_in, cache_dir, embedded_model, user_model

MAX_TOKENS = 512
INSTALL_HINT = ("the local model needs llama-cpp-python, which the `{extra}` extra installs: {install} "
                "(or configure an endpoint: set AGENT_BASE_URL or AGENT_API_KEY)")
ANY_CHAR = r'char ::= [^"\\]'
JSON_CHAR = r'char ::= [^"\\\x7F\x00-\x1F]'  # JSON strings hold no raw control characters
TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
FENCED = re.compile(r"```(?:json|xml)?\s*\n(.*?)\s*```", re.DOTALL)
TOOL_NAME = re.compile(r'"name"\s*:\s*"([^"]*)"')

_loaded: dict[tuple[Path, int], tuple[object, threading.Lock]] = {}
_loading = threading.Lock()


def load_local_model(model_path: str | None = None, *, local_model: str | None = None,
                     temperature: float | None = None, n_ctx: int = 8192, max_tokens: int = MAX_TOKENS,
                     cache: Path | None = None) -> LocalModel:
    """The GGUF file at ``model_path``, else the built-in model named ``local_model`` (default: the larger one),
    verified before every load and assembled on first use in ``cache`` (by default ``cache_dir({})``)."""
    embedded = built_in(local_model)
    path = user_model(model_path) if model_path else (cache or cache_dir({})) / embedded.name
    try:
        import llama_cpp
    except ImportError as error:
        raise ConfigError(INSTALL_HINT.format(extra=embedded.extra, install=embedded.install())) from error
    with _loading:
        if (path, n_ctx) not in _loaded:
            if not model_path:
                embedded_model(embedded, path.parent)
            try:
                llama = llama_cpp.Llama(str(path), n_ctx=n_ctx, n_threads=_usable_cores(), verbose=False)
            except ValueError as error:
                raise ConfigError(f"llama.cpp cannot load {path} ({error}); is it a GGUF model file? "
                                  "Check --model-path / AGENT_MODEL_PATH") from error
            if not _loaded:  # free the models before the interpreter tears down what llama.cpp's finaliser needs
                atexit.register(_close_all)
            _loaded[path, n_ctx] = llama, threading.Lock()
        llama, lock = _loaded[path, n_ctx]
    return LocalModel(llama, lock, n_ctx=n_ctx, temperature=temperature, max_tokens=max_tokens)


def _close_all() -> None:
    with _loading:
        for llama, _ in _loaded.values():
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
                 max_tokens: int = MAX_TOKENS):
        self.llama, self.lock, self.n_ctx = llama, lock, n_ctx
        self.temperature = 0.0 if temperature is None else temperature
        self.max_tokens = max_tokens

    def complete(self, messages: list[dict], **options) -> Reply:
        messages, request = self._request(messages, options)
        with self._calling():
            response = self.llama.create_chat_completion(messages=messages, **request)
        return _reply(response, request.get("tools"))

    def stream(self, messages: list[dict], on_text: Callable[[str], None], **options) -> Reply:
        """As ``complete``, giving ``on_text`` each piece of the content as llama.cpp writes it. The stream
        reports no usage: the completion's tokens are its text tokenized again, the prompt's are the rest of
        what the model holds after the call (each within a token of llama.cpp's own count)."""
        messages, request = self._request(messages, options)
        pieces, finish = [], None
        with self._calling():
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
        return _reply(response, request.get("tools"))

    def _request(self, messages: list[dict], options: dict) -> tuple[list[dict], dict]:
        request = {"temperature": self.temperature, "max_tokens": self.max_tokens,
                   **{key: value for key, value in options.items() if value is not None}}
        response_format = request.pop("response_format", None)
        if response_format:
            request.update(_constraint(response_format))
        if request.get("tools"):
            messages = [_with_argument_objects(m) for m in messages]
        return messages, request

    @contextmanager
    def _calling(self):
        """The model's lock held, and llama.cpp's failures as ModelErrors that say what to do."""
        try:
            with self.lock:
                yield
        except ValueError as error:
            if "exceed context window" in str(error):
                raise ModelError(f"the conversation no longer fits the local model's context ({self.n_ctx} tokens); "
                                 "give a shorter task or keep less tool output (--max-output)") from error
            raise ModelError(f"the local model failed: {error}") from error
        except RuntimeError as error:
            raise ModelError(f"the local model failed: {error}") from error


def _constraint(response_format: dict) -> dict:
    """OpenAI's response_format as llama-cpp-python arguments; a schema becomes a grammar, never silently dropped."""
    kind = response_format.get("type")
    if kind == "json_schema":
        return {"grammar": _grammar(json.dumps(response_format["json_schema"]["schema"]))}
    if kind == "json_object" and "schema" in response_format:
        return {"grammar": _grammar(json.dumps(response_format["schema"]))}
    if kind == "json_object":
        return {"response_format": {"type": "json_object"}}
    return {}


@lru_cache(maxsize=32)
def _grammar(schema: str):
    """llama-cpp-python would fall back to plain JSON on a schema it cannot convert; here that is an error."""
    from llama_cpp.llama_grammar import LlamaGrammar

    try:
        gbnf = _gbnf(json.loads(schema))
    except Exception as error:
        raise ModelError(f"the local model cannot constrain replies by this JSON Schema ({error}); "
                         "drop --constrain") from error
    return LlamaGrammar.from_string(gbnf.replace(ANY_CHAR, JSON_CHAR))


def _gbnf(schema: dict) -> str:
    converter = _converter()
    converter.visit(converter.resolve_refs(schema, "stdin"), "")
    return converter.format_grammar()


def _converter():
    """llama-cpp-python's schema converter, where a string enum takes any string: the model writes the value it
    means and the parser's re-ask names the allowed value it most likely meant. Held to the allowed values, a
    model writing "miles" for "mi" could only stop at "m", and one asked about litres with only a length tool
    had to pick a length unit and made a call no one asked for; free, it writes "l", is re-asked, and says
    that no tool converts volumes."""
    from llama_cpp.llama_grammar import PRIMITIVE_RULES, RESERVED_NAMES, SchemaConverter

    class Converter(SchemaConverter):
        def visit(self, schema, name):
            values = schema.get("enum") if isinstance(schema, dict) else None
            if not (isinstance(values, list) and values and all(isinstance(v, str) for v in values)):
                return super().visit(schema, name)
            char = self._add_primitive("char", PRIMITIVE_RULES["char"])
            rule_name = name + "-" if name in RESERVED_NAMES else name or "root"
            return self._add_rule(rule_name, f'"\\"" {char}* "\\""')

    return Converter(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)


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
