"""The statistics behind the reward-hacking detectors: proportions, trends, rank correlations, diversity.

- `wilson_interval`: the Wilson score interval of a proportion (Wilson 1927), which stays inside [0, 1]
  and is honest at small n and at rates near 0 (where the normal interval collapses to a point).
- `slope` and `bootstrap_slope_ci`: the least-squares slope of y on x, and a seeded percentile bootstrap
  interval over (x, y) pairs (no normality assumption: rewards are often 0/1).
- `spearman` (Pearson on average ranks) and `correlation_shift_p`: the two-sided p-value of the
  difference of two independent correlations by Fisher's z transform (z = atanh r, se = 1/sqrt(n - 3);
  used on Spearman's rho as an approximation).
- `unique_ratio` and `distinct_n` (Li et al. 2016): response diversity.

Every function is pure and deterministic (resampling is seeded); an undefined statistic (no data, a
constant series) is NaN, never an exception. Not here: what counts as an alarm (`posttrain.eval.hacking`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

Z_95 = 1.959963984540054
"""Two-sided 95% standard normal quantile."""
NUM_RESAMPLES = 1000
"""Bootstrap resamples of a slope interval."""


def wilson_interval(successes: int, n: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval of successes / n ((nan, nan) when n is 0).

    E.g. 0 of 20: (0.0, 0.161); 10 of 100: (0.055, 0.174)."""
    if n <= 0:
        return math.nan, math.nan
    p = successes / n
    denominator = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def slope(x: Sequence[float], y: Sequence[float]) -> float:
    """Least-squares slope of y on x (nan with fewer than two distinct x)."""
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if xs.size < 2 or np.ptp(xs) == 0:
        return math.nan
    dx = xs - xs.mean()
    return float((dx * (ys - ys.mean())).sum() / (dx * dx).sum())


def bootstrap_slope_ci(x: Sequence[float], y: Sequence[float], seed: int = 0,
                       confidence: float = 0.95) -> tuple[float, float]:  # fmt: skip
    """Percentile bootstrap interval of `slope(x, y)`, resampling (x, y) pairs ((nan, nan) when undefined)."""
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if xs.size < 3 or np.ptp(xs) == 0:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    index = rng.integers(0, xs.size, size=(NUM_RESAMPLES, xs.size))  # [R, N]
    bx, by = xs[index], ys[index]
    dx = bx - bx.mean(axis=1, keepdims=True)
    spread = (dx * dx).sum(axis=1)
    valid = spread > 0
    slopes = (dx * (by - by.mean(axis=1, keepdims=True))).sum(axis=1)[valid] / spread[valid]  # [R']
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(slopes, [tail, 100.0 - tail])
    return float(low), float(high)


def ranks(values: Sequence[float]) -> np.ndarray:
    """1-based ranks, ties sharing their average rank."""
    data = np.asarray(values, dtype=float)
    order = np.argsort(data, kind="mergesort")
    sorted_values = data[order]
    out = np.empty(data.size, dtype=float)
    start = 0
    while start < data.size:
        end = start
        while end + 1 < data.size and sorted_values[end + 1] == sorted_values[start]:
            end += 1
        out[order[start : end + 1]] = (start + end) / 2.0 + 1.0
        start = end + 1
    return out


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rank correlation (nan when either side is constant or there are fewer than 3 pairs)."""
    if len(x) < 3 or len(x) != len(y):
        return math.nan
    rx, ry = ranks(x), ranks(y)
    dx, dy = rx - rx.mean(), ry - ry.mean()
    norm = math.sqrt(float((dx * dx).sum() * (dy * dy).sum()))
    return float((dx * dy).sum() / norm) if norm > 0 else math.nan


def correlation_shift_p(r1: float, n1: int, r2: float, n2: int) -> float:
    """Two-sided p-value that two independent correlations differ (Fisher's z); nan when undefined."""
    if n1 <= 3 or n2 <= 3 or not (math.isfinite(r1) and math.isfinite(r2)):
        return math.nan
    clip = 1.0 - 1e-12
    z1, z2 = math.atanh(max(-clip, min(clip, r1))), math.atanh(max(-clip, min(clip, r2)))
    z = abs(z1 - z2) / math.sqrt(1.0 / (n1 - 3) + 1.0 / (n2 - 3))
    return math.erfc(z / math.sqrt(2.0))


def unique_ratio(texts: Sequence[str]) -> float:
    """Distinct texts (whitespace-collapsed, case-folded) / texts; nan when there are none."""
    if not texts:
        return math.nan
    return len({" ".join(t.split()).casefold() for t in texts}) / len(texts)


def distinct_n(texts: Sequence[str], n: int = 2) -> float:
    """Distinct word n-grams / n-grams over all texts (a text shorter than n counts as one n-gram of
    all its words); nan when there are none."""
    grams: list[tuple[str, ...]] = []
    for text in texts:
        words = text.casefold().split()
        grams.extend([tuple(words)] if len(words) < n else [tuple(words[i : i + n]) for i in range(len(words) - n + 1)])
    return len(set(grams)) / len(grams) if grams else math.nan
