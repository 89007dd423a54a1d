"""Prints ms per OpenAIModel.complete() against the local scripted server, by history length:
the SDK's typed ``chat.completions.create`` (the old way) against the model's own request (the new way).

    python -m bench.bench_request      (from the project root: it borrows tests/openai_server.py)
"""
import json
import time

from agent.models.openai_compatible import OpenAIModel
from tests.openai_server import ScriptedServer

CALLS = 30


def history(length: int) -> list[dict]:
    """A prompt-protocol and native-style agent history of ``length`` messages after the system prompt."""
    messages = [{"role": "system", "content": "You are an agent. " * 100}, {"role": "user", "content": "the task"}]
    for step in range(length - 1):
        if step % 4 == 0:
            call = {"id": f"call_{step}", "type": "function",
                    "function": {"name": "read_file", "arguments": json.dumps({"path": f"notes{step}.txt"})}}
            messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif step % 4 == 1:
            messages.append({"role": "tool", "tool_call_id": f"call_{step - 1}", "content": "line of a file\n" * 30})
        elif step % 4 == 2:
            action = {"type": "tool_call", "tool": "calculator", "arguments": {"expression": f"{step}*3"}}
            messages.append({"role": "assistant", "content": json.dumps(action)})
        else:
            messages.append({"role": "user", "content": f"calculator result: {step * 3}"})
    return messages[: length + 1]


def old_way(model: OpenAIModel, messages: list[dict]):
    """What complete() did before: the SDK's typed create(), which transforms the whole history."""
    return model.client.chat.completions.create(model=model.model, messages=messages)


def ms_per_call(function, messages: list[dict], server: ScriptedServer) -> float:
    server.replies(*["ok"] * (CALLS + 3))
    for _ in range(3):
        function(messages)
    started = time.perf_counter()
    for _ in range(CALLS):
        function(messages)
    return (time.perf_counter() - started) / CALLS * 1000


def main() -> None:
    with ScriptedServer() as server:
        model = OpenAIModel("bench-model", base_url=server.url, max_retries=0)
        print(f"{'history messages':>16} {'old: create() ms':>17} {'new: complete() ms':>19}")
        for length in (10, 100, 400):
            messages = history(length)
            old = ms_per_call(lambda m: old_way(model, m), messages, server)
            new = ms_per_call(model.complete, messages, server)
            print(f"{length:>16} {old:>17.2f} {new:>19.2f}")


if __name__ == "__main__":
    main()
