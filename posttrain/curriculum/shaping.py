"""Weight shaping: floors and ceilings (exact projection), smoothing, and integer batch allocation.

`project_to_bounds(raw, lo, hi)` returns the weights `clip(c * raw, lo, hi)` that sum to 1, for the one
scale `c` that makes them sum to 1: domains inside their bounds keep their relative raw ratios, and
every bound holds exactly (up to float rounding). `allocate_counts` turns weights into integer counts
that sum to the batch size, with expectation exactly `weight * batch_size` (systematic sampling of the
fractional parts). Not here: where raw weights come from.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from posttrain.curriculum.configs import ShapingConfig
from posttrain.errors import ConfigError

_TINY = 1e-12


def effective_bounds(
    domains: Sequence[str],
    shaping: ShapingConfig,
    min_weights: Mapping[str, float] | None = None,
    max_weights: Mapping[str, float] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Per-domain floors and ceilings from the config and per-domain overrides; checks feasibility."""
    num = len(domains)
    uniform = 1.0 / num
    floor = max(shaping.min_weight, shaping.min_weight_vs_uniform * uniform)
    ceiling = shaping.max_weight
    if shaping.max_weight_vs_uniform is not None:
        ceiling = min(ceiling, shaping.max_weight_vs_uniform * uniform)
    lo = np.array([max(floor, (min_weights or {}).get(d, 0.0)) for d in domains])
    hi = np.array([min(ceiling, (max_weights or {}).get(d, 1.0)) for d in domains])
    bad = [d for d, a, b in zip(domains, lo, hi, strict=True) if a > b + _TINY]
    if bad:
        raise ConfigError(f"curriculum: min_weight exceeds max_weight for {bad[:5]}")
    if lo.sum() > 1.0 + 1e-9:
        raise ConfigError(f"curriculum: floors sum to {lo.sum():.3f} > 1 over {num} domains")
    if hi.sum() < 1.0 - 1e-9:
        raise ConfigError(f"curriculum: ceilings sum to {hi.sum():.3f} < 1 over {num} domains")
    return lo, hi


def project_to_bounds(raw: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Weights `clip(c * raw, lo, hi)` summing to 1 (requires sum(lo) <= 1 <= sum(hi))."""
    raw = np.nan_to_num(np.asarray(raw, dtype=float), nan=0.0, posinf=0.0, neginf=0.0)
    raw = np.maximum(raw, 0.0)
    top = raw.max() if raw.size else 0.0
    # Domains with zero raw weight still get a sliver so that the ceilings can always be reached.
    raw = np.maximum(raw, top * 1e-9) if top > 0 else np.ones_like(raw)
    # f(c) = sum(clip(c * raw, lo, hi)) is piecewise linear and non-decreasing, with kinks at lo/raw and
    # hi/raw; evaluate it at every kink and interpolate inside the segment that crosses 1.
    kinks = np.unique(np.concatenate([[0.0], lo / raw, hi / raw]))
    totals = np.clip(kinks[:, None] * raw[None, :], lo, hi).sum(axis=1)
    k = int(np.searchsorted(totals, 1.0))
    if k == 0:
        scale = kinks[0]
    elif k >= kinks.size:
        scale = kinks[-1]
    else:
        left, right = totals[k - 1], totals[k]
        frac = 0.0 if right <= left else (1.0 - left) / (right - left)
        scale = kinks[k - 1] + frac * (kinks[k] - kinks[k - 1])
    weights = np.clip(scale * raw, lo, hi)
    return weights / weights.sum()


def smooth(previous: np.ndarray | None, proposed: np.ndarray, smoothing: float) -> np.ndarray:
    """Exponential moving average of weight vectors (`smoothing` is the weight on the past)."""
    if previous is None or smoothing <= 0.0:
        return proposed
    return smoothing * previous + (1.0 - smoothing) * proposed


def allocate_counts(weights: np.ndarray, batch_size: int, rng: np.random.Generator) -> np.ndarray:
    """Integer counts summing to `batch_size` with E[count_i] = weights_i * batch_size."""
    if batch_size < 0:
        raise ValueError(f"batch_size must be >= 0, got {batch_size}")
    expected = weights / weights.sum() * batch_size
    counts = np.floor(expected).astype(np.int64)
    fractions = expected - counts
    remaining = batch_size - int(counts.sum())
    if remaining > 0:
        # Systematic sampling: points u, u+1, ... over the cumulative fractions hit domain i with
        # probability equal to its fraction (< 1), so each count stays unbiased.
        edges = np.cumsum(fractions)
        edges *= remaining / edges[-1]
        points = rng.uniform() + np.arange(remaining)
        hits = np.searchsorted(edges, points, side="right")
        np.add.at(counts, np.minimum(hits, counts.size - 1), 1)
    return counts
