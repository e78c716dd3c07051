"""Accuracies with confidence intervals, used by every table tomrl prints.

    from tomrl.stats import accuracy
    acc = accuracy(correct=[True, False, True])   # Accuracy(n=3, k=2, value=0.667, low=…, high=…)
    print(acc.format())                            # "66.7 % [20.8, 93.9] (n=3)"

Wilson score intervals are the default: they behave at 0 % and 100 % and for small n, where the
normal approximation gives impossible bounds. ``bootstrap_interval`` resamples any statistic.
"""

from __future__ import annotations

import math
import random
from dataclasses import asdict, dataclass
from typing import Callable, Sequence

Z_95 = 1.959963984540054


@dataclass(frozen=True)
class Accuracy:
    n: int
    k: int  # number correct
    value: float  # k / n (0.0 when n == 0)
    low: float  # lower end of the 95 % interval
    high: float  # upper end of the 95 % interval
    method: str = "wilson"

    def format(self, digits: int = 1) -> str:
        if self.n == 0:
            return "n/a (n=0)"
        return f"{100 * self.value:.{digits}f} % [{100 * self.low:.{digits}f}, {100 * self.high:.{digits}f}] (n={self.n})"

    def to_dict(self) -> dict:
        return asdict(self)


def wilson_interval(k: int, n: int, z: float = Z_95) -> tuple[float, float]:
    """Wilson score interval for k successes in n trials."""
    if n <= 0:
        return 0.0, 1.0
    if not 0 <= k <= n:
        raise ValueError(f"k={k} must be between 0 and n={n}")
    p = k / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def accuracy(correct: Sequence[bool]) -> Accuracy:
    """Accuracy of a list of booleans with its 95 % Wilson interval."""
    n = len(correct)
    k = sum(1 for c in correct if c)
    low, high = wilson_interval(k, n)
    return Accuracy(n=n, k=k, value=k / n if n else 0.0, low=low, high=high)


def bootstrap_interval(
    values: Sequence[float],
    statistic: Callable[[Sequence[float]], float] = lambda xs: sum(xs) / len(xs),
    resamples: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float, float]:
    """Percentile bootstrap interval of ``statistic`` over ``values`` (seeded, so reproducible)."""
    if not values:
        return float("nan"), float("nan")
    rng = random.Random(seed)
    n = len(values)
    estimates = sorted(statistic([values[rng.randrange(n)] for _ in range(n)]) for _ in range(resamples))
    tail = (1 - level) / 2
    return estimates[int(tail * (resamples - 1))], estimates[int((1 - tail) * (resamples - 1))]
