"""The statistics behind the detectors: intervals for differences of accuracies, trend tests.

Pure functions over plain numbers, each small enough to check by hand (tests/analysis/
test_significance.py does). Used by :mod:`tomrl.analysis.detectors`:

    diff = difference_interval(after, before)             # after − before, 95 % MOVER-Wilson interval
    trend = cochran_armitage_trend([(0, 52, 100), (1, 60, 100), (2, 71, 100)])
    fall = window_change(response_length)                  # last third − first third, AR(1) noise

Why these methods:

- Differences and sums of accuracies use MOVER (Zou & Donner 2008; Newcombe 1998 is the
  two-proportion case) built on each accuracy's Wilson interval, so the interval behaves near
  0 % and 100 % and for small n, as :func:`tomrl.stats.wilson_interval` does. Treating the two
  accuracies as independent is conservative when both are measured on the same questions
  (their errors are positively correlated), so a "significant" difference stays trustworthy.
- Accuracy against question order uses the Cochran–Armitage test for a trend in proportions,
  the textbook test for "does the rate rise with an ordered factor".
- Training curves (reward, response length per logged step) carry per-step noise that may be
  autocorrelated. A change is the mean of the last third of the steps minus the mean of the
  first third; its interval treats the noise as AR(1) and estimates it from the first
  differences (Hall & Van Keilegom 2003), which a smooth trend barely touches. Fitting a straight
  line instead fails on the usual shape of collapse (steep fall, then flat): the curvature reads
  as autocorrelated noise and a 77 % fall came out "not significant". Checked by simulation
  (tests/analysis/test_significance.py::test_window_change_calibration, 100 steps, seeded): an
  exponential fall with 10 % noise is detected in 99 of 100 series; trendless AR(1) noise is
  called significantly falling in 1.75 % (φ = 0), 3.5 % (φ = 0.5) and 8.0 % (φ = 0.9) of 400
  series against a nominal 2.5 % (10.3 % at φ = 0.9 with another seeding). Slow wandering is
  partly taken for change, which is why the collapse detector also asks for a 20 % fall and a
  rising reward: on independent AR(1) noise in both it fired in none of those series (1.25 % at
  φ = 0.9 with the other seeding).
- A training effect (trained − base, arm A − arm B) measured on one training run has two sources
  of noise: which questions were asked, which the intervals above cover, and which run training
  happened to produce, which they do not (three runs of the demo with one setup gave 40.0, 50.7 and
  57.3 % on one set of 75 questions). :class:`SeedEffects` holds the effect once per training seed
  and :func:`training_effect_verdict` words a claim no more strongly than both allow: with two or
  more seeds it stands only when every seed's effect has its sign, and with one seed it says that
  the spread of training was not measured (:data:`ONE_TRAINING_SEED`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from statistics import NormalDist, stdev
from typing import Mapping, Sequence

from tomrl.stats import Accuracy, wilson_interval


def z_for(level: float) -> float:
    """The two-sided normal quantile of confidence ``level`` (1.96 for 0.95)."""
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    return NormalDist().inv_cdf(0.5 + level / 2)


def two_sided_p(z: float) -> float:
    """Two-sided p-value of a standard normal statistic."""
    return 2 * (1 - NormalDist().cdf(abs(z)))


def bonferroni_level(level: float, comparisons: int) -> float:
    """Per-comparison confidence level that keeps the family-wise level at ``level``."""
    return 1 - (1 - level) / max(1, comparisons)


@dataclass(frozen=True)
class Interval:
    """A point estimate with its interval, e.g. a difference of two accuracies."""

    value: float
    low: float
    high: float
    level: float

    @property
    def above_zero(self) -> bool:
        return self.low > 0

    @property
    def below_zero(self) -> bool:
        return self.high < 0

    def format_points(self, digits: int = 1) -> str:
        """As percentage points: ``+12.0 pts [3.1, 20.4]``."""
        return f"{100 * self.value:+.{digits}f} pts [{100 * self.low:+.{digits}f}, {100 * self.high:+.{digits}f}]"

    def to_dict(self) -> dict:
        return asdict(self)


def linear_combination_interval(terms: Sequence[tuple[float, Accuracy]], level: float = 0.95) -> Interval:
    """MOVER-Wilson interval for ``Σ coefficient × accuracy`` over independent accuracies.

    Each term's own Wilson interval (at ``level``) is recovered into the sum's interval:
    ``low = θ − sqrt(Σ (t_i − l_i)²)``, ``high = θ + sqrt(Σ (u_i − t_i)²)``, where ``[l_i, u_i]``
    is the interval of term ``t_i = c_i p_i`` (flipped when ``c_i < 0``).
    """
    if not terms:
        raise ValueError("need at least one term")
    z = z_for(level)
    estimate = 0.0
    down = 0.0
    up = 0.0
    for coefficient, acc in terms:
        if acc.n <= 0:
            raise ValueError("every accuracy needs n > 0")
        low, high = wilson_interval(acc.k, acc.n, z)
        p = acc.k / acc.n
        term = coefficient * p
        term_low, term_high = sorted((coefficient * low, coefficient * high))
        estimate += term
        down += (term - term_low) ** 2
        up += (term_high - term) ** 2
    return Interval(value=estimate, low=estimate - math.sqrt(down), high=estimate + math.sqrt(up), level=level)


def difference_interval(a: Accuracy, b: Accuracy, level: float = 0.95) -> Interval:
    """Interval for ``a − b`` (Newcombe's hybrid score interval, method 10)."""
    return linear_combination_interval([(1.0, a), (-1.0, b)], level)


def minimal_detectable_difference(n_a: int, n_b: int, level: float = 0.95, power: float = 0.8, rate: float = 0.5) -> float:
    """The smallest difference of two accuracies (on ``n_a`` and ``n_b`` questions) that a two-sided
    test at ``level`` detects with probability ``power``: ``(z_level + z_power) · sqrt(p(1−p)(1/n_a + 1/n_b))``.

    ``rate`` is the accuracy assumed for the variance; 0.5 (the default) is the worst case, so the
    figure does not shrink to nothing when an observed accuracy happens to be 0 % or 100 %.
    """
    if n_a <= 0 or n_b <= 0:
        return math.inf
    z_power = NormalDist().inv_cdf(power)
    return (z_for(level) + z_power) * math.sqrt(rate * (1 - rate) * (1 / n_a + 1 / n_b))


# Beside every training effect measured on one training run (trained − base, RL − warm start, arm A − arm B).
ONE_TRAINING_SEED = ("one training seed: the run-to-run spread of training is not measured; the interval covers "
                     "question sampling only")


@dataclass(frozen=True)
class SeedEffects:
    """One training effect (a difference of accuracies) measured once per training seed.

    ``effects``: (training seed, effect) in the order given; an effect is a difference of shares
    (0.05 = 5 points). The pooled interval of the same effect covers question sampling only; the
    spread of these values is the run-to-run spread of training it leaves out.
    """

    effects: tuple[tuple[str, float], ...]

    @classmethod
    def of(cls, effects: Mapping[object, float]) -> "SeedEffects":
        return cls(tuple((str(seed), float(value)) for seed, value in effects.items()))

    @property
    def seeds(self) -> int:
        return len(self.effects)

    @property
    def values(self) -> list[float]:
        return [value for _, value in self.effects]

    @property
    def low(self) -> float:
        return min(self.values)

    @property
    def high(self) -> float:
        return max(self.values)

    @property
    def mean(self) -> float:
        return sum(self.values) / len(self.values)

    @property
    def sd(self) -> float | None:
        """Sample standard deviation over seeds; None with one seed."""
        return stdev(self.values) if len(self.values) >= 2 else None

    def agree(self, direction: int) -> bool:
        """Every seed's effect lies strictly in ``direction`` (+1 up, −1 down); for 0, no two seeds' effects
        have opposite signs."""
        if direction > 0:
            return all(v > 0 for v in self.values)
        if direction < 0:
            return all(v < 0 for v in self.values)
        return not (any(v > 0 for v in self.values) and any(v < 0 for v in self.values))

    def range_text(self) -> str:
        """"-3.0..+5.0 points, 3 seeds"."""
        return f"{100 * self.low:+.1f}..{100 * self.high:+.1f} points, {self.seeds} seeds"

    def describe(self) -> str:
        """"seeds 0, 1, 2: +5.0, +7.0, +3.0 pts (range +3.0..+7.0, sd 2.0)", or :data:`ONE_TRAINING_SEED`."""
        if self.seeds < 2:
            return ONE_TRAINING_SEED
        seeds = ", ".join(seed for seed, _ in self.effects)
        values = ", ".join(f"{100 * v:+.1f}" for v in self.values)
        return (f"seeds {seeds}: {values} pts (range {100 * self.low:+.1f}..{100 * self.high:+.1f}, "
                f"sd {100 * self.sd:.1f})")

    def to_dict(self) -> dict:
        data: dict = {"training_seeds": self.seeds, "per_seed": dict(self.effects)}
        if self.seeds >= 2:
            data.update({"min": self.low, "max": self.high, "mean": self.mean, "sd": self.sd})
        else:
            data["note"] = ONE_TRAINING_SEED
        return data


def seeds_disagree(effects: SeedEffects) -> str:
    """The verdict when training seeds do not agree:
    "inconclusive: training seeds disagree (effects a..b points, k seeds)"."""
    return f"inconclusive: training seeds disagree (effects {effects.range_text()})"


def training_effect_verdict(direction: int, effects: SeedEffects | None, claim: str, otherwise: str) -> str:
    """The words a training effect may carry.

    ``direction``: +1 or −1 when the pooled interval lies above or below zero, 0 when it holds zero;
    ``claim``: the words for that direction ("gain", "grpo better"); ``otherwise``: the words when the
    interval holds zero ("inconclusive (n=80 pairs)"). With two or more seeds the claim stands only when
    every seed's effect has its sign, and seeds whose effects differ in sign read :func:`seeds_disagree`
    whatever the pooled interval. With one seed (or ``None``: one model, so one training run) a claim
    says so: "gain (one training seed)"; :data:`ONE_TRAINING_SEED` goes beside it.
    """
    if effects is not None and effects.seeds >= 2:
        if not effects.agree(direction):
            return seeds_disagree(effects)
        return claim if direction else otherwise
    if not direction:
        return otherwise
    return f"{claim} (one training seed)"


def pooled(accuracies: Sequence[Accuracy]) -> Accuracy:
    """One accuracy over the union of several disjoint question sets."""
    return from_counts(sum(a.k for a in accuracies), sum(a.n for a in accuracies))


def from_counts(k: int, n: int) -> Accuracy:
    """An :class:`~tomrl.stats.Accuracy` from ``k`` correct out of ``n`` (Wilson interval)."""
    if not 0 <= k <= n:
        raise ValueError(f"k={k} must be between 0 and n={n}")
    low, high = wilson_interval(k, n)
    return Accuracy(n=n, k=k, value=k / n if n else 0.0, low=low, high=high)


@dataclass(frozen=True)
class TrendTest:
    """Cochran–Armitage test: ``z > 0`` means the rate rises with the score."""

    z: float
    p_value: float
    groups: int
    n: int


def cochran_armitage_trend(groups: Sequence[tuple[float, int, int]]) -> TrendTest:
    """Test for a linear trend of a proportion across ordered groups ``(score, k, n)``.

    ``T = Σ s_i (k_i − n_i p̄)``, ``Var(T) = p̄ (1 − p̄) [Σ n_i s_i² − (Σ n_i s_i)² / N]``, ``z = T / sqrt(Var T)``.
    """
    groups = [(float(s), int(k), int(n)) for s, k, n in groups if n > 0]
    total = sum(n for _, _, n in groups)
    if len(groups) < 2 or total == 0:
        return TrendTest(z=0.0, p_value=1.0, groups=len(groups), n=total)
    p_bar = sum(k for _, k, _ in groups) / total
    statistic = sum(s * (k - n * p_bar) for s, k, n in groups)
    spread = sum(n * s * s for s, _, n in groups) - sum(n * s for s, _, n in groups) ** 2 / total
    variance = p_bar * (1 - p_bar) * spread
    if variance <= 0:
        # Every answer right, or every answer wrong (or one score): no evidence of any trend.
        return TrendTest(z=0.0, p_value=1.0, groups=len(groups), n=total)
    z = statistic / math.sqrt(variance)
    return TrendTest(z=z, p_value=two_sided_p(z), groups=len(groups), n=total)


@dataclass(frozen=True)
class WindowChange:
    """How a per-step series changed from its first to its last window (a third each by default)."""

    early_mean: float
    late_mean: float
    change: float  # late_mean − early_mean
    low: float  # interval of the change
    high: float
    level: float
    early_points: int
    late_points: int
    noise_sd: float  # per-step noise, estimated from first differences
    noise_autocorrelation: float  # lag-1 autocorrelation of that noise (AR(1)), in [0, 0.99]

    @property
    def relative_change(self) -> float:
        return self.change / self.early_mean if self.early_mean else 0.0

    @property
    def significantly_negative(self) -> bool:
        return self.high < 0

    @property
    def significantly_positive(self) -> bool:
        return self.low > 0

    def to_dict(self) -> dict:
        return asdict(self)


MAX_AUTOCORRELATION = 0.99


def difference_noise(values: Sequence[float]) -> tuple[float, float]:
    """``(sd, φ)`` of AR(1) noise around a smooth trend, from the series' first differences.

    For ``x_t = trend_t + e_t`` with AR(1) noise ``e`` (variance σ², lag-1 correlation φ), the
    differences ``d_t = x_t − x_{t−1}`` lose the smooth trend and have variance ``2σ²(1 − φ)``
    and lag-1 autocorrelation ``−(1 − φ)/2`` (difference-based estimation, as in Hall & Van
    Keilegom 2003). So ``φ = 1 + 2 ρ_d`` and ``σ² = Var(d) / (2 (1 − φ))``, with φ clipped to
    [0, 0.99].
    """
    d = [b - a for a, b in zip(values, values[1:])]
    if len(d) < 2:
        return 0.0, 0.0
    mean = sum(d) / len(d)
    c0 = sum((x - mean) ** 2 for x in d) / len(d)
    if c0 == 0:
        return 0.0, 0.0
    c1 = sum((d[t] - mean) * (d[t - 1] - mean) for t in range(1, len(d))) / len(d)
    phi = min(MAX_AUTOCORRELATION, max(0.0, 1 + 2 * c1 / c0))
    return math.sqrt(c0 / (2 * (1 - phi))), phi


def _within_sum(size: int, phi: float) -> float:
    """``Σ_{i,j<size} φ^|i−j| = size + 2 Σ_k (size − k) φ^k``."""
    return size + 2 * sum((size - k) * phi**k for k in range(1, size))


def _between_sum(first: int, second: int, n: int, phi: float) -> float:
    """``Σ φ^(j−i)`` over i in the first ``first`` and j in the last ``second`` of n indices (disjoint)."""
    geometric = lambda m: sum(phi**k for k in range(m))  # noqa: E731
    return phi ** (n - second - first + 1) * geometric(first) * geometric(second)


def window_change(values: Sequence[float], level: float = 0.95, window: float = 1 / 3) -> WindowChange:
    """Mean of the last ``window`` of a series minus the mean of its first, with an interval.

    The interval is the normal one for the difference of two window means of AR(1) noise (its
    σ and φ from :func:`difference_noise`): ``Var = σ² [S(A,A)/a² + S(B,B)/b² − 2 S(A,B)/(a b)]``
    with ``S(I,J) = Σ φ^|i−j|``. A smooth fall, however curved (fast then flat, as collapse
    looks), leaves the noise estimate alone, where a straight-line fit would take the curvature
    for autocorrelated noise. Values are taken in order, one per logged step.
    """
    n = len(values)
    if n < 3:
        raise ValueError(f"need at least 3 points to compare windows, got {n}")
    if not 0 < window <= 0.5:
        raise ValueError(f"window must be in (0, 0.5], got {window}")
    size = max(1, int(n * window))
    early_mean = sum(values[:size]) / size
    late_mean = sum(values[n - size:]) / size
    sd, phi = difference_noise(values)
    variance = sd * sd * (2 * _within_sum(size, phi) - 2 * _between_sum(size, size, n, phi)) / (size * size)
    half = z_for(level) * math.sqrt(max(variance, 0.0))
    change = late_mean - early_mean
    return WindowChange(early_mean, late_mean, change, change - half, change + half, level, size, size, sd, phi)
