"""Against a real model server: llama-cpp-python's own OpenAI-compatible server (`python -m llama_cpp.server`, its
`server` extra) serving the embedded model's GGUF file with no chat format named, so with no tool calling of its
own: the model this project exists for. The agent runs on it in both protocols, `agent serve` lends it tool
calling, and `agent probe` says which arm to use. Skipped where the `local` extra or the server's is missing."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import pytest

from tests.serve_support import serving
from tests.support import child_env, stop

TASK = "Compute 128*96 + 45**2 - 88/2"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def llama_server():
    """The server on the cached embedded model, for the module; its base URL."""
    pytest.importorskip("llama_cpp")
    pytest.importorskip("llama_cpp.server.app", reason="llama-cpp-python's server extra is not installed")
    from agent.models.local_files import embedded_model

    try:
        path = embedded_model()
    except Exception as error:  # not installed, or not assembled and no data packages to assemble it from
        pytest.skip(f"the default local model is not installed: {error}")
    port = free_port()
    with tempfile.TemporaryFile("w+") as log:
        child = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", str(path), "--host", "127.0.0.1",
             "--port", str(port), "--n_ctx", "8192", "--n_threads", str(len(os.sched_getaffinity(0)))],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=child_env())
        try:
            url = f"http://127.0.0.1:{port}/v1"
            deadline = time.monotonic() + 120
            while True:
                try:
                    with urllib.request.urlopen(f"{url}/models", timeout=2) as response:
                        json.load(response)
                    break
                except OSError:
                    if child.poll() is not None or time.monotonic() > deadline:
                        log.seek(0)
                        pytest.fail(f"llama_cpp.server did not start: {log.read()[-2000:]}")
                    time.sleep(0.5)
            yield url
        finally:
            stop(child, 20)


def agent(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "agent", *args], capture_output=True, text=True, timeout=600,
                          env=child_env(), stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("protocol", ["prompt", "prompt --constrain", "native"])
def test_the_agent_answers_the_readme_task_through_the_server(llama_server, protocol, tmp_path):
    """--constrain: the server refuses a json_schema response_format (HTTP 500), so the schema goes as
    {"type": "json_object", "schema": ...}, which it holds the reply to."""
    done = agent("--base-url", llama_server, "--model", "qwen2.5-coder-1.5b", "--protocol", *protocol.split(),
                 "--temperature", "0", "--workspace", str(tmp_path), "--no-log", TASK)
    assert done.returncode == 0, done.stderr
    assert "14269" in done.stdout
    assert "calculator" in done.stderr  # the answer came from the tool, not from the model's memory


def test_agent_serve_lends_the_server_tool_calling(llama_server):
    import openai

    tools = [{"type": "function", "function": {
        "name": "multiply", "description": "Multiply two integers.",
        "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                       "required": ["a", "b"]}}}]
    with serving("--upstream-url", llama_server, "--model", "qwen2.5-coder-1.5b") as (url, _, said):
        client = openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=300)
        messages = [{"role": "user", "content": "What is 17 times 23? Use the multiply tool."}]
        first = client.chat.completions.create(model="any", messages=messages, tools=tools, temperature=0)
        calls = first.choices[0].message.tool_calls
        assert first.choices[0].finish_reason == "tool_calls", said()
        assert calls[0].function.name == "multiply"
        assert json.loads(calls[0].function.arguments) == {"a": 17, "b": 23}
        messages += [first.choices[0].message.model_dump(exclude_none=True),
                     {"role": "tool", "tool_call_id": calls[0].id, "content": "391"}]
        second = client.chat.completions.create(model="any", messages=messages, tools=tools, temperature=0)
        assert second.choices[0].finish_reason == "stop"
        assert "391" in second.choices[0].message.content


def test_probe_recommends_an_arm_for_the_server(llama_server):
    """With no chat format named, the server takes ``tools`` into the prompt but reads no call out of the reply
    (the model's call comes back as text); it refuses a json_schema response_format but holds a reply to its own
    form of one: the grammar arm is the one it can serve."""
    done = agent("probe", "--base-url", llama_server, "--model", "qwen2.5-coder-1.5b", "--json")
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert (found["native"], found["constrained"], found["arm"]) == (False, True, "prompt-constrained"), found
    assert found["native_detail"].startswith("accepted tools but answered in text")
    assert "sent as json_object with a schema" in found["constrained_detail"]
