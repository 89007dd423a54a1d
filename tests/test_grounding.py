"""Whether a call's values come from the conversation (agent/grounding.py), and the second look it earns a call
whose values were all made up."""
import json

import pytest

from agent import Agent, Reply, ScriptedModel
from agent.evaluation.runner import FirstReply
from agent.grounding import Conversation, made_up, said
from agent.models import tool_call
from agent.protocols import NativeProtocol, PromptProtocol
from agent.tools import Registry

TRIANGLE = "Calculate the area of a triangle given the base is 10 meters and height is 5 meters."


@pytest.mark.parametrize("arguments", [
    {"base": 10, "height": 5},
    {"base": 10.0, "height": 7},  # one value given is enough
    {"shape": "Triangle"},  # a word of the task, in another case
    {"shape": "right triangle"},  # one of its words
    {"note": "5"},  # a number written in a string
    {"flag": True},  # booleans are never made up: they have no other source
    {},  # nothing to look at
])
def test_a_call_with_a_value_the_task_gives_is_not_made_up(arguments):
    assert made_up(arguments, {}, Conversation([TRIANGLE])) == []


def test_a_call_whose_every_value_is_new_is_made_up():
    found = made_up({"weight": 70, "height": 1.75, "who": {"name": "Ann"}}, {}, Conversation([TRIANGLE]))
    assert found == ["weight=70", "height=1.75", 'who.name="Ann"']


@pytest.mark.parametrize("text, value", [
    ("Transfer 1,000 euros", 1000),
    ("an interest rate of 5%", 0.05),
    ("an interest rate of 5%", 5),
    ("two circles", 2),
    ("a radius of 2.50 m", 2.5),
    ("a temperature of -3 degrees", -3),
    ("100 million outstanding shares", 100_000_000),
    ("a payout of 2.5 billion USD", 2_500_000_000),
    ("a rate of 4 percent", 0.04),
    ("a budget of 30k", 30_000),
])
def test_numbers_are_read_as_the_text_writes_them(text, value):
    assert Conversation([text]).gives(value)


def test_a_value_the_tool_itself_names_is_not_looked_at():
    parameters = {"type": "object", "properties": {
        "unit": {"type": "string", "enum": ["celsius", "kelvin"]},
        "precision": {"type": "integer", "default": 3},
        "city": {"type": "string"}}}
    conversation = Conversation(["What is the weather like?"])
    assert made_up({"unit": "kelvin", "precision": 3}, parameters, conversation) == []  # nothing left to look at
    assert made_up({"unit": "kelvin", "city": "Paris"}, parameters, conversation) == ['city="Paris"']


def test_only_what_the_user_and_the_tools_said_counts():
    history = [{"role": "system", "content": "Example: weather in Paris"},
               {"role": "user", "content": "What is the capital of France?"},
               {"role": "assistant", "content": "Paris, I think"},
               {"role": "tool", "tool_call_id": "1", "content": "sunny in Lyon"}]
    conversation = Conversation(said(history))
    assert made_up({"city": "Paris"}, {}, conversation) == ['city="Paris"']
    assert made_up({"city": "Lyon"}, {}, conversation) == []


def bmi_registry() -> Registry:
    registry = Registry()

    @registry.tool(parameters={"type": "object", "required": ["weight", "height"], "properties": {
        "weight": {"type": "number"}, "height": {"type": "number"}}})
    def body_mass_index(weight, height):
        """Body mass index from a weight in kg and a height in m."""
        return round(weight / height ** 2, 1)

    return registry


def call(**arguments) -> Reply:
    return Reply(content=json.dumps([{"type": "tool_call", "tool": "body_mass_index", "arguments": arguments}]))


def final(answer: str) -> Reply:
    return Reply(content=json.dumps({"type": "final", "answer": answer}))


def test_made_up_values_are_not_run_and_the_model_may_decline():
    registry = bmi_registry()
    model = ScriptedModel([call(weight=70, height=1.75), final("No tool computes a triangle's area: it is 25 m².")])
    result = Agent(model, registry, PromptProtocol(registry)).run(TRIANGLE)
    assert (result.status, result.answer) == ("final", "No tool computes a triangle's area: it is 25 m².")
    assert result.tool_calls == [] and result.errors == {"made_up": 1} and result.reasks == 1
    note = model.calls[1]["messages"][-1]["content"]
    assert note.startswith("Not run yet: no value of body_mass_index(weight=70, height=1.75) appears in the task")
    assert len(result.messages) == 3  # the call and the note are not kept in the history


def test_the_same_call_sent_again_after_the_look_runs():
    registry = bmi_registry()
    model = ScriptedModel([call(weight=70, height=1.75), call(weight=70, height=1.75), final("22.9")])
    result = Agent(model, registry, PromptProtocol(registry)).run("My body mass index, please?")
    assert result.status == "final" and result.errors == {"made_up": 1}
    assert [c["arguments"] for c in result.tool_calls] == [{"weight": 70, "height": 1.75}]


def test_values_the_task_or_a_result_gives_are_run_at_once():
    registry = bmi_registry()
    model = ScriptedModel([call(weight=80, height=1.8), final("24.7")])
    result = Agent(model, registry, PromptProtocol(registry)).run("BMI at 80 kg and 1.8 m?")
    assert result.status == "final" and result.errors == {} and len(model.calls) == 2


def test_native_calls_are_taken_as_the_api_gives_them():
    registry = bmi_registry()
    native = Reply(tool_calls=[tool_call("call_1", "body_mass_index", {"weight": 70, "height": 1.75})],
                   finish_reason="tool_calls")
    model = ScriptedModel([native, Reply(content="22.9")])
    result = Agent(model, registry, NativeProtocol(registry)).run(TRIANGLE)
    assert result.status == "final" and result.errors == {} and len(result.tool_calls) == 1


def test_a_benchmark_scoring_the_first_reply_scores_the_one_after_the_look():
    registry = bmi_registry()
    protocol = FirstReply(PromptProtocol(registry))
    model = ScriptedModel([call(weight=70, height=1.75), final("No tool does triangles.")])
    result = Agent(model, registry, protocol).run(TRIANGLE)
    assert (result.status, result.answer, protocol.calls) == ("final", "No tool does triangles.", [])
