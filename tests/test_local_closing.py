"""Where a call's arguments close, read from the probabilities of closing and continuing them, for an optional
parameter the conversation names; on logits made up for a small vocabulary (the real model's steps:
tests/test_local_model.py)."""
import pytest

from agent.models.local_closing import KEEP_OPEN, ObjectClosing
from tests.token_steps import Vocabulary, fed

np = pytest.importorskip("numpy")  # llama-cpp-python's dependency: the `local` extra

CALL = '[{"type": "tool_call", "tool": "get_record", "arguments": {"county":'  # a call up to a key's value
# how Qwen's vocabulary splits the end of a call: a string's closing quote joined to what follows it
VOCABULARY = ['"}}', '",', '}}]', ',', ' "', 'details', '":', ' true', 'Diego', ' County', '\\"', 'x', '}', ' 2022',
              CALL, '{"type": "final", "answer":', ' {"inner":',
              '[{"type": "tool_call", "tool": "other_tool", "arguments": {"county":']
WORDS = Vocabulary(VOCABULARY)
TOKEN, EVERY, piece, logits = WORDS.token, WORDS.every, WORDS.piece, WORDS.logits
NAMED = {"get_record": {"details"}}  # the conversation names get_record's optional parameter "details"


def after(*texts: str, start: str = CALL, named=None) -> ObjectClosing:
    """A closing that has seen these tokens of a completion, after ``start``."""
    trail = fed(start, *texts)
    return ObjectClosing(piece, NAMED if named is None else named, trail)


def test_a_string_value_continued_with_a_third_of_closings_probability_goes_on_to_the_next_key():
    """After '"county": "San Diego', closing the call ('"}}') holds 0.6 and going on to an optional key ('",')
    0.25: more than KEEP_OPEN of 0.6, and "details" is named and not yet written, so the object stays open."""
    closing = after(' "', "Diego")
    assert closing.trail.in_string and closing.unwritten() == {"details"}
    assert closing.choose(logits({'"}}': 0.6, '",': 0.25, " County": 0.15}), EVERY) == TOKEN['",']
    assert closing.kept == 1


def test_a_continuation_less_likely_than_keep_open_leaves_the_object_closed():
    closing = after(' "', "Diego")
    assert closing.choose(logits({'"}}': 0.8, '",': 0.8 * KEEP_OPEN * 0.9, " County": 0.05}), EVERY) is None
    assert closing.kept == 0


@pytest.mark.parametrize("named", [{}, {"get_record": set()}, {"other_tool": {"details"}}])
def test_no_named_parameter_of_this_tool_leaves_the_object_to_close(named):
    """The optional values nobody gave (a make, a permeability) are not written however likely continuing is."""
    closing = after(' "', "Diego", named=named)
    assert closing.choose(logits({'"}}': 0.5, '",': 0.5}), EVERY) is None


def test_a_named_parameter_already_written_is_not_asked_for_again():
    closing = after(' "', "Diego", '",', ' "', "details", '":', " true")
    assert closing.unwritten() == set()
    assert closing.choose(logits({"}}]": 0.55, ",": 0.45}), EVERY) is None


def test_the_tool_is_read_from_the_call_being_written():
    closing = after(' "', "Diego", start='[{"type": "tool_call", "tool": "other_tool", "arguments": {"county":')
    assert closing.choose(logits({'"}}': 0.5, '",': 0.5}), EVERY) is None


def test_an_object_nested_in_the_arguments_and_a_final_answer_are_left_alone():
    nested = after(" {\"inner\":", " 2022")
    assert nested.unwritten() == set()
    assert nested.choose(logits({"}": 0.5, ",": 0.5}), EVERY) is None
    final = after(' "', "x", start='{"type": "final", "answer":')
    assert final.choose(logits({'"}}': 0.5, '",': 0.5}), EVERY) is None


def test_a_comma_inside_a_string_is_its_text_not_a_next_key():
    """Inside "San Diego" a bare ',' would write "San Diego," and is not a continuation of the object."""
    closing = after(' "', "Diego")
    assert closing.choose(logits({'"}}': 0.6, ",": 0.4}), EVERY) is None


def test_after_a_value_that_is_not_a_string_a_comma_continues_the_object():
    closing = after(" 2022")
    assert not closing.trail.in_string
    assert closing.choose(logits({"}}]": 0.55, ",": 0.45}), EVERY) == TOKEN[","]


def test_an_escaped_quote_does_not_end_the_string():
    closing = after(' "', "x", '\\"', "x")
    assert closing.trail.in_string
    assert closing.choose(logits({'"}}': 0.6, ",": 0.4}), EVERY) is None


def test_only_a_continuation_the_grammar_allows_counts():
    """Where the object has no key left to write, the grammar rules ',' out, and the object closes."""
    closing = after(" 2022")
    assert closing.choose(logits({"}}]": 0.55, ",": 0.45}), lambda token: token != TOKEN[","]) is None


@pytest.mark.parametrize("likeliest", ["Diego", ' "', "x"])
def test_a_step_whose_likeliest_token_does_not_close_an_object_is_left_alone(likeliest):
    closing = after(' "')
    assert closing.choose(logits({likeliest: 0.6, '",': 0.4}), EVERY) is None


def test_a_closing_token_the_grammar_does_not_allow_is_left_to_the_grammar():
    closing = after(" 2022")
    assert closing.choose(logits({"}": 0.6, ",": 0.4}), lambda token: token != TOKEN["}"]) is None
