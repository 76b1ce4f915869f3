"""Running per-domain estimates shared by all mixtures: pass rate (fast and slow), learning progress,
learnability, and two hysteresis flags ("at target", "stuck").

Estimates are evidence-weighted and discounted per update (a domain that is not sampled keeps its
estimate but loses evidence, so its uncertainty grows). Everything is a numpy array indexed by the
mixture's domain order; `state_dict` is JSON-ready. Not here: turning estimates into weights.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from posttrain.curriculum.configs import ShapingConfig, SignalConfig
from posttrain.curriculum.stats import DomainStats

PRIOR_PASS_RATE = 0.5
"""Pass rate assumed for a domain before any evidence."""
PRIOR_SAMPLES = 1.0
"""Pseudo-count of the prior (keeps estimates finite and shrinks tiny samples towards 0.5)."""

_FLOAT_FIELDS = (
    "fast_sum", "fast_n", "slow_sum", "slow_n", "adv_sum", "total_n", "last_pass",
    "stuck_level",
)
_INT_FIELDS = ("stuck_count", "last_seen_step", "num_observed")
_BOOL_FIELDS = ("at_target", "stuck")


class DomainTracker:
    """Discounted sufficient statistics per domain plus the at-target and stuck flags."""

    def __init__(self, num_domains: int, targets: np.ndarray, signals: SignalConfig, shaping: ShapingConfig):
        self.num_domains = num_domains
        self.targets = targets
        self.shaping = shaping
        self.fast_decay = 0.5 ** (1.0 / signals.fast_half_life_steps)
        self.slow_decay = 0.5 ** (1.0 / signals.slow_half_life_steps)
        zeros = np.zeros(num_domains)
        self.fast_sum, self.fast_n = zeros.copy(), zeros.copy()
        self.slow_sum, self.slow_n = zeros.copy(), zeros.copy()
        self.adv_sum = zeros.copy()
        self.total_n = zeros.copy()
        self.last_pass = np.full(num_domains, np.nan)
        self.stuck_level = zeros.copy()
        self.stuck_count = np.zeros(num_domains, dtype=np.int64)
        self.last_seen_step = np.full(num_domains, -1, dtype=np.int64)
        self.num_observed = np.zeros(num_domains, dtype=np.int64)
        self.min_history = int(np.ceil(2.0 * signals.slow_half_life_steps))
        self.at_target = np.zeros(num_domains, dtype=bool)
        self.stuck = np.zeros(num_domains, dtype=bool)

    # ---- estimates ---------------------------------------------------------------------------
    @property
    def pass_fast(self) -> np.ndarray:
        return (self.fast_sum + PRIOR_PASS_RATE * PRIOR_SAMPLES) / (self.fast_n + PRIOR_SAMPLES)

    @property
    def pass_slow(self) -> np.ndarray:
        return (self.slow_sum + PRIOR_PASS_RATE * PRIOR_SAMPLES) / (self.slow_n + PRIOR_SAMPLES)

    @property
    def abs_advantage(self) -> np.ndarray:
        """Mean |advantage| (slow estimate); 0.5 * 0.5 prior for unseen domains."""
        return (self.adv_sum + 0.25 * PRIOR_SAMPLES) / (self.slow_n + PRIOR_SAMPLES)

    @property
    def progress_z(self) -> np.ndarray:
        """(fast - slow) pass-rate estimate over its standard error: > 0 improving, < 0 forgetting."""
        p = self.pass_slow
        # The fast window is nested in the slow one, so Var(fast - slow) ~ p(1-p)(1/N_f - 1/N_s).
        inv = np.maximum(1.0 / (self.fast_n + PRIOR_SAMPLES) - 1.0 / (self.slow_n + PRIOR_SAMPLES),
                         1.0 / (self.slow_n + PRIOR_SAMPLES))
        se = np.sqrt(np.maximum(p * (1.0 - p), 0.01) * inv)
        return (self.pass_fast - self.pass_slow) / se

    # ---- updates -----------------------------------------------------------------------------
    def observe(self, index: Mapping[str, int], stats: Mapping[str, DomainStats], step: int) -> np.ndarray:
        """Fold one step's statistics in; returns the boolean mask of observed domains."""
        n = np.zeros(self.num_domains)
        passed = np.zeros(self.num_domains)
        adv = np.zeros(self.num_domains)
        for name, item in stats.items():
            i = index.get(name)
            if i is None or item.n <= 0:
                continue
            n[i] = item.n
            passed[i] = item.pass_rate * item.n
            adv[i] = item.mean_abs_advantage * item.n
        seen = n > 0
        self.fast_sum = self.fast_decay * self.fast_sum + passed
        self.fast_n = self.fast_decay * self.fast_n + n
        self.slow_sum = self.slow_decay * self.slow_sum + passed
        self.slow_n = self.slow_decay * self.slow_n + n
        self.adv_sum = self.slow_decay * self.adv_sum + adv
        self.total_n += n
        self.last_pass[seen] = passed[seen] / n[seen]
        self.last_seen_step[seen] = step
        self.num_observed += seen
        self._update_flags(seen)
        return seen

    def _update_flags(self, seen: np.ndarray) -> None:
        band = self.shaping.hysteresis
        p = self.pass_fast
        self.at_target = np.where(p >= self.targets + band, True,
                                  np.where(p < self.targets - band, False, self.at_target))
        if not self.shaping.unlearnable_cap:
            return
        z = self.progress_z
        candidate = (
            seen
            & ~self.at_target
            & (self.num_observed >= self.min_history)
            & (self.pass_slow <= self.targets - self.shaping.unlearnable_min_gap)
            & (self.total_n >= self.shaping.unlearnable_min_samples)
            & (np.abs(z) < self.shaping.unlearnable_max_progress_z)
        )
        # Leaky counter: +1 per flat update, -3 per update with visible change. Pure noise keeps |z| below
        # the threshold most of the time and climbs; a domain that is really moving drifts down.
        self.stuck_count = np.where(candidate, self.stuck_count + 1,
                                    np.where(seen, np.maximum(self.stuck_count - 3, 0), self.stuck_count))
        entering = ~self.stuck & (self.stuck_count >= self.shaping.unlearnable_patience_steps)
        self.stuck_level = np.where(entering, self.pass_slow, self.stuck_level)
        self.stuck = self.stuck | entering
        # Release needs a rise of at least the margin that is also significant on the slow estimate; at
        # the floor the estimate rests on few samples, and a 2-sigma rule released guessable domains by
        # noise every few hundred steps.
        slow = self.pass_slow
        rise = slow - self.stuck_level
        se = np.sqrt(np.maximum(slow * (1.0 - slow), 0.01) / (self.slow_n + PRIOR_SAMPLES))
        needed = np.maximum(self.shaping.unlearnable_release_margin, self.shaping.unlearnable_release_z * se)
        significant = rise >= needed
        release = self.stuck & (significant | self.at_target)
        self.stuck = self.stuck & ~release
        self.stuck_count = np.where(release, 0, self.stuck_count)

    # ---- persistence -------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        state: dict[str, Any] = {}
        for name in (*_FLOAT_FIELDS, *_INT_FIELDS, *_BOOL_FIELDS):
            values = getattr(self, name)
            state[name] = [None if isinstance(v, float) and np.isnan(v) else v for v in values.tolist()]
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        for name, dtype in [*((f, float) for f in _FLOAT_FIELDS), *((f, np.int64) for f in _INT_FIELDS),
                            *((f, bool) for f in _BOOL_FIELDS)]:
            raw = [np.nan if v is None else v for v in state[name]]
            if len(raw) != self.num_domains:
                raise ValueError(f"tracker state {name!r} has {len(raw)} entries, expected {self.num_domains}")
            setattr(self, name, np.asarray(raw, dtype=dtype))
