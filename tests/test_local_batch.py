"""A batch's first call named as a reply of one call would name it (agent.models.local_batch): the reading of
replies and the questions asked, with the model's replies scripted (the real model: tests/test_local_model.py)."""
import json

import pytest

from agent.models.local_batch import PROBE, PROBE_STOP, PROBE_TOKENS, batch_tools, first_call, named_tool, opening
from agent.parsing import action_schema


def call(tool: str, **arguments) -> dict:
    return {"type": "tool_call", "tool": tool, "arguments": arguments}


BATCH = json.dumps([call("product_price", product="A"), call("revenue_forecast", product="A", increase=10)])
SCHEMA = action_schema({tool: {"type": "object", "properties": {}}
                        for tool in ("product_price", "revenue_forecast", "price_history")}).schema


class Model:
    """Replies in turn with the texts given (each after the opening it is made to start with), and keeps what
    it was asked."""

    def __init__(self, *continuations: str):
        self.continuations, self.asked = list(continuations), []

    def decode(self, start: str, max_tokens: int | None, stop: str | None) -> str:
        self.asked.append((start, max_tokens, stop))
        return start + self.continuations.pop(0)


def test_a_batch_whose_first_call_is_not_the_one_call_replys_is_written_again_from_that_call():
    redone = ' "arguments": {"product": "A", "increase": 10}}]'
    model = Model('revenue_forecast", "arguments', redone)
    again = first_call(BATCH, SCHEMA, model.decode)
    assert model.asked == [(PROBE, PROBE_TOKENS, PROBE_STOP), ('[{"type": "tool_call", "tool": "revenue_forecast",',
                                                               None, None)]
    assert json.loads(again) == [call("revenue_forecast", product="A", increase=10)]


@pytest.mark.parametrize("probe", [
    'product_price", "arguments',  # the batch's first call: it stands
    'stock_price", "arguments',  # no offered tool
    'price_history", "arguments',  # an offered tool the batch does not hold: the plans disagree
    'revenue_fore',  # a name not written to its end
])
def test_a_batch_stands_where_one_call_names_its_first_tool_or_one_it_does_not_hold(probe):
    model = Model(probe)
    assert first_call(BATCH, SCHEMA, model.decode) is None
    assert len(model.asked) == 1


@pytest.mark.parametrize("content", [
    json.dumps([call("product_price", product="A")]),  # one call, in an array
    json.dumps(call("product_price", product="A")),
    json.dumps({"type": "final", "answer": "[1, 2]"}),
    json.dumps([call("product_price"), {"type": "final", "answer": "done"}]),
    json.dumps([call("product_price"), {"type": "tool_call", "tool": ["revenue_forecast"]}]),
    json.dumps([call("product_price"), "revenue_forecast"]),
    '[{"type": "tool_call", "tool": "product_price"}, {"type": ',  # cut off
    "[" * 100_000,  # deeper than Python's parser goes
    "",
])
def test_replies_that_are_not_a_batch_of_calls_ask_nothing(content):
    model = Model()
    assert first_call(content, SCHEMA, model.decode) is None
    assert model.asked == []


def test_a_batchs_tools_are_read_in_order():
    assert batch_tools(BATCH) == ["product_price", "revenue_forecast"]
    assert batch_tools(json.dumps([call("b"), call("a"), call("b")])) == ["b", "a", "b"]


@pytest.mark.parametrize(("text", "tool"), [
    (PROBE + 'revenue_forecast", "arguments', "revenue_forecast"),
    ("\n " + PROBE + 'a \\"quoted\\" tool", ', 'a "quoted" tool'),
    (PROBE + "revenue_fore", None),
    ('{"type": "final", "answer": "revenue_forecast", ', None),
    ("", None),
])
def test_the_tool_a_one_call_reply_names(text, tool):
    assert named_tool(text) == tool


def test_the_opening_of_a_batch_again_writes_the_tools_name_as_json():
    assert json.loads(opening('say "hi"\\now') + ' "arguments": {}}]') == [call('say "hi"\\now')]


def test_a_batch_stands_where_the_tool_it_holds_and_one_call_names_is_not_offered():
    batch = json.dumps([call("product_price", product="A"), call("stock_price", product="A")])
    model = Model('stock_price", "arguments')
    assert first_call(batch, SCHEMA, model.decode) is None
    assert len(model.asked) == 1
