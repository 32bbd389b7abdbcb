"""The statistics of a report, small and exact: a rate's 95 % interval (Wilson's score
interval, sound for small sets and rates near 0 or 1, where the normal approximation is
not), percentiles, and the paired test of two configurations on the same tasks (McNemar's
exact test: only the tasks one resolved and the other did not tell them apart)."""

from __future__ import annotations

import math
from collections.abc import Sequence

Z95 = 1.959963984540054


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The 95 % interval of a rate of `k` in `n` (0..1 each); (0, 1) for n = 0."""
    if n <= 0:
        return (0.0, 1.0)
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0..100), linear between the closest ranks; None when empty."""
    if not values:
        return None
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    value: float = xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)
    return value


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """Two-sided p-value that two configurations resolve the same share of paired tasks,
    from the tasks only A resolved and those only B resolved (a binomial test at 1/2)."""
    n = only_a + only_b
    if n == 0:
        return 1.0
    k = min(only_a, only_b)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / (1 << n)
    return min(1.0, 2 * tail)
