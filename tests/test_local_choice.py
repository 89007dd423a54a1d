"""The choice between a final answer and a call, read from the probabilities of an action's opening tokens, on
logits made up for a small vocabulary (the real model's choices: tests/test_local_model.py)."""
import math

import pytest

from agent.models.local_choice import CANDIDATES, ODDS, SideChoice, side

np = pytest.importorskip("numpy")  # llama-cpp-python's dependency: the `local` extra

# a vocabulary the way Qwen's splits an action's opening: '{"' starts either side, '[' only a batch of calls
VOCABULARY = ['{"', '[', 'type', '":', ' "', 'final', 'tool', '_call', '",', 'hello', '\n', '{', 'fin', 'f']
TOKEN = {text: number for number, text in enumerate(VOCABULARY)}


def logits(**probabilities: float):
    """Logits over VOCABULARY (padded to more than CANDIDATES tokens) giving these tokens these probabilities,
    the rest a negligible share; a keyword names a token by its place in VOCABULARY (t0, t1...)."""
    values = np.full(CANDIDATES + 20, -30.0, dtype=np.single)
    for name, probability in probabilities.items():
        values[int(name[1:])] = math.log(probability) if probability > 0 else -30.0
    return values


def p(text: str) -> str:
    return f"t{TOKEN[text]}"


def follow(choice: SideChoice, steps: list[dict], allows=lambda token: token < len(VOCABULARY)) -> list[int]:
    """The tokens taken over ``steps`` (each the probabilities of one step), the way CheckedGreedy takes them."""
    taken = []
    for probabilities in steps:
        if choice.settled:
            break
        values = logits(**probabilities)
        chosen = choice.choose(values, allows)
        token = chosen if chosen is not None else max((t for t in range(len(values)) if allows(t)),
                                                      key=lambda t: values[t])
        taken.append(token)
        if not choice.settled:  # as CheckedGreedy: a token is shown only while the side is open
            choice.seen(token)
    return taken


def opening_steps(batch: float, final: float) -> list[dict]:
    """'{"' (the rest of the first step: '[', a batch of calls), then 'type', '":', ' "', then 'final' against
    'tool' in the proportion ``final``."""
    return [{p('{"'): 1 - batch, p('['): batch}, {p("type"): 1.0}, {p('":'): 1.0}, {p(' "'): 1.0},
            {p("final"): final, p("tool"): 1 - final}]


def test_an_opening_settles_a_side_once_it_can_only_lead_to_one():
    assert side("") == side('{"') == side('{"type":"') == "open"
    assert side('{"type":"f') == side('{"type":"final","answer":"x"}') == "final"
    assert side("[") == side('{"type":"tool') == side('[{"type":"tool_call"') == "call"
    assert side('{"name"') is None and side("hello") is None


def test_the_likeliest_token_is_taken_when_its_side_holds_most_of_the_probability():
    choice = SideChoice(VOCABULARY.__getitem__)
    taken = follow(choice, opening_steps(batch=0.2, final=0.7))  # final 0.8 * 0.7 = 0.56 against 0.44
    assert [VOCABULARY[t] for t in taken] == ['{"', "type", '":', ' "', "final"]
    assert choice.settled and not choice.flipped
    assert choice.mass["final"] == pytest.approx(0.56, abs=1e-3) and choice.mass["call"] == pytest.approx(0.44, abs=1e-3)


def test_a_call_split_between_two_openings_is_taken_where_it_holds_odds_times_the_answers_probability():
    """'{"' is the likeliest first token (0.6), and 'final' after it (0.55): greedy answers. But calling holds the
    batch's 0.4 and 0.6 * 0.45: 0.67 against 0.33, twice as much, so the call is taken (as a single call)."""
    choice = SideChoice(VOCABULARY.__getitem__)
    taken = follow(choice, opening_steps(batch=0.4, final=0.55))
    assert [VOCABULARY[t] for t in taken] == ['{"', "type", '":', ' "', "tool"]
    assert choice.flipped and choice.mass["call"] >= ODDS * choice.mass["final"]


def test_a_call_that_is_likelier_but_not_odds_times_so_leaves_the_answer():
    """0.55 against 0.45: likelier, but not by ODDS; on BFCL's questions no tool fits, the model gives calling
    such a share too."""
    choice = SideChoice(VOCABULARY.__getitem__)
    taken = follow(choice, opening_steps(batch=0.25, final=0.6))
    assert VOCABULARY[taken[-1]] == "final" and not choice.flipped
    assert choice.mass["final"] < choice.mass["call"] < ODDS * choice.mass["final"]


def test_an_answer_split_between_tokens_is_taken_over_a_greedy_call_where_it_holds_odds_times_its_probability():
    """After '{"type": "', 'tool' is the likeliest token (0.3), but the answer's 'final', 'fin' and 'f' hold 0.7."""
    choice = SideChoice(VOCABULARY.__getitem__)
    steps = opening_steps(batch=0.0, final=0.5)[:4] + [{p("tool"): 0.3, p("final"): 0.25, p("fin"): 0.25, p("f"): 0.2}]
    taken = follow(choice, steps)
    assert VOCABULARY[taken[-1]] in ("final", "fin") and choice.flipped
    assert choice.mass["final"] == pytest.approx(0.7, abs=1e-3)


def test_only_tokens_the_grammar_allows_count():
    """Where the grammar rules out the batch's '[' (one call per reply, or a final answer only), its probability
    is not calling's, and greedy's answer stands."""
    choice = SideChoice(VOCABULARY.__getitem__)
    taken = follow(choice, opening_steps(batch=0.4, final=0.55), allows=lambda token: token not in (TOKEN["["],)
                   and token < len(VOCABULARY))
    assert VOCABULARY[taken[-1]] == "final" and not choice.flipped


def test_whitespace_before_the_opening_leaves_the_side_open():
    choice = SideChoice(VOCABULARY.__getitem__)
    taken = follow(choice, [{p("\n"): 0.9, p('['): 0.1}, *opening_steps(batch=0.0, final=0.9)])
    assert VOCABULARY[taken[0]] == "\n" and VOCABULARY[taken[-1]] == "final"


def test_a_grammar_of_another_schema_is_left_to_greedy_decoding():
    """A client's own response_format: no token of its opening is an action's, so nothing is chosen."""
    choice = SideChoice(VOCABULARY.__getitem__)
    assert choice.choose(logits(**{p("hello"): 0.9, p("{"): 0.1}), lambda token: token == TOKEN["hello"]) is None
    assert choice.settled and not choice.flipped


@pytest.mark.parametrize("final, called", [(0.6, True), (0.7, False)])
def test_where_the_user_names_a_tool_the_call_is_taken_unless_the_answer_holds_odds_times_its_share(final, called):
    """"The area of a circle" with geometry_area_circle offered: calling's 0.4 against the answer's 0.6 is taken
    (the answer holds less than twice it); 0.3 against 0.7 is not."""
    choice = SideChoice(VOCABULARY.__getitem__, tool_named=True)
    taken = follow(choice, opening_steps(batch=0.0, final=final))
    assert (VOCABULARY[taken[-1]] == "tool") is called and choice.flipped is called


def test_a_named_tool_does_not_make_an_answer_easier_to_take_over_a_greedy_call():
    """The answer's 0.6 against a greedy call's 0.4 (split): it needs ODDS times calling's share, named or not."""
    choice = SideChoice(VOCABULARY.__getitem__, tool_named=True)
    steps = opening_steps(batch=0.0, final=0.5)[:4] + [{p("tool"): 0.4, p("final"): 0.3, p("fin"): 0.3}]
    taken = follow(choice, steps)
    assert VOCABULARY[taken[-1]] == "tool" and not choice.flipped
