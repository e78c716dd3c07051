"""The statistics behind the detectors, checked against published and hand-computed values."""

from __future__ import annotations

import math
import random

import pytest

from tomrl.analysis.significance import (
    bonferroni_level,
    cochran_armitage_trend,
    difference_interval,
    from_counts,
    _between_sum,
    _within_sum,
    difference_noise,
    linear_combination_interval,
    pooled,
    window_change,
    z_for,
)


def test_newcombe_published_example():
    # Newcombe (1998), Statistics in Medicine 17:873, Table II, method 10 (score interval without
    # continuity correction): 56/70 − 48/80 = 0.2000 [0.0524, 0.3339]; 9/10 − 3/10 = 0.6 [0.1705, 0.8090].
    diff = difference_interval(from_counts(56, 70), from_counts(48, 80))
    assert diff.value == pytest.approx(0.2)
    assert diff.low == pytest.approx(0.0524, abs=1e-4)
    assert diff.high == pytest.approx(0.3339, abs=1e-4)
    assert diff.above_zero and not diff.below_zero
    small = difference_interval(from_counts(9, 10), from_counts(3, 10))
    assert (small.low, small.high) == pytest.approx((0.1705, 0.8090), abs=1e-4)


def test_difference_with_itself_straddles_zero_and_flips_sign():
    a, b = from_counts(30, 60), from_counts(40, 60)
    same = difference_interval(a, a)
    assert same.value == 0 and same.low < 0 < same.high
    forward, backward = difference_interval(a, b), difference_interval(b, a)
    assert forward.value == pytest.approx(-backward.value)
    assert forward.low == pytest.approx(-backward.high) and forward.high == pytest.approx(-backward.low)


def test_linear_combination_of_one_term_is_the_wilson_interval():
    acc = from_counts(7, 20)
    single = linear_combination_interval([(1.0, acc)])
    assert (single.value, single.low, single.high) == pytest.approx((acc.value, acc.low, acc.high))


def test_difference_of_differences_is_wider_than_each_difference():
    a0, a1, b0, b1 = from_counts(50, 100), from_counts(80, 100), from_counts(50, 100), from_counts(52, 100)
    gap = linear_combination_interval([(1, a1), (-1, a0), (-1, b1), (1, b0)])
    assert gap.value == pytest.approx(0.28)
    assert gap.high - gap.low > difference_interval(a1, a0).high - difference_interval(a1, a0).low


def test_cochran_armitage_hand_computed():
    # N = 12, p̄ = 1/2, T = 0·(1−2) + 1·(2−2) + 2·(3−2) = 2, Var T = ¼ · (20 − 144/12) = 2, z = √2.
    test = cochran_armitage_trend([(0, 1, 4), (1, 2, 4), (2, 3, 4)])
    assert test.z == pytest.approx(math.sqrt(2))
    assert test.p_value == pytest.approx(0.1573, abs=1e-4)
    assert cochran_armitage_trend([(0, 3, 4), (1, 2, 4), (2, 1, 4)]).z == pytest.approx(-math.sqrt(2))


def test_cochran_armitage_without_variation_has_no_trend():
    assert cochran_armitage_trend([(0, 5, 5), (1, 5, 5)]).p_value == 1.0
    assert cochran_armitage_trend([(0, 3, 5)]).z == 0.0


def test_difference_noise_of_white_and_ar1_noise():
    rng = random.Random(0)
    white = [rng.gauss(0, 2) for _ in range(4000)]
    sd, phi = difference_noise(white)
    assert sd == pytest.approx(2, rel=0.05) and phi < 0.05
    x, ar = 0.0, []
    for _ in range(4000):
        x = 0.6 * x + rng.gauss(0, 1)
        ar.append(x)
    sd, phi = difference_noise(ar)
    assert phi == pytest.approx(0.6, abs=0.05)
    assert sd == pytest.approx(1 / math.sqrt(1 - 0.36), rel=0.1)  # stationary sd of AR(1)


def test_difference_noise_ignores_a_smooth_trend():
    rng = random.Random(1)
    curved = [400 * math.exp(-t / 20) + rng.gauss(0, 5) for t in range(200)]
    sd, _ = difference_noise(curved)
    assert sd < 0.05 * 400  # the 400-token fall is not taken for noise (true noise sd: 5)


def test_window_change_hand_computed():
    # d = [1, −1, 1, −1, 1]: mean 0.2, Var(d) = (3·0.64 + 2·1.44)/5 = 0.96; ρ_d < 0 so φ = 0 and
    # σ² = 0.96 / 2. Windows of 2 points: Var(change) = σ² (2·2 − 0) / 2² = σ².
    values = [0.0, 1.0, 0.0, 1.0, 0.0, 1.0]
    change = window_change(values)
    assert (change.early_mean, change.late_mean, change.change) == (0.5, 0.5, 0.0)
    sd, phi = difference_noise(values)
    assert phi == 0.0
    assert sd == pytest.approx(math.sqrt(0.48))
    exact = 1.959964 * sd
    assert change.high == pytest.approx(exact, rel=1e-5) and change.low == pytest.approx(-exact, rel=1e-5)


def test_window_change_sums_match_brute_force():
    phi, n, size = 0.7, 12, 4
    brute_within = sum(phi ** abs(i - j) for i in range(size) for j in range(size))
    brute_between = sum(phi ** abs(i - j) for i in range(size) for j in range(n - size, n))
    assert _within_sum(size, phi) == pytest.approx(brute_within)
    assert _between_sum(size, size, n, phi) == pytest.approx(brute_between)


def test_window_change_detects_a_curved_fall_and_not_flat_noise():
    rng = random.Random(2)
    steps = range(0, 120, 2)
    fall = window_change([(380 * math.exp(-s / 30) + 45) * (1 + rng.gauss(0, 0.1)) for s in steps])
    assert fall.significantly_negative and fall.relative_change < -0.7
    flat_calls = sum(window_change([300 * (1 + rng.gauss(0, 0.1)) for _ in steps]).significantly_negative
                     for _ in range(200))
    assert flat_calls <= 12  # nominal 2.5 % one-sided: 5 of 200 expected


def test_window_change_rejects_degenerate_input():
    with pytest.raises(ValueError):
        window_change([1.0, 2.0])
    with pytest.raises(ValueError):
        window_change([1.0, 2.0, 3.0], window=0.7)
    exact = window_change([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    assert exact.change == 4.0 and exact.low == exact.high == 4.0  # a noiseless line


def test_small_helpers():
    assert bonferroni_level(0.95, 5) == pytest.approx(0.99)
    assert z_for(0.95) == pytest.approx(1.95996, abs=1e-5)
    both = pooled([from_counts(3, 10), from_counts(7, 10)])
    assert (both.k, both.n) == (10, 20)
    with pytest.raises(ValueError):
        from_counts(5, 3)


def test_window_change_calibration():
    """The simulation quoted in significance.py's docstring (400 series per φ, 100 steps each)."""
    from tomrl.analysis.detectors import detect_reasoning_collapse

    def ar1(rng, phi):
        x, series = rng.gauss(0, 1) / math.sqrt(1 - phi**2), []
        for _ in range(100):
            x = phi * x + rng.gauss(0, 1)
            series.append(x)
        return series

    rates = {}
    for phi in (0.0, 0.5, 0.9):
        rng = random.Random(2)
        falling = fired = 0
        for _ in range(400):
            length = [300 + 30 * v for v in ar1(rng, phi)]
            reward = [0.3 * v for v in ar1(rng, phi)]
            falling += window_change(length).significantly_negative
            fired += detect_reasoning_collapse(list(range(100)), reward, length).fired
        rates[phi] = (falling / 400, fired / 400)
    assert rates == {0.0: (0.0175, 0.0), 0.5: (0.035, 0.0), 0.9: (0.08, 0.0)}  # quoted in the docstring
    rng = random.Random(3)
    detected = sum(window_change([(380 * math.exp(-s / 30) + 45) * (1 + rng.gauss(0, 0.1)) for s in range(0, 200, 2)])
                   .significantly_negative for _ in range(100))
    assert detected == 99
