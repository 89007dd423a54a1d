"""Where an object closes, read from the probabilities of closing and continuing it, on logits made up for a small
vocabulary (the real model's steps: tests/test_local_model.py)."""
import math

import pytest

from agent.models.local_closing import KEEP_OPEN, ObjectClosing

np = pytest.importorskip("numpy")  # llama-cpp-python's dependency: the `local` extra

# how Qwen's vocabulary splits the end of a call: a string's closing quote joined to what follows it
VOCABULARY = ['"}}', '",', '}}]', ',', ' "', 'details', '":', ' true', '"', 'Diego', ' County', '\\"', 'x', '}']
TOKEN = {text: number for number, text in enumerate(VOCABULARY)}
EVERY = range(len(VOCABULARY)).__contains__  # a grammar that allows every token


def piece(token: int) -> str:
    return VOCABULARY[token] if token < len(VOCABULARY) else "\u00b7"  # the padding: tokens of no JSON


def logits(probabilities: dict[str, float]):
    """Logits over VOCABULARY (padded past the candidates looked at) giving these tokens these probabilities."""
    values = np.full(len(VOCABULARY) + 60, -30.0, dtype=np.single)
    for text, probability in probabilities.items():
        values[TOKEN[text]] = math.log(probability)
    return values


def after(*texts: str) -> ObjectClosing:
    """A closing that has seen these tokens of a completion."""
    closing = ObjectClosing(piece)
    for text in texts:
        closing.seen(TOKEN[text])
    return closing


def test_a_string_value_continued_with_a_third_of_closings_probability_goes_on_to_the_next_key():
    """After '"county": "San Diego', closing the call ('"}}') holds 0.6 and going on to an optional key ('",')
    0.25: more than KEEP_OPEN of 0.6, so the object stays open."""
    closing = after(' "', "Diego")
    assert closing.in_string
    assert closing.choose(logits({'"}}': 0.6, '",': 0.25, " County": 0.15}), EVERY) == TOKEN['",']
    assert closing.kept == 1


def test_a_continuation_less_likely_than_keep_open_leaves_the_object_closed():
    closing = after(' "', "Diego")
    assert closing.choose(logits({'"}}': 0.8, '",': 0.8 * KEEP_OPEN * 0.9, " County": 0.05}), EVERY) is None
    assert closing.kept == 0


def test_a_comma_inside_a_string_is_its_text_not_a_next_key():
    """Inside "San Diego" a bare ',' would write "San Diego," and is not a continuation of the object."""
    closing = after(' "', "Diego")
    assert closing.choose(logits({'"}}': 0.6, ",": 0.4}), EVERY) is None


def test_after_a_value_that_is_not_a_string_a_comma_continues_the_object():
    closing = after(' "', "details", '":', " true")
    assert not closing.in_string
    assert closing.choose(logits({"}}]": 0.55, ",": 0.45}), EVERY) == TOKEN[","]


def test_an_escaped_quote_does_not_end_the_string():
    closing = after(' "', "x", '\\"', "x")
    assert closing.in_string
    assert closing.choose(logits({'"}}': 0.6, ",": 0.4}), EVERY) is None


def test_only_a_continuation_the_grammar_allows_counts():
    """Where the object has no key left to write, the grammar rules ',' out, and the object closes."""
    closing = after(' "', "details", '":', " true")
    assert closing.choose(logits({"}}]": 0.55, ",": 0.45}), lambda token: token != TOKEN[","]) is None


@pytest.mark.parametrize("likeliest", ["Diego", ' "', "x"])
def test_a_step_whose_likeliest_token_does_not_close_an_object_is_left_alone(likeliest):
    closing = after(' "')
    assert closing.choose(logits({likeliest: 0.6, '",': 0.4}), EVERY) is None


def test_a_closing_token_the_grammar_does_not_allow_is_left_to_the_grammar():
    closing = after(' "', "details", '":', " true")
    assert closing.choose(logits({"}": 0.6, ",": 0.4}), lambda token: token != TOKEN["}"]) is None
