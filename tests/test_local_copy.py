"""A call's string value kept a copy of the conversation's words where a copying token is nearly as likely as the
likeliest; on logits made up for a small vocabulary (the real model's steps: tests/test_local_model.py)."""
import pytest

from agent.models.local_copy import COPY, ValueCopy
from agent.models.local_named import said
from tests.token_steps import Vocabulary, fed

np = pytest.importorskip("numpy")  # llama-cpp-python's dependency: the `local` extra

CALL = '[{"type": "tool_call", "tool": "book_hotel", "arguments": {"room_type": "'  # a call inside a string value
VOCABULARY = ['Standard', 'Single', 'single', '",', '"}}', ' room', '10', '/', 'th', ' December', 'x', CALL,
              '{"type": "final", "answer": "', '[{"type": "tool_call", "tool": "book_hotel", "arguments": {"',
              '[{"type": "tool_call", "tool": "book_hotel", "arguments": {"filters": {"kind": "',
              '[{"type": "tool_call", "tool": "book_ticket", "arguments": {"add_ons": ["', 'Back', 'stage', ' Pass',
              ' Access']
WORDS = Vocabulary(VOCABULARY)
TOKEN, EVERY, piece, logits = WORDS.token, WORDS.every, WORDS.piece, WORDS.logits
TASK = [{"role": "system", "content": "Standard rooms are in the tool's documentation, not in the task"},
        {"role": "user", "content": "Book a single room for two nights, starting from 10th December 2022."}]


def after(*texts: str, start: str = CALL, messages=TASK, allowed=None) -> ValueCopy:
    trail = fed(start, *texts)
    return ValueCopy(piece, said(messages), trail, allowed)


def test_a_value_from_memory_gives_way_to_the_tasks_word_when_that_is_nearly_as_likely():
    """'Standard' at 0.32 against 'Single' at 0.25 for "a single room": the copy holds more than COPY of it."""
    copy = after()
    assert copy.choose(logits({"Standard": 0.32, "Single": 0.25, "single": 0.12, "x": 0.31}), EVERY) == TOKEN["Single"]
    assert copy.copied == 1


def test_within_a_value_the_token_that_keeps_the_copy_is_taken():
    """"10" then '/' (10/22/2022, from memory) at 0.41 against 'th' (10th, the task's) at 0.36."""
    copy = after("10")
    assert copy.choose(logits({"/": 0.41, "th": 0.36, " December": 0.23}), EVERY) == TOKEN["th"]


def test_a_copy_less_likely_than_copy_times_the_likeliest_is_not_taken():
    copy = after()
    assert copy.choose(logits({"Standard": 0.6, "Single": 0.6 * COPY * 0.9, "x": 0.1}), EVERY) is None
    assert copy.copied == 0


def test_a_likeliest_token_that_keeps_the_copy_or_ends_the_value_is_left_alone():
    assert after().choose(logits({"Single": 0.4, "Standard": 0.35, "x": 0.25}), EVERY) is None
    assert after("single").choose(logits({'",': 0.5, "x": 0.3, " room": 0.2}), EVERY) is None


def test_a_value_that_is_no_copy_already_is_left_to_the_model():
    copy = after("x")
    assert copy.choose(logits({"Standard": 0.5, " room": 0.5}), EVERY) is None


def test_ending_the_value_is_not_a_copy_that_counts():
    """A value cut short is no better than the model's own: only a token that writes more of the copy counts."""
    copy = after("single")
    assert copy.choose(logits({"x": 0.55, '",': 0.45}), EVERY) is None


def test_keys_final_answers_and_texts_outside_a_call_are_left_alone():
    assert after(start=VOCABULARY[13]).choose(logits({"Standard": 0.5, "Single": 0.5}), EVERY) is None  # a key
    assert after(start=VOCABULARY[12]).choose(logits({"Standard": 0.5, "Single": 0.5}), EVERY) is None  # an answer


def test_a_string_in_an_object_nested_in_the_arguments_is_a_value_too():
    copy = after(start=VOCABULARY[14])
    assert copy.choose(logits({"Standard": 0.5, "Single": 0.5}), EVERY) == TOKEN["Single"]


def test_only_a_copying_token_the_grammar_allows_counts():
    copy = after()
    assert copy.choose(logits({"Standard": 0.4, "Single": 0.35, "single": 0.25}),
                       lambda token: token != TOKEN["Single"]) == TOKEN["single"]


def test_a_value_on_its_way_to_one_the_schema_allows_is_left_to_the_model():
    """BFCL's multiple_81: "the one with backstage access", the add-ons "Backstage Pass", ...: " Pass" at 0.65 had
    been turned to the user's " Access" at 0.35 (and the call re-asked)."""
    task = [{"role": "user", "content": "Book the Eminem concert, the one with backstage access."}]
    start = VOCABULARY[15]
    allowed = {"book_ticket": {"add_ons": ["Backstage Pass", "VIP Seating"]}}
    probabilities = logits({" Pass": 0.65, " Access": 0.35})
    assert after("Back", "stage", start=start, messages=task, allowed=allowed).choose(probabilities, EVERY) is None
    assert after("Back", "stage", start=start, messages=task).choose(probabilities, EVERY) == TOKEN[" Access"]
    other = {"book_ticket": {"room_type": ["Backstage Pass"]}}  # another parameter's values do not count
    assert after("Back", "stage", start=start, messages=task, allowed=other).choose(probabilities, EVERY) \
        == TOKEN[" Access"]
