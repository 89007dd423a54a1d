"""A final answer's quotation marks written escaped, so that the answer is not cut at the first word it quotes; on
logits made up for a small vocabulary (the real model's steps: tests/test_local_model.py)."""
import pytest

from agent.models.local_quote import AnswerQuote
from tests.token_steps import Vocabulary, fed

np = pytest.importorskip("numpy")  # llama-cpp-python's dependency: the `local` extra

ANSWER = '{"type": "final", "answer": "Call it with category ='  # a final answer, as the model writes it
VOCABULARY = [' "', ' \\"', '\\"', '"', '"}', '."', 'reading', '="', '=', ' word', ANSWER,
              '{"type": "final", "answer": "', '{"type": "tool_call", "tool": "t", "arguments": {"q": "a =',
              '{"type": "final", "answer": "Use print', '("', '(']
WORDS = Vocabulary(VOCABULARY)
TOKEN, EVERY, piece, logits = WORDS.token, WORDS.every, WORDS.piece, WORDS.logits


def after(*texts: str, start: str = ANSWER, vocabulary=TOKEN) -> AnswerQuote:
    trail = fed(start, *texts)
    return AnswerQuote(piece, vocabulary.get, trail)


def test_a_quotation_opened_after_a_space_is_written_escaped_and_so_is_its_closing_mark():
    """BFCL's simple_python_225, cut at 'category = ' before: the quotation goes on, and the answer with it."""
    quote = after()
    assert quote.choose(logits({' "': 0.8, " word": 0.2}), EVERY) == TOKEN[' \\"']
    closing = after(' \\"', "reading")
    assert closing.choose(logits({'"': 0.7, '"}': 0.3}), EVERY) == TOKEN['\\"']  # after a word, but open
    assert quote.escaped == 1 and closing.escaped == 1


def test_a_mark_after_a_word_or_a_full_stop_ends_the_answer_as_before():
    assert after(' \\"', "reading", '\\"', " word").choose(logits({'"}': 0.9, '."': 0.1}), EVERY) is None
    assert after(" word").choose(logits({'."': 0.9, " word": 0.1}), EVERY) is None


def test_without_the_escaped_token_the_mark_comes_alone_or_after_the_text_before_it():
    no_space_escape = {text: token for text, token in TOKEN.items() if text != ' \\"'}
    assert after(vocabulary=no_space_escape).choose(logits({' "': 0.9, " word": 0.1}), EVERY) == TOKEN['\\"']
    only_space = {text: token for text, token in TOKEN.items() if "\\" not in text}
    assert only_space.get(" ") is None  # no lone space token either: nothing to take
    assert after(vocabulary=only_space).choose(logits({' "': 0.9, " word": 0.1}), EVERY) is None
    assert after(vocabulary={"=": TOKEN["="]}).choose(logits({'="': 0.9, " word": 0.1}), EVERY) == TOKEN["="]


def test_a_quotation_at_the_answers_start_or_after_a_bracket_opens_too():
    assert after(start=VOCABULARY[11]).choose(logits({'"': 0.6, " word": 0.4}), EVERY) == TOKEN['\\"']
    bracket = after(start=VOCABULARY[13])  # no '(\\"' token: the bracket now, the mark at the next step
    assert bracket.choose(logits({'("': 0.6, " word": 0.4}), EVERY) == TOKEN["("]
    assert after("(", start=VOCABULARY[13]).choose(logits({'"': 0.6, " word": 0.4}), EVERY) == TOKEN['\\"']


def test_call_arguments_keys_and_a_mark_already_escaped_are_left_alone():
    assert after(start=VOCABULARY[12]).choose(logits({' "': 0.9, " word": 0.1}), EVERY) is None  # an argument
    assert after(start='{"type": "final", "').choose(logits({'"': 0.9, " word": 0.1}), EVERY) is None  # a key
    assert after().choose(logits({' \\"': 0.9, " word": 0.1}), EVERY) is None  # the model escaped it itself
    assert after("\\").choose(logits({'"': 0.9, " word": 0.1}), EVERY) is None  # a backslash before: escaped


def test_only_a_token_the_grammar_allows_is_taken():
    quote = after()
    assert quote.choose(logits({' "': 0.8, " word": 0.2}), lambda token: token != TOKEN[' \\"']) == TOKEN['\\"']
