"""One checkpoint's graded responses for a set of sample slots: from the cache, or generated and graded.

`collect` looks every slot up in the `ResultCache` and generates only the missing ones, in batches
through the rollout engine: single-turn responses as one request each (greedy, or sampled with n=1 and
the slot's own seed), agent tasks as episodes through the `EpisodeRunner`; then grades the single-turn
ones through the score function (a `Grader`'s `grade`, whose pools handle sandboxes) and stores what is
not an infra failure. Sample j of a task is seeded with `task_seed(seed, task) + j` (episode turn t with
that + 7919 t, the runner's rule), so it does not depend on which other tasks, domains or samples are
asked for. A slot computed in a smaller batch can differ from the full run's only through float
differences between batch shapes; docs/evaluation.md measured none over 3,840 responses (not a guarantee).

Not here: which slots a matrix needs, metrics (`posttrain.eval.matrix`, `posttrain.eval.metrics`).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from posttrain.eval.cache import ResultCache, SampleRecord, SampleSlot, record_key
from posttrain.eval.evaluate import ScoreFn
from posttrain.rollout.api import GenerationRequest, RolloutEngine, SamplingParams
from posttrain.rollout.prompting import PromptRenderer
from posttrain.tasks.pool import TaskPool
from posttrain.types import Task

GREEDY = "greedy"
SAMPLED = "sampled"


@dataclass(frozen=True)
class Policy:
    """A checkpoint ready to evaluate: its weights' hash (the cache's identity of it) and an engine."""

    label: str
    """Its name in the matrix."""
    weights_hash: str
    """sha256 of its weights (`posttrain.train.models.weights_sha256`, computed by the caller)."""
    engine: RolloutEngine
    renderer: PromptRenderer
    path: str = ""
    """Where it came from, for people."""
    trained_domains: tuple[str, ...] = ()
    """Domains its run trained on."""


@dataclass(frozen=True)
class Collected:
    """Every slot's record (an infra failure's too, never cached) and where the records came from."""

    records: dict[str, SampleRecord]
    """By cache key."""
    computed: frozenset[str]
    """The keys generated and graded in this call (the others came from the cache)."""

    @property
    def num_computed(self) -> int:
        return len(self.computed)

    @property
    def num_cached(self) -> int:
        return len(self.records) - len(self.computed)


def task_seed(seed: int, task: Task) -> int:
    """The first sample's seed of `task` under the matrix seed `seed` (a function of the task alone)."""
    blob = f"{seed}:{task.id}:{task.content_hash}".encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.sha256(blob).digest()[:4], "big") % 2**31


def collect(
    policy: Policy, pool: TaskPool, slots: Sequence[SampleSlot], score_fn: ScoreFn, cache: ResultCache,
    batch_size: int = 512,
) -> Collected:
    """The records of `slots` for `policy` (module docstring); new non-infra records are stored."""
    keys = [record_key(policy.weights_hash, slot) for slot in slots]
    found = cache.get_many(keys)
    missing = [(key, slot) for key, slot in zip(keys, slots, strict=True) if key not in found]
    missing = list({key: (key, slot) for key, slot in missing}.values())  # a slot asked twice is made once
    episodic = [(k, s) for k, s in missing if pool.registry.is_episodic(s.task.domain_id)]
    single = [(k, s) for k, s in missing if not pool.registry.is_episodic(s.task.domain_id)]
    new: dict[str, SampleRecord] = {}
    for start in range(0, len(single), batch_size):
        new.update(_single_turn(policy, single[start : start + batch_size], score_fn))
    for start in range(0, len(episodic), batch_size):
        new.update(_episodes(policy, pool, episodic[start : start + batch_size]))
    slot_of = dict(missing)
    cache.put_many((key, policy.weights_hash, slot_of[key], record) for key, record in new.items())
    found.update(new)
    return Collected({k: found[k] for k in keys}, frozenset(slot_of))


def sampling_params(slot: SampleSlot, renderer: PromptRenderer) -> SamplingParams:
    """The request parameters of one slot (n=1; a sampled slot seeded with its task's seed + index)."""
    sampling = slot.sampling
    if sampling["mode"] == GREEDY:
        return SamplingParams(n=1, max_new_tokens=int(sampling["max_new_tokens"]), temperature=0.0,
                              stop_token_ids=renderer.stop_ids)  # fmt: skip
    return SamplingParams(
        n=1, max_new_tokens=int(sampling["max_new_tokens"]), temperature=float(sampling["temperature"]),
        top_p=float(sampling["top_p"]), top_k=int(sampling["top_k"]),
        seed=task_seed(int(sampling["seed"]), slot.task) + slot.index, stop_token_ids=renderer.stop_ids,
    )  # fmt: skip


def _single_turn(policy: Policy, items: Sequence[tuple[str, SampleSlot]], score_fn: ScoreFn) -> dict[str, SampleRecord]:
    renderer = policy.renderer
    requests = [GenerationRequest(prompt_ids=tuple(renderer.prompt_ids(slot.task)),
                                  params=sampling_params(slot, renderer)) for _, slot in items]  # fmt: skip
    outputs = policy.engine.generate(requests) if requests else []
    texts = [renderer.decode(o.samples[0].token_ids) for o in outputs]
    scores = score_fn([(slot.task, text) for (_, slot), text in zip(items, texts, strict=True)]) if items else []
    return {
        key: SampleRecord(text, score, len(out.samples[0].token_ids))
        for (key, _), text, score, out in zip(items, texts, scores, outputs, strict=True)
    }


def _episodes(policy: Policy, pool: TaskPool, items: Sequence[tuple[str, SampleSlot]]) -> dict[str, SampleRecord]:
    """Episodes grouped by sampling settings (one runner each); each job seeded like its request would be."""
    from posttrain.envs.runner import EpisodeJob, EpisodeRunner

    groups: dict[str, list[tuple[str, SampleSlot]]] = {}
    for key, slot in items:
        groups.setdefault(repr(sorted(slot.sampling.items())), []).append((key, slot))
    out: dict[str, SampleRecord] = {}
    for group in groups.values():
        first = sampling_params(group[0][1], policy.renderer).model_copy(update={"seed": None})
        runner = EpisodeRunner(policy.engine, policy.renderer, first,
                               max_total_tokens=int(group[0][1].sampling["max_total_tokens"]))  # fmt: skip
        jobs = []
        for _, slot in group:
            env = pool.registry.environment(slot.task.domain_id)
            assert env is not None
            seed = sampling_params(slot, policy.renderer).seed
            jobs.append(EpisodeJob(slot.task, env, slot.index, seed,
                                   make_env=functools.partial(_environment, pool, slot.task.domain_id)))  # fmt: skip
        for (key, _), result in zip(group, runner.run(jobs), strict=True):
            out[key] = SampleRecord(result.trajectory.response, result.score, result.trajectory.num_policy_tokens)
    return out


def _environment(pool: TaskPool, domain_id: str) -> Any:
    return pool.registry.environment(domain_id)
