"""The tool a call names, read from the probability of every token that spells it; on logits made up for a small
vocabulary (the real model's steps: tests/test_local_model.py)."""
import pytest

from agent.models.local_named import tool_names
from agent.models.local_tool import ToolChoice
from agent.parsing import action_schema
from tests.token_steps import Vocabulary, fed

np = pytest.importorskip("numpy")  # llama-cpp-python's dependency: the `local` extra

CALL = '[{"type": "tool_call", "tool": "'  # a call's tool name begins, as the model writes it
TOOLS = ["get_collectables", "lawsuit_details_find", "calculate_binomial", "calculate_mean"]
VOCABULARY = ["calculate", "l", "laws", "law", "suit", "_details", "_find", '",', '"', "_bin", "_mean",
              "get", " lawsuit", CALL, "add", "days", "day", '{"type": "final", "answer": "',
              '[{"type": "tool_call", "tool": "x", "arguments": {"q": "']
WORDS = Vocabulary(VOCABULARY)
TOKEN, EVERY, piece, logits = WORDS.token, WORDS.every, WORDS.piece, WORDS.logits


def at(*texts: str, start: str = CALL, tools=TOOLS) -> ToolChoice:
    trail = fed(start, *texts)
    return ToolChoice(piece, tools, trail)


def test_a_tool_whose_spellings_together_are_likelier_is_taken_through_its_likeliest_token():
    """BFCL's multiple_139: "calculate" 0.25 against "l", "laws" and "law" 0.17, 0.11 and 0.03."""
    choice = at()
    assert choice.choose(logits({"calculate": 0.25, "l": 0.17, "laws": 0.11, "law": 0.03}), EVERY) == TOKEN["l"]
    assert choice.taken == 1


def test_the_likeliest_token_stays_where_its_tool_holds_the_most():
    assert at().choose(logits({"calculate": 0.4, "l": 0.17, "laws": 0.11, "law": 0.03}), EVERY) is None
    assert at().choose(logits({"l": 0.3, "calculate": 0.28}), EVERY) is None


def test_a_start_several_tools_share_counts_only_for_keeping_the_likeliest():
    """The own suite's "What date is 100 days after 2026-01-01, and what day of the week is it?": "add" 0.47
    against "days" 0.44 and "day" 0.08, which days_between and day_of_week both start with."""
    dates = ["add_to_date", "days_between", "day_of_week"]
    assert at(tools=dates).choose(logits({"add": 0.47, "days": 0.44, "day": 0.08}), EVERY) is None
    assert at().choose(logits({"get": 0.35, "calculate": 0.3}), EVERY) is None  # for neither calculate tool
    assert at().choose(logits({"calculate": 0.3, "get": 0.25, "l": 0.2}), EVERY) is None
    shared = at()  # the likeliest is shared, and one other tool's own spellings hold more
    assert shared.choose(logits({"calculate": 0.3, "l": 0.2, "laws": 0.15}), EVERY) == TOKEN["l"]
    # then, after "calculate": "_bin" 0.4 against "_mean" 0.35 is the model's own choice
    assert at("calculate").choose(logits({"_bin": 0.4, "_mean": 0.35}), EVERY) is None


def test_a_token_that_ends_the_name_counts_only_for_the_tool_so_named():
    # after "lawsuit_details": '",' would end a name no tool has; "_find" spells one
    assert at("laws", "uit", start=CALL).choose(logits({'",': 0.6, "_find": 0.4}), EVERY) is None  # "uit": no token
    written = at("law", "suit", "_details")
    assert written.choose(logits({'",': 0.6, "_find": 0.4}), lambda token: token != TOKEN['",']) is None
    assert written._spells("lawsuit_details", TOKEN['",']) == set()
    assert written._spells("lawsuit_details", TOKEN["_find"]) == {"lawsuit_details_find"}


def test_tokens_the_grammar_rules_out_or_that_spell_no_tool_count_for_none():
    allows = lambda token: token != TOKEN["l"]  # noqa: E731
    choice = at()
    assert choice.choose(logits({"calculate": 0.25, "l": 0.17, "laws": 0.11, "law": 0.03}), allows) is None
    assert choice.choose(logits({"calculate": 0.25, " lawsuit": 0.3, "law": 0.03}), EVERY) is None  # a space


def test_only_a_calls_tool_name_and_only_among_two_tools_or_more():
    probabilities = logits({"calculate": 0.25, "l": 0.17, "laws": 0.11, "law": 0.03})
    assert at(start=VOCABULARY[17]).choose(probabilities, EVERY) is None  # a final answer
    assert at(start=VOCABULARY[18]).choose(probabilities, EVERY) is None  # an argument's value
    assert at(start='[{"type": "tool_call", "').choose(probabilities, EVERY) is None  # a key
    assert at(tools=["lawsuit_details_find"]).choose(probabilities, EVERY) is None


def test_the_offered_tools_are_read_from_the_action_schema_in_its_order():
    nothing = {"type": "object", "properties": {}}
    assert tool_names(action_schema({"b_tool": nothing, "a_tool": nothing}).schema) == ["b_tool", "a_tool"]
    assert tool_names({"anyOf": [{"properties": {"tool": {"const": 3}}}]}) == []
    deep: dict = {}
    node = deep
    for _ in range(5000):
        node["anyOf"] = [{}]
        node = node["anyOf"][0]
    assert tool_names(deep) == []
