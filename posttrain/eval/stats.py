"""Statistics for evaluation results: bootstrap confidence intervals, paired base-vs-trained tests, verdicts.

All resampling is seeded, so the same numbers give the same intervals. Intervals are percentile
bootstrap intervals (Efron & Tibshirani 1993, ch. 13); a paired comparison resamples *tasks*, keeping
each task's base and trained score together, so task difficulty cancels out. For pass/fail outcomes
McNemar's exact test (a two-sided binomial test on the discordant pairs) gives the p-value. A verdict
says `improved` / `regressed` only when the delta's interval excludes zero *and* p < 0.05 (on a handful
of tasks the bootstrap interval can collapse to a point while the exact test still says "could be luck").
Not here: which tasks are evaluated or how they are graded (`posttrain.eval.evaluate`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

Verdict = Literal["improved", "no significant change", "regressed"]

NUM_RESAMPLES = 2000
"""Bootstrap resamples per interval."""


@dataclass(frozen=True)
class Paired:
    """Trained minus base on the same tasks."""

    delta: float
    """Mean of the per-task differences."""
    ci_low: float
    ci_high: float
    """Bootstrap interval of the delta."""
    p_value: float
    """Two-sided: McNemar's exact test for pass/fail scores, else the paired bootstrap's."""
    n: int
    """Tasks paired."""

    @property
    def verdict(self) -> Verdict:
        return verdict(self.ci_low, self.ci_high, self.p_value)


def verdict(ci_low: float, ci_high: float, p_value: float, alpha: float = 0.05) -> Verdict:
    """`improved` when the interval is above zero and p < alpha, `regressed` when below, else no change."""
    if not p_value < alpha:
        return "no significant change"
    if ci_low > 0:
        return "improved"
    if ci_high < 0:
        return "regressed"
    return "no significant change"


def bootstrap_ci(values: Sequence[float], confidence: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of `values` ((nan, nan) when empty)."""
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        return math.nan, math.nan
    means = _resample_means(data[None, :], seed)[0]
    return _interval(means, confidence)


def paired(base: Sequence[float], final: Sequence[float], confidence: float = 0.95, seed: int = 0) -> Paired:
    """Compare two score lists of the same tasks in the same order (see the module docstring)."""
    if len(base) != len(final):
        raise ValueError(f"paired comparison of {len(base)} base and {len(final)} trained scores")
    old, new = np.asarray(base, dtype=float), np.asarray(final, dtype=float)
    if old.size == 0:
        return Paired(math.nan, math.nan, math.nan, math.nan, 0)
    diffs = new - old
    resampled = _resample_means(diffs[None, :], seed)[0]
    low, high = _interval(resampled, confidence)
    binary = np.isin(old, (0.0, 1.0)).all() and np.isin(new, (0.0, 1.0)).all()
    p = mcnemar_p(old == 1.0, new == 1.0) if binary else _bootstrap_p(resampled)
    return Paired(float(diffs.mean()), low, high, p, int(old.size))


def paired_mean_of_domains(
    pairs: Sequence[tuple[Sequence[float], Sequence[float]]], confidence: float = 0.95, seed: int = 0
) -> Paired:
    """The mean over domains of each domain's paired delta, with an interval that resamples tasks
    within every domain (domains keep their equal weight); p-value from the same bootstrap."""
    deltas = [np.asarray(f, dtype=float) - np.asarray(b, dtype=float) for b, f in pairs if len(b)]
    if not deltas:
        return Paired(math.nan, math.nan, math.nan, math.nan, 0)
    per_domain = np.stack([_resample_means(d[None, :], seed + i)[0] for i, d in enumerate(deltas)])  # [D, R]
    resampled = per_domain.mean(axis=0)  # [R]
    low, high = _interval(resampled, confidence)
    delta = float(np.mean([d.mean() for d in deltas]))
    return Paired(delta, low, high, _bootstrap_p(resampled), sum(d.size for d in deltas))


def bootstrap_ratio_ci(
    numerators: Sequence[float], denominators: Sequence[float], confidence: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval of sum(numerators) / sum(denominators), resampling items with their
    pairs kept (a pooled rate such as tool calls that succeeded over tool calls); (nan, nan) when empty.
    A resample whose denominators sum to 0 is left out."""
    num, den = np.asarray(numerators, dtype=float), np.asarray(denominators, dtype=float)
    if num.size == 0:
        return math.nan, math.nan
    index = np.random.default_rng(seed).integers(0, num.size, size=(NUM_RESAMPLES, num.size))  # [R, N]
    totals = den[index].sum(axis=1)  # [R]
    ratios = num[index].sum(axis=1)[totals > 0] / totals[totals > 0]
    return _interval(ratios, confidence) if ratios.size else (math.nan, math.nan)


def paired_ratio_change(
    domains: Sequence[tuple[Sequence[tuple[float, float]], Sequence[tuple[float, float]]]],
    confidence: float = 0.95,
    seed: int = 0,
) -> Paired:
    """The mean over domains of each domain's change of a pooled rate, sum(num) / sum(den), between two
    checkpoints on the same tasks: every domain gives its tasks' (numerator, denominator) before and
    after, aligned (a task where the metric is undefined for one side is (0, 0) on that side). The
    interval resamples tasks within every domain (domain i with seed + i), the same tasks for both
    sides, so a rate defined on a changing subset (recovery: errored episodes) is still paired by task;
    a resample where either side's denominators sum to 0 in some domain is left out."""
    changes, point, tasks = [], [], 0
    for i, (old, new) in enumerate(domains):
        if len(old) != len(new):
            raise ValueError(f"paired rates of {len(old)} base and {len(new)} other tasks")
        a, b = np.asarray(old, dtype=float).reshape(-1, 2), np.asarray(new, dtype=float).reshape(-1, 2)
        if a[:, 1].sum() <= 0 or b[:, 1].sum() <= 0:
            continue
        index = np.random.default_rng(seed + i).integers(0, len(a), size=(NUM_RESAMPLES, len(a)))  # [R, N]
        with np.errstate(invalid="ignore", divide="ignore"):
            before = a[index, 0].sum(axis=1) / a[index, 1].sum(axis=1)
            after = b[index, 0].sum(axis=1) / b[index, 1].sum(axis=1)
        changes.append(after - before)  # [R], NaN where a side has no denominator
        point.append(b[:, 0].sum() / b[:, 1].sum() - a[:, 0].sum() / a[:, 1].sum())
        tasks += len(a)
    if not changes:
        return Paired(math.nan, math.nan, math.nan, math.nan, 0)
    resampled = np.stack(changes).mean(axis=0)
    resampled = resampled[np.isfinite(resampled)]
    if resampled.size == 0:
        return Paired(float(np.mean(point)), math.nan, math.nan, math.nan, tasks)
    low, high = _interval(resampled, confidence)
    return Paired(float(np.mean(point)), low, high, _bootstrap_p(resampled), tasks)


def mean_of_domains_ci(
    domains: Sequence[Sequence[float]], confidence: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """Interval of the mean over domains of each domain's mean: tasks are resampled within every domain
    (domain i with seed + i, as `paired_mean_of_domains`), each domain keeps an equal weight; empty
    domains are left out, (nan, nan) when none is left."""
    rows = [np.asarray(d, dtype=float) for d in domains if len(d)]
    if not rows:
        return math.nan, math.nan
    per_domain = np.stack([_resample_means(r[None, :], seed + i)[0] for i, r in enumerate(rows)])  # [D, R]
    return _interval(per_domain.mean(axis=0), confidence)


def mcnemar_p(base_passed: Sequence[bool] | np.ndarray, final_passed: Sequence[bool] | np.ndarray) -> float:
    """Exact two-sided McNemar test: under no change, the discordant pairs split 50/50.

    E.g. 1 task passed only before and 9 only after: p = 2 * P(Binomial(10, 0.5) <= 1) = 22/1024."""
    old, new = np.asarray(base_passed, dtype=bool), np.asarray(final_passed, dtype=bool)
    only_old, only_new = int((old & ~new).sum()), int((~old & new).sum())
    n = only_old + only_new
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(only_old, only_new) + 1)) / 2.0**n
    return min(1.0, 2.0 * tail)


def _resample_means(rows: np.ndarray, seed: int) -> np.ndarray:
    """`[B, R]` means of R bootstrap resamples (with replacement, same length) of each row of `[B, N]`."""
    rng = np.random.default_rng(seed)
    index = rng.integers(0, rows.shape[1], size=(NUM_RESAMPLES, rows.shape[1]))  # [R, N]
    return rows[:, index].mean(axis=2)


def _interval(samples: np.ndarray, confidence: float) -> tuple[float, float]:
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(samples, [tail, 100.0 - tail])
    return float(low), float(high)


def _bootstrap_p(resampled: np.ndarray) -> float:
    """Two-sided: twice the share of resampled deltas on the far side of zero (at least 1/R)."""
    below, above = float(np.mean(resampled <= 0.0)), float(np.mean(resampled >= 0.0))
    return min(1.0, max(2.0 * min(below, above), 1.0 / resampled.size))
