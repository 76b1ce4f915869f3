"""What a scheduler run did, in counters a caller can log: `SchedStats`.

Guarantees: every attempt that ends is counted once under one heading; service times are
exponentially weighted means (per work kind and overall) of attempts that returned, a deadline overrun
excluded (its true service time is unknown). `as_dict` gives flat `sched/...` keys for step logs.
Not here: the decisions these numbers feed (`scaling.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, field


def ewma(previous: float | None, sample: float, alpha: float) -> float:
    """Exponentially weighted mean: the first sample as is, then alpha * sample + (1 - alpha) * previous."""
    return sample if previous is None else alpha * sample + (1.0 - alpha) * previous


@dataclass
class SchedStats:
    """Counters and gauges of one scheduler (see module docstring)."""

    admitted: int = 0
    """Jobs accepted into the queue."""
    refused: int = 0
    """Offers refused because the queue was full (backpressure events)."""
    attempts: int = 0
    """Attempts started (first attempts and retries)."""
    ok: int = 0
    """Jobs committed with a value."""
    model_errors: int = 0
    """Jobs committed as the work's own error (never retried)."""
    infra_failed: int = 0
    """Jobs committed after their last attempt failed on infrastructure."""
    expired: int = 0
    """Jobs committed after their last attempt overran its deadline."""
    infra_failures: int = 0
    """Attempts that failed on infrastructure, deadline overruns included."""
    retries: int = 0
    """Attempts re-queued after an infrastructure failure."""
    expirations: int = 0
    """Attempts abandoned at their deadline."""
    late_results: int = 0
    """Results ignored because their attempt had been abandoned or already settled."""
    resizes: int = 0
    """Pool resizes applied."""
    max_queue_depth: int = 0
    """Most items the queue held at once."""
    service_time_s: float | None = None
    """Mean service time of an attempt, all kinds together (EWMA)."""
    service_time_s_by_kind: dict[str, float] = field(default_factory=dict)
    """Mean service time per work kind (EWMA)."""

    def record_service(self, kind: str, seconds: float, alpha: float) -> None:
        """Fold one attempt's service time into the means."""
        self.service_time_s = ewma(self.service_time_s, seconds, alpha)
        self.service_time_s_by_kind[kind] = ewma(self.service_time_s_by_kind.get(kind), seconds, alpha)

    def as_dict(self, prefix: str = "sched/") -> dict[str, float]:
        """Flat numeric view for logging (`sched/retries`, `sched/service_time_s/verify`, ...)."""
        out = {f"{prefix}{name}": float(getattr(self, name)) for name in (
            "admitted", "refused", "attempts", "ok", "model_errors", "infra_failed", "expired",
            "infra_failures", "retries", "expirations", "late_results", "resizes", "max_queue_depth")}
        if self.service_time_s is not None:
            out[f"{prefix}service_time_s"] = self.service_time_s
        for kind, seconds in sorted(self.service_time_s_by_kind.items()):
            out[f"{prefix}service_time_s/{kind}"] = seconds
        return out
