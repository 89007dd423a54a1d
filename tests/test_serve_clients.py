"""Agent frameworks' own agents against `agent serve` started for real in front of the scripted upstream (which
answers in the prompt protocol): openai-agents, whose default model speaks the Responses API, and pydantic-ai over
both APIs, each with a function tool and with structured output. The `clients` extra installs them."""
import asyncio

import pytest
from pydantic import BaseModel

from tests.serve_support import serve_fixtures
from tests.support import action

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")


class Product(BaseModel):
    factors: list[int]
    product: int



upstream, served, up, client = serve_fixtures()


def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


def results_sent(upstream) -> list[str]:
    """The tool results the upstream was given, in the protocol's text form."""
    return [m["content"] for m in upstream.requests[-1]["body"]["messages"] if m["role"] == "user"
            and m["content"].startswith("Result of")]


@pytest.fixture
def agents():
    agents = pytest.importorskip("agents")
    from agents.models.openai_provider import OpenAIProvider
    from openai import AsyncOpenAI

    def run_config(url):
        """A run of the Agent's default model (the Responses API) on serve, with no tracing sent anywhere."""
        client = AsyncOpenAI(base_url=url, api_key="unused", max_retries=0)
        return agents.RunConfig(model_provider=OpenAIProvider(openai_client=client), tracing_disabled=True)

    return agents, run_config


def test_openai_agents_default_model_runs_a_function_tool_through_responses(served, up, agents):
    sdk, run_config = agents
    agent = sdk.Agent(name="calc", instructions="Use the tools.", tools=[sdk.function_tool(multiply)])
    up.replies("Let me multiply.", action("multiply", a=6, b=7), action(answer="6 times 7 is 42."))
    result = sdk.Runner.run_sync(agent, "What is 6 times 7?", run_config=run_config(served[0]))
    assert result.final_output == "6 times 7 is 42."
    assert results_sent(up) == ["Result of multiply:\n42\n"]  # the agent ran the tool itself
    assert "- multiply(a: integer, b: integer) — Multiply two integers." in up.requests[0]["body"]["messages"][0][
        "content"]
    assert [type(item).__name__ for item in result.new_items] == [
        "ToolCallItem", "ToolCallOutputItem", "MessageOutputItem"]
    assert all(r.response_id.startswith("resp_") for r in result.raw_responses)  # answered by POST /v1/responses


def test_openai_agents_output_type_with_a_tool_gets_json_valid_for_its_model(served, up, agents):
    sdk, run_config = agents
    agent = sdk.Agent(name="calc", instructions="Use the tools.", tools=[sdk.function_tool(multiply)],
                      output_type=Product)
    up.replies(action("multiply", a=6, b=7), action(answer="42"), action(answer={"factors": [6, 7], "product": 42}))
    result = sdk.Runner.run_sync(agent, "What is 6 times 7?", run_config=run_config(served[0]))
    assert result.final_output == Product(factors=[6, 7], product=42)
    reask = up.requests[2]["body"]["messages"][-1]["content"]
    assert reask.startswith("Your last reply could not be used (schema): $.answer: \"42\" is not of type 'object'")
    assert "Answer schema" in up.requests[0]["body"]["messages"][0]["content"]


def test_openai_agents_streamed_run(served, up, agents):
    sdk, run_config = agents
    agent = sdk.Agent(name="calc", tools=[sdk.function_tool(multiply)], output_type=Product)
    up.replies(action("multiply", a=6, b=7), action(answer={"factors": [6, 7], "product": 42}))

    async def run():
        result = sdk.Runner.run_streamed(agent, "What is 6 times 7?", run_config=run_config(served[0]))
        kinds = [event.type async for event in result.stream_events()]
        return result.final_output, kinds

    output, kinds = asyncio.run(run())
    assert output == Product(factors=[6, 7], product=42)
    assert "raw_response_event" in kinds and "run_item_stream_event" in kinds
    assert results_sent(up) == ["Result of multiply:\n42\n"]


@pytest.fixture(params=["chat completions", "responses"])
def pydantic_model(request, served):
    pytest.importorskip("pydantic_ai")
    from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
    from pydantic_ai.providers.openai import OpenAIProvider

    kind = OpenAIChatModel if request.param == "chat completions" else OpenAIResponsesModel
    model = kind("m", provider=OpenAIProvider(base_url=served[0], api_key="unused"))
    model.ids = "chatcmpl-" if request.param == "chat completions" else "resp_"  # what serve's answers are named
    return model


def test_pydantic_ai_runs_a_tool(up, pydantic_model):
    from pydantic_ai import Agent

    agent = Agent(pydantic_model, instructions="Use the tools.", tools=[multiply])
    up.replies(action("multiply", a=6, b=7), action(answer="42"))
    result = agent.run_sync("What is 6 times 7?")
    assert result.output == "42"
    assert results_sent(up) == ["Result of multiply:\n42\n"]
    assert result.all_messages()[-1].provider_response_id.startswith(pydantic_model.ids)


def test_pydantic_ai_native_output_with_a_tool(up, pydantic_model):
    from pydantic_ai import Agent, NativeOutput

    agent = Agent(pydantic_model, output_type=NativeOutput(Product), tools=[multiply])
    up.replies(action("multiply", a=6, b=7), action(answer={"factors": [6, 7]}), action(answer={"factors": [6, 7], "product": 42}))
    assert agent.run_sync("What is 6 times 7?").output == Product(factors=[6, 7], product=42)
    reask = up.requests[2]["body"]["messages"][-1]["content"]
    assert "(schema): $.answer: 'product' is a required property" in reask
