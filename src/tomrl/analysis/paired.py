"""Paired tests of two models (training arms) answering the same questions, and Holm's correction.

    from tomrl.analysis.paired import paired_comparison, holm_adjust
    result = paired_comparison(a_correct, b_correct, clusters=question_ids, seed=0)
    result.only_a, result.only_b, result.p_value        # discordant pairs, exact McNemar p
    result.difference.format_points()                   # accuracy A − B, paired bootstrap 95 % interval
    holm_adjust([0.01, 0.04, 0.03])                     # [0.03, 0.06, 0.06]

Used by :mod:`tomrl.analysis.study_report` to compare a study's training arms (GRPO vs SFT …) on
the questions both answered; the hand-computed checks are in tests/analysis/test_paired.py.

Why these methods:

- Two arms scored on the *same* questions are paired: most questions are right (or wrong) for
  both, and only the discordant ones say which arm is better. The exact McNemar test is the
  two-sided binomial test of "A-only right" among the discordant pairs against 1/2; it needs no
  large-sample approximation, which matters with the few dozen discordant pairs a small study
  has. The independent-samples interval of :mod:`tomrl.analysis.significance` ignores the
  pairing and is needlessly wide here.
- The interval of the accuracy difference is a percentile bootstrap over the pairs, seeded so a
  report is reproducible. With ``clusters`` (a question id per pair) whole clusters are resampled:
  when seeds are pooled, one question appears once per seed and its pairs are correlated, so
  resampling questions rather than pairs keeps the interval honest.
- Many arm comparisons are made at once (arm pairs × mixtures × tasks); Holm's step-down
  correction keeps the family-wise error at the nominal level and is uniformly more powerful than
  Bonferroni.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Hashable, Sequence

from tomrl.analysis.significance import Interval


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """Two-sided exact McNemar p-value from the discordant counts.

    Under "no difference" each of the ``d = only_a + only_b`` discordant pairs favours A with
    probability 1/2, so ``p = min(1, 2 · P(X ≤ min(only_a, only_b)))`` with ``X ~ Binomial(d, 1/2)``
    (the doubled smaller tail, as R's ``mcnemar.exact`` and ``binom.test`` give for p = 1/2).
    No discordant pair: p = 1.
    """
    if only_a < 0 or only_b < 0:
        raise ValueError(f"discordant counts must be non-negative, got {only_a} and {only_b}")
    discordant = only_a + only_b
    if discordant == 0:
        return 1.0
    tail = sum(math.comb(discordant, i) for i in range(min(only_a, only_b) + 1))
    # Exact integer arithmetic: the binomial tail of a few thousand pairs has no rounding error.
    return min(1.0, 2 * tail / 2**discordant)


def holm_adjust(p_values: Sequence[float]) -> list[float]:
    """Holm–Bonferroni adjusted p-values, in the order given.

    Sorted ascending, the i-th smallest (1-based) becomes ``(m − i + 1) · p_(i)``, made
    non-decreasing along the sorted order and capped at 1. A comparison is significant at family-
    wise level α when its adjusted p-value is below α.
    """
    m = len(p_values)
    for p in p_values:
        if not 0 <= p <= 1:
            raise ValueError(f"p-values must be in [0, 1], got {p}")
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


def paired_bootstrap_difference(
    a_correct: Sequence[bool],
    b_correct: Sequence[bool],
    clusters: Sequence[Hashable] | None = None,
    resamples: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> Interval:
    """Accuracy of A minus accuracy of B over paired answers, with a percentile bootstrap interval.

    Pair i is (``a_correct[i]``, ``b_correct[i]``), the two arms' answers to one question. Without
    ``clusters`` pairs are resampled; with them, clusters (e.g. question ids pooled over seeds)
    are resampled whole and the difference is Σ d / Σ pairs over the drawn clusters.
    """
    import numpy as np

    if len(a_correct) != len(b_correct):
        raise ValueError(f"paired answers need equal lengths, got {len(a_correct)} and {len(b_correct)}")
    if not a_correct:
        raise ValueError("no paired answers")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    keys = list(clusters) if clusters is not None else list(range(len(a_correct)))
    if len(keys) != len(a_correct):
        raise ValueError(f"one cluster per pair: got {len(keys)} clusters for {len(a_correct)} pairs")
    index: dict[Hashable, int] = {}
    sums: list[int] = []
    sizes: list[int] = []
    for key, a, b in zip(keys, a_correct, b_correct):
        slot = index.setdefault(key, len(sums))
        if slot == len(sums):
            sums.append(0)
            sizes.append(0)
        sums[slot] += int(bool(a)) - int(bool(b))
        sizes[slot] += 1
    diff_sums, pair_counts = np.asarray(sums, dtype=np.int64), np.asarray(sizes, dtype=np.int64)
    estimate = float(diff_sums.sum() / pair_counts.sum())
    rng = np.random.default_rng(seed)
    count = len(sums)
    estimates = np.empty(resamples)
    chunk = max(1, 2_000_000 // count)  # bounded memory: at most ~2M drawn indices at a time
    for start in range(0, resamples, chunk):
        stop = min(resamples, start + chunk)
        drawn = rng.integers(0, count, size=(stop - start, count))
        estimates[start:stop] = diff_sums[drawn].sum(axis=1) / pair_counts[drawn].sum(axis=1)
    estimates.sort()
    tail = (1 - level) / 2
    # The same percentile positions as tomrl.stats.bootstrap_interval.
    low = float(estimates[int(tail * (resamples - 1))])
    high = float(estimates[int((1 - tail) * (resamples - 1))])
    return Interval(value=estimate, low=min(low, estimate), high=max(high, estimate), level=level)


@dataclass(frozen=True)
class PairedComparison:
    """Two arms on the same questions: the 2×2 table, the exact McNemar p and the bootstrap interval."""

    pairs: int  # paired answers compared
    clusters: int  # distinct questions (bootstrap units)
    both: int  # both right
    only_a: int  # A right, B wrong
    only_b: int  # B right, A wrong
    neither: int
    p_value: float  # exact McNemar, two-sided, uncorrected
    difference: Interval  # accuracy A − accuracy B, paired bootstrap interval

    @property
    def accuracy_a(self) -> float:
        return (self.both + self.only_a) / self.pairs

    @property
    def accuracy_b(self) -> float:
        return (self.both + self.only_b) / self.pairs

    def to_dict(self) -> dict:
        return {**asdict(self), "accuracy_a": self.accuracy_a, "accuracy_b": self.accuracy_b}


def paired_comparison(
    a_correct: Sequence[bool],
    b_correct: Sequence[bool],
    clusters: Sequence[Hashable] | None = None,
    resamples: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> PairedComparison:
    """McNemar's table and exact test, and the paired bootstrap interval of A − B (see the module docstring)."""
    if len(a_correct) != len(b_correct):
        raise ValueError(f"paired answers need equal lengths, got {len(a_correct)} and {len(b_correct)}")
    both = only_a = only_b = neither = 0
    for a, b in zip(a_correct, b_correct):
        a, b = bool(a), bool(b)
        both += a and b
        only_a += a and not b
        only_b += b and not a
        neither += not a and not b
    difference = paired_bootstrap_difference(a_correct, b_correct, clusters, resamples, seed, level)
    distinct = len(set(clusters)) if clusters is not None else len(a_correct)
    return PairedComparison(len(a_correct), distinct, both, only_a, only_b, neither,
                            mcnemar_exact(only_a, only_b), difference)
