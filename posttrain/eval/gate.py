"""The regression gate: does a checkpoint lose a base capability the base model had?

Per suite domain, the checkpoint's per-task scores are paired with the base's on the same tasks (by
task id) and compared with `posttrain.eval.stats.paired` (paired bootstrap interval of the mean
difference; McNemar's exact test when both sides are pass/fail). A domain regresses when its delta is
below `-margin` and the comparison's verdict is `regressed` (interval entirely below 0, p < 0.05); a
class regresses when the mean over its suite domains of their deltas is below 0 with verdict
`regressed` (`paired_mean_of_domains`: tasks resampled within every domain; on pass/fail scores the
p-value is the larger of the bootstrap's and McNemar's over the pooled tasks). A checkpoint passes when
nothing regresses. docs/evaluation.md says why the interval must clear 0 rather than `-margin`.

The suite (`suite_ids`): the configured glob patterns, or by default every domain the checkpoint was not
trained on plus the general capabilities `GENERAL_SUITE`. Pure: scores in, verdicts out; no I/O.
Not here: producing the scores (the evaluation matrix, or the trainer's evaluations).
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from pydantic import Field

from posttrain.config import StrictModel
from posttrain.eval.stats import Paired, mcnemar_p, paired, paired_mean_of_domains
from posttrain.types import TaxonomyPath

GENERAL_SUITE = ("math/arithmetic/*", "text/*")
"""General capabilities in every default suite, trained on or not."""

TaskScores = tuple[Sequence[str], Sequence[float]]
"""Task ids and one score per task, in the same order."""


class GateConfig(StrictModel):
    """The regression gate against the base model (`eval.gate` of a train config; `posttrain eval --gate`)."""

    enabled: bool = False
    """Compute the gate at every evaluation and keep the best checkpoint that passes it."""
    margin: float = Field(0.02, ge=0.0, lt=1.0)
    """A domain fails when its reward drops by more than this (2 points) with a significant paired test."""
    suite: list[str] = Field(default_factory=list)
    """Glob patterns over domain ids; empty: every domain not trained on, plus math/arithmetic/* and text/*."""


@dataclass(frozen=True)
class GateRow:
    """One paired comparison: a suite domain or a class."""

    name: str
    n: int
    """Tasks paired."""
    base: float
    checkpoint: float
    """Mean score on the paired tasks (a class: mean of its domains' means)."""
    delta: float
    ci_low: float
    ci_high: float
    p_value: float
    regressed: bool

    def to_dict(self) -> dict[str, Any]:
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in asdict(self).items()}


@dataclass(frozen=True)
class GateResult:
    """A checkpoint's gate: every suite domain and class compared with the base."""

    checkpoint: str
    margin: float
    suite: tuple[str, ...]
    domains: tuple[GateRow, ...]
    classes: tuple[GateRow, ...]

    @property
    def passed(self) -> bool:
        return not self.offenders

    @property
    def offenders(self) -> list[str]:
        """Regressed domains, then regressed classes as `class <name>`."""
        return [r.name for r in self.domains if r.regressed] + [f"class {r.name}" for r in self.classes if r.regressed]

    def to_dict(self) -> dict[str, Any]:
        return {"checkpoint": self.checkpoint, "passed": self.passed, "margin": self.margin, "suite": list(self.suite),
                "offenders": self.offenders, "domains": [r.to_dict() for r in self.domains],
                "classes": [r.to_dict() for r in self.classes]}  # fmt: skip


def suite_ids(patterns: Sequence[str], domain_ids: Sequence[str], trained_ids: Sequence[str]) -> list[str]:
    """The suite among `domain_ids`: those matching `patterns`, or (none given) the untrained ones plus
    `GENERAL_SUITE`, in `domain_ids` order."""
    trained = set(trained_ids)
    if patterns:
        return [d for d in domain_ids if any(fnmatch.fnmatchcase(d, p) for p in patterns)]
    return [d for d in domain_ids if d not in trained or any(fnmatch.fnmatchcase(d, p) for p in GENERAL_SUITE)]


def gate(
    label: str, base: Mapping[str, TaskScores], checkpoint: Mapping[str, TaskScores], suite: Sequence[str],
    margin: float,
) -> GateResult:
    """The gate of `checkpoint` against `base` over the suite domains (both keyed by domain id)."""
    pairs = {d: pair_by_task(base[d], checkpoint[d]) for d in suite if d in base and d in checkpoint}
    domains = tuple(_row(d, old, new, paired(old, new), margin) for d, (old, new) in pairs.items())
    by_class: dict[str, list[str]] = {}
    for d in pairs:
        by_class.setdefault(TaxonomyPath.parse(d).cls, []).append(d)
    classes = []
    for cls, ids in by_class.items():
        result = _class_paired([pairs[d] for d in ids])
        old = _mean([_mean(pairs[d][0]) for d in ids if pairs[d][0]])
        new = _mean([_mean(pairs[d][1]) for d in ids if pairs[d][1]])
        classes.append(_row(cls, [old], [new], result, 0.0))
    return GateResult(label, margin, tuple(pairs), domains, tuple(classes))


def pair_by_task(base: TaskScores, checkpoint: TaskScores) -> tuple[list[float], list[float]]:
    """The two score lists over the tasks present in both, in the checkpoint's order."""
    before = dict(zip(base[0], base[1], strict=True))
    common = [(before[t], v) for t, v in zip(checkpoint[0], checkpoint[1], strict=True) if t in before]
    return [b for b, _ in common], [c for _, c in common]


def _class_paired(pairs: Sequence[tuple[list[float], list[float]]]) -> Paired:
    """`paired_mean_of_domains`; on pass/fail scores its p-value is at least McNemar's over the pooled
    tasks (the bootstrap's alone calls three lost passes significant)."""
    result = paired_mean_of_domains(pairs)
    old = [v for b, _ in pairs for v in b]
    new = [v for _, f in pairs for v in f]
    if old and all(v in (0.0, 1.0) for v in old + new):
        exact = mcnemar_p([v == 1.0 for v in old], [v == 1.0 for v in new])
        result = replace(result, p_value=max(result.p_value, exact))
    return result


def _row(name: str, old: Sequence[float], new: Sequence[float], result: Paired, margin: float) -> GateRow:
    regressed = result.n > 0 and result.delta < -margin and result.verdict == "regressed"
    return GateRow(name, result.n, _mean(old), _mean(new), result.delta, result.ci_low, result.ci_high,
                   result.p_value, regressed)  # fmt: skip


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if len(values) else math.nan
