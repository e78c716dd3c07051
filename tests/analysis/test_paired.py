"""The paired tests of tomrl.analysis.paired against values worked out by hand."""

from __future__ import annotations

import pytest

from tomrl.analysis.paired import holm_adjust, mcnemar_exact, paired_bootstrap_difference, paired_comparison


def test_mcnemar_on_a_table_worked_by_hand():
    # 8 pairs only A right, 2 only B right: d = 10 discordant, X ~ Binomial(10, 1/2).
    # P(X <= 2) = (C(10,0) + C(10,1) + C(10,2)) / 2^10 = (1 + 10 + 45) / 1024 = 56/1024; two-sided: 112/1024.
    assert mcnemar_exact(8, 2) == pytest.approx(112 / 1024)
    assert mcnemar_exact(2, 8) == pytest.approx(112 / 1024)  # symmetric
    # All 10 discordant pairs favour A: 2 * 1/1024.
    assert mcnemar_exact(10, 0) == pytest.approx(2 / 1024)
    # 6 vs 0: 2 / 64 = 0.03125 (the smallest all-one-way table significant at 5 %); 5 vs 0: 2/32 = 0.0625 is not.
    assert mcnemar_exact(6, 0) == pytest.approx(0.03125)
    assert mcnemar_exact(5, 0) == pytest.approx(0.0625)


def test_mcnemar_without_evidence_is_one():
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(1, 0) == 1.0  # 2 * 1/2
    assert mcnemar_exact(5, 5) == 1.0  # 2 * 638/1024, capped
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 2)


def test_mcnemar_large_counts_stay_exact():
    # 1000 vs 1000 cannot reject; 600 vs 400 (z ≈ 6.3) is far below 1e-6.
    assert mcnemar_exact(1000, 1000) == 1.0
    assert 0 < mcnemar_exact(600, 400) < 1e-6


def test_holm_on_known_p_values():
    # Sorted 0.01, 0.03, 0.04 with m = 3: 3×0.01 = 0.03, 2×0.03 = 0.06, 1×0.04 = 0.04 → raised to 0.06 (monotone).
    assert holm_adjust([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    # A textbook list (m = 5): 5×0.005, 4×0.011, 3×0.02, 2×0.04, 1×0.13.
    assert holm_adjust([0.04, 0.005, 0.13, 0.011, 0.02]) == pytest.approx([0.08, 0.025, 0.13, 0.044, 0.06])
    assert holm_adjust([0.5, 0.9]) == pytest.approx([1.0, 1.0])  # capped at 1
    assert holm_adjust([]) == []
    with pytest.raises(ValueError):
        holm_adjust([1.5])


def test_bootstrap_of_a_constant_difference_is_that_difference():
    interval = paired_bootstrap_difference([True] * 20, [False] * 20, seed=3)
    assert (interval.value, interval.low, interval.high) == (1.0, 1.0, 1.0)
    # One cluster holds every pair: every resample is the whole data.
    one = paired_bootstrap_difference([True, False, True, True], [False, False, True, False], clusters=["q"] * 4)
    assert (one.value, one.low, one.high) == (0.5, 0.5, 0.5)


def test_bootstrap_finds_a_planted_difference_and_is_seeded():
    a = [i % 10 < 8 for i in range(100)]  # 80 % right
    b = [i % 10 < 4 for i in range(100)]  # 40 %, nested in A's right answers: 40 discordant, all for A
    interval = paired_bootstrap_difference(a, b, seed=0)
    assert interval.value == pytest.approx(0.4)
    assert 0.25 < interval.low < 0.4 < interval.high < 0.55
    assert paired_bootstrap_difference(a, b, seed=0) == interval  # same seed, same interval
    null = paired_bootstrap_difference(a, a[::-1], seed=0)  # same accuracy, different questions right
    assert null.low < 0 < null.high


def test_clustered_bootstrap_is_wider_when_seeds_repeat_questions():
    # The same 30 questions answered by 4 seeds that agree: 120 pairs but only 30 independent questions.
    a = [q % 3 != 0 for q in range(30)] * 4
    b = [q % 2 == 0 for q in range(30)] * 4
    questions = [f"q{q}" for q in range(30)] * 4
    naive = paired_bootstrap_difference(a, b, seed=1)
    clustered = paired_bootstrap_difference(a, b, clusters=questions, seed=1)
    assert naive.value == clustered.value
    assert (clustered.high - clustered.low) > 1.5 * (naive.high - naive.low)  # about 2× (√4)


def test_paired_comparison_table():
    a = [True, True, False, False, True]
    b = [True, False, True, False, False]
    result = paired_comparison(a, b, resamples=200)
    assert (result.both, result.only_a, result.only_b, result.neither) == (1, 2, 1, 1)
    assert result.pairs == 5 and result.clusters == 5
    assert result.p_value == pytest.approx(1.0)  # 2 × P(X ≤ 1 | 3) = 2 × 4/8
    assert result.accuracy_a == pytest.approx(0.6) and result.accuracy_b == pytest.approx(0.4)
    assert result.difference.value == pytest.approx(0.2)
    with pytest.raises(ValueError):
        paired_comparison([True], [True, False])
