"""Paired statistics: hand-computed values, and properties that hold for any input."""
import math

import pytest
from hypothesis import given, settings, strategies as st

from agent.evaluation.statistics import (Comparison, arm_interval, bootstrap_difference, bootstrap_mean, compare,
                                         format_p, mcnemar, wilson)


@pytest.mark.parametrize("b, c, p", [
    (8, 2, 0.109375),  # 2 * (1 + 10 + 45) / 1024
    (2, 8, 0.109375),
    (10, 0, 2 / 1024),
    (0, 0, 1.0),
    (3, 3, 1.0),  # min(1, 2 * 0.65625)
    (1, 0, 1.0),
    (6, 1, 0.125),  # 2 * (1 + 7) / 128
    (30, 0, 2 / 2 ** 30),
])
def test_exact_mcnemar_matches_hand_computed_values(b, c, p):
    assert mcnemar(b, c) == pytest.approx(p, rel=1e-12)


def test_wilson_interval_matches_hand_computed_values():
    low, high = wilson(5, 10)
    assert (round(low, 4), round(high, 4)) == (0.2366, 0.7634)
    low, high = wilson(0, 10)
    assert low == pytest.approx(0, abs=1e-12) and round(high, 4) == 0.2775
    assert wilson(10, 10)[1] == pytest.approx(1.0) and wilson(0, 0) == (0.0, 1.0)


def test_bootstrap_is_the_same_every_time_and_a_constant_difference_has_no_width():
    pairs = [(1, 0)] * 6 + [(0, 0)] * 4 + [(1, 1)] * 10
    assert bootstrap_difference(pairs) == bootstrap_difference(pairs)
    assert bootstrap_difference([(1, 0)] * 5) == (1.0, 1.0)
    low, high = bootstrap_difference(pairs)
    assert 0 < low < 0.3 < high < 0.6  # the difference is 6/20 = 0.3


def test_an_arm_interval_is_wilson_for_one_run_a_task_and_a_bootstrap_with_repeats():
    assert arm_interval([1, 1, 0, 0, 1, 0, 1, 0, 1, 0], 1) == wilson(5, 10)
    fractions = [1, 2 / 3, 1 / 3, 0, 1, 1]
    assert arm_interval(fractions, 3) == bootstrap_mean(fractions)


def test_compare_pairs_by_task_and_repeat_and_says_which_arm_is_better():
    outcomes = {(f"t{i}", 0): {"a": True, "b": i >= 9} for i in range(12)}  # a wins 9, never loses
    result = compare("a", "b", outcomes)
    assert (result.pairs, result.won, result.lost) == (12, 9, 0)
    assert result.p_value == pytest.approx(2 / 512)
    assert result.difference == pytest.approx(0.75)
    assert result.verdict() == "a is better than b (p=0.004)"
    assert compare("b", "a", outcomes).verdict() == "a is better than b (p=0.004)"
    even = {("t1", 0): {"a": True, "b": False}, ("t2", 0): {"a": False, "b": True}, ("t3", 0): {"a": True}}
    tied = compare("a", "b", even)
    assert tied.pairs == 2 and tied.verdict() == "no significant difference (p=1.00)"


def test_repeats_of_a_task_are_resampled_together():
    outcomes = {("t1", r): {"a": True, "b": False} for r in range(3)}
    outcomes.update({("t2", r): {"a": r == 0, "b": False} for r in range(3)})
    result = compare("a", "b", outcomes)
    assert (result.won, result.lost) == (4, 0)
    assert (result.low, result.high) == (pytest.approx(1 / 3), pytest.approx(1.0))  # tasks: +1, +1/3


def test_p_values_are_written_for_reading():
    assert [format_p(p) for p in (0.0004, 0.0042, 0.109375, 1.0)] == ["p<0.001", "p=0.004", "p=0.11", "p=1.00"]


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 400), st.integers(0, 400))
def test_mcnemar_is_a_probability_and_symmetric(b, c):
    p = mcnemar(b, c)
    assert 0 <= p <= 1 and math.isfinite(p)
    assert p == mcnemar(c, b)
    if b == c:
        assert p == 1.0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=40))
def test_bootstrap_interval_is_ordered_and_holds_the_observed_difference(pairs):
    low, high = bootstrap_difference(pairs, resamples=300)
    observed = sum(a - b for a, b in pairs) / len(pairs)
    assert -1 <= low <= high <= 1
    if len({a - b for a, b in pairs}) == 1:
        assert low == high == observed


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 50), st.integers(0, 50))
def test_swapping_the_arms_mirrors_the_comparison(won, lost):
    outcomes = {(f"w{i}", 0): {"a": True, "b": False} for i in range(won)}
    outcomes.update({(f"l{i}", 0): {"a": False, "b": True} for i in range(lost)})
    ab, ba = compare("a", "b", outcomes), compare("b", "a", outcomes)
    assert (ab.won, ab.lost, ab.p_value) == (ba.lost, ba.won, ba.p_value)
    assert ab.difference == pytest.approx(-ba.difference)
    assert isinstance(ab, Comparison) and ab.verdict() == ba.verdict()
