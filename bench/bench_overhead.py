"""The agent's own cost per step, beside smolagents' ToolCallingAgent when it is installed, in one run.

In process, both agents are driven by instant scripted models (every step calls a calculator tool, the last
one answers); over HTTP, the whole `agent` command runs against the scripted OpenAI-compatible server of the
tests, and smolagents' agent against the same server through its OpenAIServerModel.

    python bench/bench_overhead.py            # pip install 'smolagents==1.26.0' for the comparison
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agent import Agent, Reply, ScriptedModel, Settings  # noqa: E402
from agent.models import tool_call  # noqa: E402
from agent.protocols import NativeProtocol, PromptProtocol  # noqa: E402
from tests.openai_server import ScriptedServer  # noqa: E402
from agent.tools import builtin_registry  # noqa: E402

try:
    import smolagents
except ImportError:
    smolagents = None


def our_replies(protocol: str, steps: int) -> list[Reply]:
    if protocol == "prompt":
        calls = [Reply(content=json.dumps({"type": "tool_call", "tool": "calculator",
                                           "arguments": {"expression": f"{i}*3"}})) for i in range(steps)]
        return calls + [Reply(content='{"type": "final", "answer": "done"}')]
    calls = [Reply(tool_calls=[tool_call(f"call_{i}", "calculator", {"expression": f"{i}*3"})],
                   finish_reason="tool_calls") for i in range(steps)]
    return calls + [Reply(content="done")]


def ours(protocol: str, steps: int, memory: bool = False) -> tuple[float, float]:
    """µs per model call, and the peak of traced memory in MB when asked (a separate, slower run)."""
    registry = builtin_registry(".")
    make = PromptProtocol if protocol == "prompt" else NativeProtocol
    agent = Agent(ScriptedModel(our_replies(protocol, steps)), registry, make(registry), Settings(max_steps=steps))
    if memory:
        tracemalloc.start()
    started = time.perf_counter()
    result = agent.run("compute")
    elapsed = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1] / 1e6 if memory else 0.0
    tracemalloc.stop()
    assert result.status == "final" and result.steps == steps, result.status
    return elapsed / result.model_calls * 1e6, peak


def smol(steps: int) -> float:
    """µs per model call of smolagents' ToolCallingAgent with an instant model and a calculator tool."""
    from smolagents import ChatMessage, Model, Tool, ToolCallingAgent
    from smolagents.models import ChatMessageToolCall, ChatMessageToolCallFunction
    from smolagents.monitoring import LogLevel

    class Calculator(Tool):
        name, description = "calculator", "Evaluate an arithmetic expression."
        inputs = {"expression": {"type": "string", "description": "the expression"}}
        output_type = "string"

        def forward(self, expression: str) -> str:
            from agent.tools.calculator import calculator
            return calculator.function(expression)

    class Instant(Model):
        def __init__(self):
            super().__init__(model_id="instant")
            self.calls = 0

        def generate(self, messages, stop_sequences=None, response_format=None, tools_to_call_from=None, **kwargs):
            self.calls += 1
            name, arguments = (("calculator", {"expression": f"{self.calls}*3"}) if self.calls <= steps
                               else ("final_answer", {"answer": "done"}))
            call = ChatMessageToolCall(id=f"call_{self.calls}", type="function",
                                       function=ChatMessageToolCallFunction(name=name, arguments=arguments))
            return ChatMessage(role="assistant", content=None, tool_calls=[call])

    model = Instant()
    agent = ToolCallingAgent(tools=[Calculator()], model=model, max_steps=steps + 5, verbosity_level=LogLevel.OFF)
    started = time.perf_counter()
    answer = agent.run("compute")
    elapsed = time.perf_counter() - started
    assert answer == "done" and model.calls == steps + 1, (answer, model.calls)
    return elapsed / model.calls * 1e6


SMOL_OVER_HTTP = """
import sys
from smolagents import OpenAIServerModel, Tool, ToolCallingAgent
from smolagents.monitoring import LogLevel
class Calculator(Tool):
    name, description = "calculator", "Evaluate an arithmetic expression."
    inputs = {"expression": {"type": "string", "description": "the expression"}}
    output_type = "string"
    def forward(self, expression):
        from agent.tools.calculator import calculator
        return calculator.function(expression)
steps = int(sys.argv[2])
model = OpenAIServerModel(model_id="m", api_base=sys.argv[1], api_key="not-needed")
agent = ToolCallingAgent(tools=[Calculator()], model=model, max_steps=steps + 5, verbosity_level=LogLevel.OFF)
assert agent.run("compute") == "done"
"""


def over_http(command: str, steps: int) -> float:
    """ms per model call of a whole process (start-up included) against the scripted server."""
    with ScriptedServer() as server:
        for i in range(steps):
            if command == "agent":
                server.reply(json.dumps({"type": "tool_call", "tool": "calculator",
                                         "arguments": {"expression": f"{i}*3"}}))
            else:
                server.reply(tool_calls=[{"name": "calculator", "arguments": {"expression": f"{i}*3"}}])
        if command == "agent":
            server.reply('{"type": "final", "answer": "done"}')
            argv = [sys.executable, "-m", "agent", "--base-url", server.url, "--model", "m", "--quiet",
                    "--max-steps", str(steps), "compute"]
        else:
            server.reply(tool_calls=[{"name": "final_answer", "arguments": {"answer": "done"}}])
            argv = [sys.executable, "-c", SMOL_OVER_HTTP, server.url, str(steps)]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        started = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT)
        elapsed = time.perf_counter() - started
        assert done.returncode == 0, done.stderr[-500:]
        return elapsed / len(server.requests) * 1e3


def main() -> None:
    peer = f"smolagents {smolagents.__version__}" if smolagents else "smolagents (not installed)"
    ours("prompt", 20), ours("native", 20)  # warm up: first imports, first compiled validators
    print(f"{'in process, instant scripted model':<40} {'ours, prompt':>14} {'ours, native':>14} {peer:>20}")
    for steps in (100, 400, 1000):
        prompt, native = ours("prompt", steps)[0], ours("native", steps)[0]
        other = f"{smol(steps):11.0f} µs" if smolagents else "-"
        print(f"{f'{steps} steps, per step':<40} {prompt:11.0f} µs {native:11.0f} µs {other:>20}")
    prompt_peak, native_peak = ours("prompt", 1000, memory=True)[1], ours("native", 1000, memory=True)[1]
    print(f"{'1000 steps, peak traced memory':<40} {prompt_peak:11.1f} MB {native_peak:11.1f} MB")
    print()
    steps = 200
    ours_ms = over_http("agent", steps)
    other = f"{over_http('smolagents', steps):14.1f} ms" if smolagents else "-"
    print(f"{f'whole process over HTTP, {steps} steps':<40} {ours_ms:11.1f} ms {'':>14} {other:>20}")


if __name__ == "__main__":
    main()
