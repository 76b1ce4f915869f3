"""Run one mixture on one simulated world and score it.

`run_episode` drives the mixture only through its public API (`batch_counts`, `update`, `weights`)
and measures, on the simulator's true pass rates: steps until every learnable domain is at target
(censored at the horizon), the area under the mean learning curve, the worst learnable domain's final
pass rate, the share of prompts spent on unlearnable domains after warm-up, and forgetting (the largest
drop of a learnable domain from its running peak). Not here: aggregation over seeds (`bench`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from posttrain.bench.curriculum_sim import KIND_GUESSABLE, KIND_HOPELESS, SimConfig, Simulator
from posttrain.curriculum.difficulty import DifficultyConfig, DifficultyTargeter
from posttrain.curriculum.mixture import build_mixture
from posttrain.curriculum.stats import DomainStats

METRICS: tuple[str, ...] = (
    "steps_to_target",
    "reached_target",
    "auc_mean_pass",
    "worst_final_pass",
    "unlearnable_share",
    "max_forgetting",
)
"""Per-episode scalar metrics, in report order."""


@dataclass
class EpisodeResult:
    """Scalar metrics plus the curves needed for plots."""

    metrics: dict[str, float]
    mean_curve: np.ndarray
    """[T] mean true pass rate over learnable domains after each step."""
    at_target_curve: np.ndarray
    """[T] fraction of learnable domains at or above target after each step."""
    weights: np.ndarray | None
    """[T, D] mixture weights after each update, when recorded."""
    domain_kind: np.ndarray
    """[D] simulator kind of each domain."""


def domain_names(num_domains: int) -> list[str]:
    return [f"sim/d{i:03d}" for i in range(num_domains)]


def run_episode(
    sim_config: SimConfig,
    mixture_config: Mapping[str, Any] | Any,
    seed: int,
    num_steps: int | None = None,
    record_weights: bool = False,
    difficulty: DifficultyConfig | None = None,
) -> EpisodeResult:
    """Train a fresh world of `seed` for `num_steps` (default: the config's horizon) under a mixture;
    with `difficulty`, levels inside each domain are chosen by a `DifficultyTargeter`."""
    sim = Simulator(sim_config, seed)
    names = domain_names(sim_config.num_domains)
    mixture = build_mixture(mixture_config, domains=names)
    rng = np.random.default_rng(seed + 1_000_003)
    steps = num_steps or sim_config.num_steps
    learnable = sim.world.learnable
    unlearnable = np.isin(sim.world.kind, [KIND_HOPELESS, KIND_GUESSABLE])
    passes = np.empty((steps, sim_config.num_domains))
    weights = np.empty((steps, sim_config.num_domains)) if record_weights else None
    prompts_unlearnable = prompts_after_warmup = 0
    targeter = None
    if difficulty is not None:
        targeter = DifficultyTargeter({n: ["easy", "medium", "hard"] for n in names}, difficulty)
    for t in range(steps):
        allocation = mixture.batch_counts(sim_config.batch_size, rng)
        counts = np.fromiter((allocation[n] for n in names), dtype=np.int64, count=len(names))
        if t >= sim_config.warmup_steps:
            prompts_unlearnable += int(counts[unlearnable].sum())
            prompts_after_warmup += int(counts.sum())
        level_probs = None if targeter is None else np.stack([targeter.level_probs_array(n) for n in names])
        observed = sim.step(counts, level_probs)
        if targeter is not None:
            observed = _level_balanced(observed, targeter, names, sim)
        mixture.update({names[d]: s for d, s in observed.items()}, step=t + 1)
        passes[t] = sim.true_pass_rates()
        if weights is not None:
            current = mixture.weights()
            weights[t] = [current[n] for n in names]
    metrics = _score(passes[:, learnable], sim_config.target, steps)
    metrics["unlearnable_share"] = prompts_unlearnable / max(prompts_after_warmup, 1)
    at_target = (passes[:, learnable] >= sim_config.target).mean(axis=1)
    return EpisodeResult(metrics, passes[:, learnable].mean(axis=1), at_target, weights, sim.world.kind)


def _level_balanced(
    observed: dict[int, DomainStats], targeter: DifficultyTargeter, names: list[str], sim: Simulator
) -> dict[int, DomainStats]:
    """Steer levels with the raw pass rate; report the level-balanced one to the domain mixture."""
    balanced = {}
    for d, item in observed.items():
        targeter.update(names[d], item.pass_rate, item.n, sim.last_level_passes[d].tolist(),
                        sim.last_level_samples[d].tolist())
        rate = targeter.balanced_pass_rate(names[d])
        balanced[d] = replace(item, pass_rate=item.pass_rate if rate is None else rate)
    return balanced


def _score(passes: np.ndarray, target: float, steps: int) -> dict[str, float]:
    """Metrics over learnable domains; `passes` is [T, L]."""
    all_at_target = (passes >= target).all(axis=1)
    reached = bool(all_at_target.any())
    first = int(np.argmax(all_at_target)) + 1 if reached else steps
    drop = np.maximum.accumulate(passes, axis=0) - passes
    return {
        "steps_to_target": float(first),
        "reached_target": float(reached),
        "auc_mean_pass": float(passes.mean()),
        "worst_final_pass": float(passes[-1].min()),
        "max_forgetting": float(drop.max()),
    }
