"""The backend for any OpenAI-compatible chat completions endpoint; the only module that imports ``openai``.

Retrying is the SDK's own: timeouts, connection errors, 408/409/429 and 5xx are retried up to
``max_retries`` times with exponential backoff (0.5s doubling, capped at 8s, minus up to 25% jitter),
except that a ``retry-after-ms`` or ``Retry-After`` header (seconds or HTTP date) between 0 and 120s
is waited exactly, one of 0 falls back to the backoff, and one above 120s stops the retrying at once.
"""
from __future__ import annotations

import openai

from agent.config import DEFAULT_BASE_URL
from agent.model import ModelError, Reply, tool_call


class OpenAIModel:
    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 timeout: float = 60.0, max_retries: int = 2, temperature: float | None = None):
        self.model = model
        self.base_url = base_url or DEFAULT_BASE_URL
        self.timeout = timeout
        self.max_retries = max_retries
        self.temperature = temperature
        self.client = openai.OpenAI(base_url=self.base_url, api_key=api_key or "not-needed",
                                    timeout=timeout, max_retries=max_retries)

    def complete(self, messages: list[dict], **options) -> Reply:
        request = {"model": self.model, "messages": messages}
        if self.temperature is not None:
            request["temperature"] = self.temperature
        request.update({key: value for key, value in options.items() if value is not None})
        try:
            response = self.client.chat.completions.create(**request)
        except openai.APIError as err:
            raise self._error(err, constrained="response_format" in request) from err
        except ValueError as err:
            raise self._not_a_completion(str(err)) from err
        if isinstance(response, str):
            raise self._not_a_completion(repr(response))
        if not response.choices:
            raise ModelError("endpoint returned no choices")
        choice = response.choices[0]
        usage = None
        if response.usage is not None:
            usage = {"prompt_tokens": response.usage.prompt_tokens or 0,
                     "completion_tokens": response.usage.completion_tokens or 0}
        return Reply(content=choice.message.content, tool_calls=_tool_calls(choice.message.tool_calls),
                     finish_reason=choice.finish_reason, usage=usage)

    def _not_a_completion(self, detail: str) -> ModelError:
        return ModelError(f"{self.base_url} did not answer with a chat completion ({_short(detail, 80)}); "
                          "check --base-url / AGENT_BASE_URL")

    def _error(self, err: openai.APIError, *, constrained: bool) -> ModelError:
        """One line that says what went wrong and how to fix it."""
        retries = _retries_taken(err, self.max_retries)
        if isinstance(err, openai.APITimeoutError):
            return ModelError(f"no answer from {self.base_url} within {self.timeout:g}s (after {retries} retries); "
                              "raise --timeout or check the server")
        if isinstance(err, openai.APIConnectionError):
            cause = _short(str(err.__cause__ or err)) or type(err.__cause__).__name__
            return ModelError(f"cannot connect to {self.base_url}: {cause}; "
                              "check --base-url / AGENT_BASE_URL and that the server is running")
        if not isinstance(err, openai.APIStatusError):
            return ModelError(f"unexpected answer from {self.base_url}: {_short(err.message)}")
        status, message = err.status_code, _server_message(err)
        if status in (401, 403):
            return ModelError(f"endpoint rejected the API key (HTTP {status}); set AGENT_API_KEY or pass --api-key")
        if status == 404:
            return ModelError(f"endpoint answered 404 for model {self.model!r} at {err.request.url}; "
                              "check --model / AGENT_MODEL and --base-url")
        if status == 429:
            asked = err.response.headers.get("retry-after")
            wait = f" (the server asked to wait {asked}s)" if asked else ""
            return ModelError(f"rate limited (HTTP 429) after {retries} retries{wait}; wait and try again")
        if status >= 500:
            return ModelError(f"endpoint error HTTP {status} after {retries} retries: {message}")
        hint = "; the server may not support --constrain (response_format): drop the flag" if constrained else ""
        return ModelError(f"endpoint rejected the request (HTTP {status}): {message}{hint}")


def _tool_calls(calls) -> list[dict]:
    return [tool_call(call.id or f"call_{number}", call.function.name, call.function.arguments)
            for number, call in enumerate(calls or [], 1)]


def _retries_taken(err: openai.APIError, default: int) -> int:
    """The SDK numbers each attempt in the x-stainless-retry-count request header."""
    try:
        return int(err.request.headers["x-stainless-retry-count"])
    except (AttributeError, KeyError, ValueError):
        return default


def _server_message(err: openai.APIStatusError) -> str:
    body = err.body
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return _short(body["message"])
    if isinstance(body, str) and body:
        return _short(body)
    return _short(err.response.text) or f"HTTP {err.status_code}"


def _short(text: str, limit: int = 200) -> str:
    lines = text.strip().splitlines()
    first = lines[0].strip() if lines else ""
    return first if len(first) <= limit else first[: limit - 1] + "…"
