"""An off-the-shelf framework's own tool-calling agent, run against `agent serve`: smolagents' ToolCallingAgent
through its OpenAIServerModel, the scripted upstream answering in the prompt protocol."""
import json

import pytest

from tests.serve_support import serving

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
smolagents = pytest.importorskip("smolagents")


def call(tool: str, **arguments) -> str:
    return json.dumps({"type": "tool_call", "tool": tool, "arguments": arguments})


def test_smolagents_tool_calling_agent_gets_its_answer_through_serve(server):
    from smolagents import OpenAIServerModel, Tool, ToolCallingAgent
    from smolagents.monitoring import LogLevel

    class Multiply(Tool):
        name, description = "multiply", "Multiply two integers."
        inputs = {"a": {"type": "integer", "description": "the first factor"},
                  "b": {"type": "integer", "description": "the second factor"}}
        output_type = "integer"

        def forward(self, a: int, b: int) -> int:
            return a * b

    # a malformed reply first: serve re-asks it, and smolagents never sees it
    server.replies("Let me multiply 6 by 7.", call("multiply", a=6, b=7), call("final_answer", answer="6 × 7 = 42"))
    with serving("--upstream-url", server.url, "--model", "m") as (url, _, _):
        model = OpenAIServerModel(model_id="m", api_base=url, api_key="unused")
        agent = ToolCallingAgent(tools=[Multiply()], model=model, max_steps=4, verbosity_level=LogLevel.OFF)
        answer = agent.run("What is 6 times 7?")
    assert answer == "6 × 7 = 42"
    assert len(server.requests) == 3 and not server.pending
    system = server.requests[0]["body"]["messages"][0]["content"]
    assert "- multiply(a: integer, b: integer) — Multiply two integers." in system  # smolagents' tools, as ours
    assert "- final_answer(" in system
    assert all("tools" not in r["body"] for r in server.requests)
    last = server.requests[-1]["body"]["messages"]
    assert last[-1]["role"] == "user" and "42" in last[-1]["content"]  # the result smolagents computed itself
