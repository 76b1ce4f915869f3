"""The metrics of one matrix cell (a checkpoint on a domain) and their aggregates over domains.

Pure functions over graded scores. Every metric is computed per task as a ratio (numerator,
denominator): a plain per-task value is (value, 1), a pooled rate such as tool-call success is
(successful calls, calls); a task where a metric is undefined contributes nothing. A metric's value is
sum(numerators) / sum(denominators) with a seeded 95% bootstrap interval over tasks
(`posttrain.eval.stats`). Which metrics a domain has beyond the common ones is looked up, not branched
on: `BY_VERIFIER` keyed by the verifier kind (the shape of `Score.details`), `BY_CLASS` keyed by the
taxonomy class. Extra metrics are read from the greedy response's score and, as `<name>_sampled`, pooled
over each task's sampled responses (an agent domain's `recovery_sampled`: errored sampled episodes
that passed over errored sampled episodes).

Common metrics: `pass@1` and `reward` (greedy); with sampled responses `pass@1_sampled` and `pass@k`
(the unbiased estimator of Chen et al. 2021, "Evaluating Large Language Models Trained on Code", eq. 1).
Not here: generating or grading (`posttrain.eval.collect`), the matrix document (`posttrain.eval.matrix`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from posttrain.eval.agent_metrics import is_episode
from posttrain.eval.stats import bootstrap_ratio_ci, mean_of_domains_ci
from posttrain.types import Score

Ratio = tuple[float, float]
"""(numerator, denominator) of one task's contribution to a metric."""
Extractor = Callable[[Score], Ratio | None]
"""A metric's contribution from one score; None where it is undefined for that response."""

AGGREGATED = ("pass@1", "reward", "pass@1_sampled", "pass@k")
"""Metrics every domain has (the sampled ones when sampling is on): the ones averaged over domains."""


@dataclass(frozen=True)
class Metric:
    """A metric of a set of tasks: value, 95% bootstrap interval, tasks it is computed over."""

    value: float
    ci_low: float
    ci_high: float
    n: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: NaN becomes None."""
        return {"value": _finite(self.value), "ci_low": _finite(self.ci_low), "ci_high": _finite(self.ci_high),
                "n": self.n}  # fmt: skip


def _detail(name: str) -> Extractor:
    """A numeric detail of the score, as is."""

    def extract(score: Score) -> Ratio | None:
        value = score.details.get(name)
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        return float(value), 1.0

    return extract


def _share(num_key: str, den_key: str) -> Extractor:
    """details[num_key] / details[den_key] of one task (a task weighs the same whatever its count)."""

    def extract(score: Score) -> Ratio | None:
        num, den = score.details.get(num_key), score.details.get(den_key)
        if not isinstance(num, int | float) or not isinstance(den, int | float) or den <= 0:
            return None
        return float(num) / float(den), 1.0

    return extract


def _when_cited(extract: Extractor) -> Extractor:
    """Defined on responses that cite at least one section (a response citing nothing is vacuously
    "supported" by the verifier: every one of its zero cites supports a fact)."""
    return lambda score: extract(score) if _count(score, "num_cited") > 0 else None


def _episode(extract: Extractor) -> Extractor:
    """Defined on agent episodes only (scores whose details hold the episode counters)."""
    return lambda score: extract(score) if is_episode(score) else None


def _count(score: Score, key: str) -> float:
    value = score.details.get(key)
    return float(value) if isinstance(value, int | float) else 0.0


def _tool_calls(score: Score) -> Ratio | None:
    calls = _count(score, "tool_calls")
    return (_count(score, "tool_calls_ok"), calls) if calls > 0 else None


def _recovery(score: Score) -> Ratio | None:
    return (float(score.passed), 1.0) if _count(score, "tool_errors") > 0 else None


def _completion(score: Score) -> Ratio | None:
    value = score.details.get("completion")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return score.reward, 1.0
    return float(value), 1.0


def _passed(score: Score) -> Ratio | None:
    return float(score.passed), 1.0


EPISODE_EXTRACTORS: dict[str, Extractor] = {
    "success": _episode(lambda s: (float(s.reward == 1.0), 1.0)),
    "completion": _episode(_completion),
    "tool_call_success": _episode(_tool_calls),
    "recovery": _episode(_recovery),
}
"""`posttrain.eval.agent_metrics`'s headline metrics, per episode."""

CAD_DETAILS = ("compiles", "manifold", "volume", "bbox", "features", "voids", "iou")
"""`posttrain.verify.cad_score`'s gates and sub-scores."""

BY_VERIFIER: dict[str, dict[str, Extractor]] = {
    "environment": EPISODE_EXTRACTORS,
    "citations": {"accuracy": _detail("accuracy"), "citation_precision": _detail("citation_precision"),
                  "citation_recall": _detail("citation_recall"),
                  "citation_support": _when_cited(_detail("citation_support"))},
    "cad_geometry": {name: _detail(name) for name in CAD_DETAILS},
    "code_tests": {"tests_passed": _share("tests_passed", "tests_total")},
    "gamedev_play": {"tests_passed": _share("tests_passed", "tests_total")},
}  # fmt: skip
"""Metrics read from the greedy score's details, by the domain's verifier kind."""

BY_CLASS: dict[str, dict[str, Extractor]] = {
    "terminal": {"tests_passed": _passed},
}
"""Metrics by taxonomy class (a terminal task's test script passes or not: no per-test counts)."""


def pass_at_k(num_samples: int, num_passed: int, k: int) -> float:
    """Unbiased pass@k from `num_samples` samples of which `num_passed` pass: 1 - C(n-c, k) / C(n, k).
    With fewer than k samples (infra failures left out) it is whether any of them passed."""
    if num_samples <= 0:
        return math.nan
    if num_samples < k:
        return float(num_passed > 0)
    if num_samples - num_passed < k:
        return 1.0
    return 1.0 - math.comb(num_samples - num_passed, k) / math.comb(num_samples, k)


TaskRatios = dict[str, dict[str, Ratio]]
"""Per metric, each task's ratio by task id (tasks where the metric is undefined are absent)."""


def task_ratio_table(
    verifier: str, cls: str, greedy: Sequence[tuple[str, Score]], sampled: Sequence[tuple[str, Sequence[Score]]],
    k: int,
) -> TaskRatios:
    """Per metric, one ratio per task id where it is defined. `greedy`: (task id, graded greedy score);
    `sampled`: (task id, its graded samples) of every task with a graded sample. The verifier's and
    class's extra metrics are read from the greedy score and, under `<name>_sampled`, pooled over each
    task's samples (sum of the samples' numerators over the sum of their denominators)."""
    out: TaskRatios = {
        "pass@1": {t: (float(s.passed), 1.0) for t, s in greedy},
        "reward": {t: (s.reward, 1.0) for t, s in greedy},
    }
    counts = {t: (sum(s.passed for s in scores), len(scores)) for t, scores in sampled if scores}
    if counts:
        out["pass@1_sampled"] = {t: (c / n, 1.0) for t, (c, n) in counts.items()}
        out["pass@k"] = {t: (pass_at_k(n, c, k), 1.0) for t, (c, n) in counts.items()}
    extractors = {**BY_VERIFIER.get(verifier, {}), **BY_CLASS.get(cls, {})}
    for name, extract in extractors.items():
        out[name] = {t: r for t, r in ((t, extract(s)) for t, s in greedy) if r is not None}
        pooled: dict[str, Ratio] = {}
        for task, scores in sampled:
            ratios = [r for r in map(extract, scores) if r is not None]
            if ratios:
                pooled[task] = (sum(n for n, _ in ratios), sum(d for _, d in ratios))
        out[f"{name}_sampled"] = pooled
    return {name: ratios for name, ratios in out.items() if ratios}


def summarise(ratios: Mapping[str, Sequence[Ratio]]) -> dict[str, Metric]:
    """Each metric's value (ratio of sums), interval and task count."""
    out: dict[str, Metric] = {}
    for name, items in ratios.items():
        num, den = [r[0] for r in items], [r[1] for r in items]
        total = sum(den)
        value = sum(num) / total if total > 0 else math.nan
        low, high = bootstrap_ratio_ci(num, den)
        out[name] = Metric(value, low, high, sum(1 for d in den if d > 0))
    return out


def aggregate(domains: Sequence[Mapping[str, Sequence[Ratio]]]) -> dict[str, Metric]:
    """The mean over domains of each `AGGREGATED` metric's domain value, with its interval from
    resampling tasks within every domain (`mean_of_domains_ci`); domains lacking a metric are left out."""
    out: dict[str, Metric] = {}
    for name in AGGREGATED:
        rows = [[n / d for n, d in ratios[name] if d > 0] for ratios in domains if ratios.get(name)]
        rows = [r for r in rows if r]
        if not rows:
            continue
        low, high = mean_of_domains_ci(rows)
        value = sum(sum(r) / len(r) for r in rows) / len(rows)
        out[name] = Metric(value, low, high, sum(len(r) for r in rows))
    return out


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None
