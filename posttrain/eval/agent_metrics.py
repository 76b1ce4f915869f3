"""Agent-domain metrics: the per-episode counters of graded episodes, aggregated per domain.

An episode is a graded `Score` whose `details` hold every `EPISODE_METRICS` key (what an `Environment`'s
grade gives); any other score (a single-turn domain's) is not one, so a domain without episodes gets `{}`
and its output stays as it was. `episode_metrics` aggregates one domain's scores into flat numbers:

- `episodes`: graded episodes; `infra_failures`: infra-failure scores, left out of everything else;
- `success_rate`: share with reward == 1.0 (the environment contract: exactly the solved episodes), with
  its 95% bootstrap interval `success_rate_ci_low` / `_ci_high` (`posttrain.eval.stats`);
- `completion`: mean `details["completion"]` (the share of sub-goals done), the reward where absent;
- `tool_call_success`: tool calls that ran without error / tool calls, over all episodes pooled;
- `recovery_rate`: among episodes that hit a tool error, the share that passed, with its interval;
- `errored_episodes`: episodes that hit a tool error;
- `turns_per_episode`, `tool_calls_per_episode`, `malformed_per_episode`: means;
- `end_reason/<reason>`: episodes that ended for that reason (counts).

A ratio with no denominator is omitted, never NaN or None: no tool call → no `tool_call_success`, no
episode with a tool error → no `recovery_rate` (nor its interval). `episode_step_metrics` gives the
same numbers, without intervals, as `agent/<metric>/<domain>` keys for one training step's log.

Not here: running episodes (`posttrain.envs`), writing or plotting the numbers (`posttrain.train`).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence

from posttrain.envs.base import EPISODE_METRICS
from posttrain.eval.stats import bootstrap_ci
from posttrain.types import Score

HEADLINE_METRICS = ("success_rate", "completion", "tool_call_success", "recovery_rate")
"""The metrics a table or plot shows first, in order."""


def is_episode(score: Score) -> bool:
    """Whether `score` is an environment's grade (its details hold every episode counter)."""
    return all(key in score.details for key in EPISODE_METRICS)


def episode_metrics(scores: Sequence[Score], with_ci: bool = True) -> dict[str, float]:
    """One domain's aggregated episode metrics (keys in the module docstring); {} without a graded episode."""
    episodes = [s for s in scores if is_episode(s) and not s.is_infra_failure]
    if not episodes:
        return {}
    out: dict[str, float] = {
        "episodes": len(episodes),
        "infra_failures": sum(s.is_infra_failure for s in scores),
    }
    out.update(_rate("success_rate", [s.reward == 1.0 for s in episodes], with_ci))
    out["completion"] = _mean([_completion(s) for s in episodes])
    calls = sum(_count(s, "tool_calls") for s in episodes)
    if calls:
        out["tool_call_success"] = sum(_count(s, "tool_calls_ok") for s in episodes) / calls
    errored = [s for s in episodes if _count(s, "tool_errors") > 0]
    out["errored_episodes"] = len(errored)
    if errored:
        out.update(_rate("recovery_rate", [s.passed for s in errored], with_ci))
    for key, name in (("turns", "turns_per_episode"), ("tool_calls", "tool_calls_per_episode"),
                      ("malformed_calls", "malformed_per_episode")):  # fmt: skip
        out[name] = _mean([_count(s, key) for s in episodes])
    reasons = Counter(str(s.details["end_reason"]) for s in episodes)
    out.update({f"end_reason/{reason}": count for reason, count in sorted(reasons.items())})
    return out


def episode_step_metrics(scored: Sequence[tuple[str, Score]]) -> dict[str, float]:
    """`agent/<metric>/<domain>` for every domain among (domain id, score) pairs that has episodes
    (no bootstrap intervals: a step's log needs the numbers, not their uncertainty)."""
    by_domain: dict[str, list[Score]] = defaultdict(list)
    for domain_id, score in scored:
        by_domain[domain_id].append(score)
    out: dict[str, float] = {}
    for domain_id, scores in by_domain.items():
        for metric, value in episode_metrics(scores, with_ci=False).items():
            out[f"agent/{metric}/{domain_id}"] = value
    return out


def _rate(name: str, outcomes: Sequence[bool], with_ci: bool) -> dict[str, float]:
    values = [float(o) for o in outcomes]
    out = {name: _mean(values)}
    if with_ci:
        out[f"{name}_ci_low"], out[f"{name}_ci_high"] = bootstrap_ci(values)
    return out


def _completion(score: Score) -> float:
    value = score.details.get("completion")
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else score.reward


def _count(score: Score, key: str) -> int:
    value = score.details.get(key)
    return int(value) if isinstance(value, int | float) else 0


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)
