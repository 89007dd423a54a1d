"""Paired statistics for comparing arms on the same tasks, with the standard library only.

- ``mcnemar``: the exact McNemar test, a two-sided binomial test on the discordant pairs (runs one arm passed
  and the other failed): p = min(1, 2 * P(X <= min(b, c))) for X ~ Binomial(b + c, 1/2).
- ``bootstrap_difference``: a paired bootstrap 95% interval on the difference in pass rate, resampling tasks
  (with all their repeats) with replacement, ``RESAMPLES`` times, from a fixed seed (``SEED``), so the same
  runs always give the same interval.
- ``arm_interval``: a 95% interval on one arm's pass rate: Wilson's score interval for one run a task, the
  bootstrap over tasks of the mean per-task pass fraction with ``--repeat`` (repeats of a task are not
  independent of each other).
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass

SEED = 20261130
RESAMPLES = 2000
LEVEL = 0.95
ALPHA = 1 - LEVEL
_Z = 1.959963984540054  # the standard normal's 97.5% quantile


def mcnemar(b: int, c: int) -> float:
    """The exact two-sided McNemar p-value for ``b`` pairs won and ``c`` lost; 1.0 with no discordant pair."""
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(b, c) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def wilson(passed: int, runs: int) -> tuple[float, float]:
    """Wilson's 95% score interval for ``passed`` of ``runs``; (0, 1) with no runs."""
    if runs == 0:
        return 0.0, 1.0
    p, z2 = passed / runs, _Z * _Z
    centre = (p + z2 / (2 * runs)) / (1 + z2 / runs)
    half = _Z * math.sqrt(p * (1 - p) / runs + z2 / (4 * runs * runs)) / (1 + z2 / runs)
    return max(0.0, centre - half), min(1.0, centre + half)


def _percentiles(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    low = ordered[int(math.floor(ALPHA / 2 * (len(ordered) - 1)))]
    high = ordered[int(math.ceil((1 - ALPHA / 2) * (len(ordered) - 1)))]
    return low, high


def bootstrap_mean(values: list[float], seed: int = SEED, resamples: int = RESAMPLES) -> tuple[float, float]:
    """A percentile bootstrap 95% interval on the mean of ``values`` (one a task)."""
    if not values:
        return 0.0, 1.0
    rng = random.Random(seed)
    n = len(values)
    means = [sum(rng.choices(values, k=n)) / n for _ in range(resamples)]
    return _percentiles(means)


def bootstrap_difference(pairs: list[tuple[float, float]], seed: int = SEED,
                         resamples: int = RESAMPLES) -> tuple[float, float]:
    """A paired percentile bootstrap 95% interval on mean(a) - mean(b) over ``pairs`` of (a, b) pass fractions,
    one pair a task."""
    return bootstrap_mean([a - b for a, b in pairs], seed, resamples)


def arm_interval(fractions: list[float], runs_per_task: int) -> tuple[float, float]:
    """A 95% interval on an arm's pass rate from its per-task pass fractions."""
    if runs_per_task <= 1:
        return wilson(round(sum(fractions)), len(fractions))
    return bootstrap_mean(fractions)


@dataclass(frozen=True)
class Comparison:
    """Arm ``a`` against arm ``b`` on the runs both made (paired by task and repeat)."""

    a: str
    b: str
    pairs: int  # runs paired
    won: int  # a passed, b failed
    lost: int  # a failed, b passed
    p_value: float
    difference: float  # a's pass rate minus b's, over the paired runs
    low: float  # its 95% interval
    high: float

    @property
    def significant(self) -> bool:
        return self.p_value < ALPHA

    def verdict(self) -> str:
        p = format_p(self.p_value)
        if not self.pairs:
            return "no runs to compare"
        if not self.significant:
            return f"no significant difference ({p})"
        better, worse = (self.a, self.b) if self.won > self.lost else (self.b, self.a)
        return f"{better} is better than {worse} ({p})"

    def as_dict(self) -> dict:
        return {"a": self.a, "b": self.b, "pairs": self.pairs, "won": self.won, "lost": self.lost,
                "p_value": self.p_value, "difference": round(self.difference, 4),
                "interval": [round(self.low, 4), round(self.high, 4)], "verdict": self.verdict()}


def format_p(p: float) -> str:
    return "p<0.001" if p < 0.001 else f"p={p:.3f}" if p < 0.01 else f"p={p:.2f}"


def compare(a: str, b: str, outcomes: dict[tuple, dict[str, bool]]) -> Comparison:
    """``outcomes`` maps (task, repeat) to {arm: passed}; the runs where both arms have an outcome are paired."""
    paired = [(o[a], o[b]) for o in outcomes.values() if a in o and b in o]
    won = sum(1 for x, y in paired if x and not y)
    lost = sum(1 for x, y in paired if y and not x)
    by_task: dict = {}
    for (task, _), o in outcomes.items():
        if a in o and b in o:
            by_task.setdefault(task, []).append((o[a], o[b]))
    fractions = [(sum(x for x, _ in runs) / len(runs), sum(y for _, y in runs) / len(runs))
                 for runs in by_task.values()]
    difference = (won - lost) / len(paired) if paired else 0.0
    low, high = bootstrap_difference(fractions) if fractions else (0.0, 0.0)
    return Comparison(a, b, len(paired), won, lost, mcnemar(won, lost), difference, low, high)
