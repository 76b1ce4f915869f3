"""The evaluation matrix: every checkpoint on every domain's fixed eval set, with per-class metrics.

`evaluate_matrix` takes the checkpoints one at a time (an iterable, so a caller can load each only
when its turn comes and free it after), asks `posttrain.eval.collect` for each one's greedy response
and `n` sampled responses per eval task (`TaskPool.eval_tasks`: the same tasks for every checkpoint),
and summarises each (checkpoint, domain) cell with `posttrain.eval.metrics`. `MatrixResult.document`
is `matrix.json` (schema in docs/evaluation.md), with family and class aggregates, every checkpoint's
paired change against the base per class and metric (`MatrixResult.changes`) and, when asked, the
regression gate of every checkpoint against the base (`posttrain.eval.gate`).

Guarantees: same checkpoints, tasks, settings and seed give the same numbers (seeded sampling and
bootstrap; responses come from the cache or are regenerated identically); adding a checkpoint or a
domain computes only the missing responses. Not here: loading checkpoints or hashing weights (the
command line, through `posttrain.train`), printing.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import Field, model_validator

from posttrain.config import StrictModel
from posttrain.eval.cache import ResultCache, SampleRecord, SampleSlot, record_key
from posttrain.eval.collect import GREEDY, SAMPLED, Collected, Policy, collect
from posttrain.eval.evaluate import ScoreFn
from posttrain.eval.gate import GateConfig, GateResult, TaskScores, gate, suite_ids
from posttrain.eval.metrics import Ratio, TaskRatios, aggregate, summarise, task_ratio_table
from posttrain.eval.stats import paired_ratio_change
from posttrain.rollout.config import AttentionConfig
from posttrain.tasks.pool import TaskPool
from posttrain.types import Task, TaxonomyPath

FORMAT_VERSION = 1
INFRA_EXAMPLES = 3
"""Distinct infra-failure messages kept per cell."""


class MatrixConfig(StrictModel):
    """What each checkpoint is asked: tasks per domain, greedy and sampled responses, budgets, seed."""

    tasks_per_domain: int = Field(32, ge=1)
    """Fixed eval-split tasks per domain (fewer where the split is smaller)."""
    samples_per_task: int = Field(0, ge=0)
    """n sampled responses per task for pass@1_sampled and pass@k (0: greedy only)."""
    pass_k: int | None = Field(None, ge=1)
    """k of pass@k (at most n; None: n)."""
    temperature: float = Field(0.7, gt=0.0)
    """Sampling temperature of the sampled responses."""
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    """Nucleus mass of the sampled responses."""
    top_k: int = Field(0, ge=0)
    """Top-k of the sampled responses (0: off)."""
    seed: int = 0
    """Seed of the sampled responses (per task: `collect.task_seed`)."""
    max_new_tokens: int = Field(32, ge=1)
    """Tokens per response (per turn in agent episodes)."""
    max_total_tokens: int = Field(2048, ge=16)
    """Bound on an agent episode's whole token sequence."""
    batch_size: int = Field(512, ge=1)
    """Responses per engine call."""
    attention: AttentionConfig = AttentionConfig()
    """The engine's attention (a sparse mode changes the responses, so it is part of their cache key;
    exact keeps the key it always had)."""

    @model_validator(mode="after")
    def _k_within_n(self) -> MatrixConfig:
        if self.pass_k is not None and self.pass_k > self.samples_per_task:
            raise ValueError(f"pass_k={self.pass_k} needs samples_per_task >= {self.pass_k}")
        return self

    @property
    def k(self) -> int:
        return self.pass_k if self.pass_k is not None else self.samples_per_task

    def sampling(self, mode: str, episodic: bool) -> dict[str, Any]:
        """The cache's sampling key of a greedy or sampled response."""
        key: dict[str, Any] = {"mode": mode, "max_new_tokens": self.max_new_tokens}
        if mode == SAMPLED:
            key.update(temperature=self.temperature, top_p=self.top_p, top_k=self.top_k, seed=self.seed)
        if episodic:
            key["max_total_tokens"] = self.max_total_tokens
        if self.attention.kind != "exact":
            key["attention"] = self.attention.model_dump()
        return key

    def summary(self) -> dict[str, Any]:
        """`matrix.json`'s `sampling` block."""
        return {"greedy": True, "tasks_per_domain": self.tasks_per_domain, "n": self.samples_per_task,
                "k": self.k, "temperature": self.temperature, "top_p": self.top_p, "top_k": self.top_k,
                "seed": self.seed, "max_new_tokens": self.max_new_tokens,
                "max_total_tokens": self.max_total_tokens, "attention": self.attention.model_dump()}  # fmt: skip


@dataclass(frozen=True)
class DomainInfo:
    """A matrix row's taxonomy and grading."""

    domain_id: str
    cls: str
    family: str
    """`class/family`."""
    verifier: str
    episodic: bool

    def to_dict(self, trained: bool) -> dict[str, Any]:
        return {"domain_id": self.domain_id, "class": self.cls, "family": self.family, "verifier": self.verifier,
                "episodic": self.episodic, "trained": trained}  # fmt: skip


@dataclass(frozen=True)
class Cell:
    """One checkpoint on one domain: per-task greedy records, sampled counts, per-metric ratios."""

    checkpoint: str
    domain_id: str
    greedy: tuple[tuple[str, SampleRecord], ...]
    """(task id, record) of every task whose greedy response was graded."""
    sampled: tuple[tuple[str, int, int], ...]
    """(task id, passing, graded) of every task with a graded sample."""
    by_task: TaskRatios
    """Per metric, each task's ratio by task id (`posttrain.eval.metrics.task_ratio_table`)."""
    infra_errors: int
    num_cached: int
    num_computed: int
    infra_examples: tuple[str, ...] = ()
    """Distinct messages of the cell's infra failures (the first `INFRA_EXAMPLES`)."""

    @property
    def ratios(self) -> dict[str, list[Ratio]]:
        """Per metric, the ratios of the tasks where it is defined."""
        return {name: list(ratios.values()) for name, ratios in self.by_task.items()}

    def task_scores(self) -> TaskScores:
        return [t for t, _ in self.greedy], [r.score.reward for _, r in self.greedy]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "checkpoint": self.checkpoint, "domain_id": self.domain_id, "n": len(self.greedy),
            "infra_errors": self.infra_errors, "cached_samples": self.num_cached,
            "computed_samples": self.num_computed,
            "metrics": {name: m.to_dict() for name, m in summarise(self.ratios).items()},
            "task_ids": [t for t, _ in self.greedy], "rewards": [r.score.reward for _, r in self.greedy],
            "passed": [r.score.passed for _, r in self.greedy], "responses": [r.response for _, r in self.greedy],
        }  # fmt: skip
        if self.infra_examples:
            out["infra_examples"] = list(self.infra_examples)
        if self.sampled:
            out["sampled"] = {"task_ids": [t for t, _, _ in self.sampled], "num_passed": [c for _, c, _ in self.sampled],
                              "num_graded": [n for _, _, n in self.sampled]}  # fmt: skip
        return out


@dataclass
class MatrixResult:
    """The cells of every checkpoint, in checkpoint then domain order."""

    config: MatrixConfig
    domains: list[DomainInfo]
    checkpoints: list[dict[str, Any]] = field(default_factory=list)
    cells: list[Cell] = field(default_factory=list)

    def cell(self, checkpoint: str, domain_id: str) -> Cell:
        return next(c for c in self.cells if c.checkpoint == checkpoint and c.domain_id == domain_id)

    def task_scores(self, checkpoint: str) -> dict[str, TaskScores]:
        """Per domain, the checkpoint's greedy rewards by task (what the gate pairs)."""
        return {c.domain_id: c.task_scores() for c in self.cells if c.checkpoint == checkpoint}

    def gate(self, config: GateConfig, base: str) -> list[GateResult]:
        """Every other checkpoint's gate against `base` (its suite from its own trained domains)."""
        labels = [c["label"] for c in self.checkpoints]
        if base not in labels:
            raise ValueError(f"no checkpoint labelled {base!r} to gate against (checkpoints: {', '.join(labels)})")
        ids = [d.domain_id for d in self.domains]
        results = []
        for ckpt in self.checkpoints:
            if ckpt["label"] != base:
                suite = suite_ids(config.suite, ids, ckpt["trained_domains"])
                results.append(gate(ckpt["label"], self.task_scores(base), self.task_scores(ckpt["label"]),
                                    suite, config.margin))  # fmt: skip
        return results

    def document(self, gates: Sequence[GateResult] | None = None, base: str = "base") -> dict[str, Any]:
        """`matrix.json` (docs/evaluation.md), with the gate block when `gates` is given."""
        trained = {d for c in self.checkpoints for d in c["trained_domains"]}
        doc: dict[str, Any] = {
            "version": FORMAT_VERSION,
            "checkpoints": self.checkpoints,
            "sampling": self.config.summary(),
            "domains": [d.to_dict(d.domain_id in trained) for d in self.domains],
            "cells": [c.to_dict() for c in self.cells],
            "aggregates": {"family": self._aggregates("family"), "class": self._aggregates("cls")},
        }
        if base in {c["label"] for c in self.checkpoints}:
            doc["changes"] = {"base": base, "classes": self.changes(base)}
        if gates is not None:
            margin = gates[0].margin if gates else None
            doc["gate"] = {"base": base, "margin": margin, "metric": "reward", "passed": all(g.passed for g in gates),
                           "checkpoints": [g.to_dict() for g in gates]}  # fmt: skip
        return doc

    def changes(self, base: str) -> list[dict[str, Any]]:
        """Every other checkpoint's paired change against `base` per class and metric: the mean over the
        class's domains of each domain's change of the metric's pooled rate on the same tasks, with its
        interval and p-value (`posttrain.eval.stats.paired_ratio_change`)."""
        classes: dict[str, list[str]] = {}
        for d in self.domains:
            classes.setdefault(d.cls, []).append(d.domain_id)
        before = {c.domain_id: c.by_task for c in self.cells if c.checkpoint == base}
        out = []
        for ckpt in (c["label"] for c in self.checkpoints if c["label"] != base):
            after = {c.domain_id: c.by_task for c in self.cells if c.checkpoint == ckpt}
            for cls, ids in classes.items():
                names = dict.fromkeys(m for d in ids for m in before.get(d, {}))
                metrics = {}
                for name in names:
                    change = paired_ratio_change([_aligned(before[d].get(name, {}), after.get(d, {}).get(name, {}))
                                                  for d in ids if d in before])  # fmt: skip
                    if change.n:
                        values = {"delta": change.delta, "ci_low": change.ci_low, "ci_high": change.ci_high,
                                  "p_value": change.p_value}  # fmt: skip
                        metrics[name] = {**{k: v if math.isfinite(v) else None for k, v in values.items()},
                                         "n": change.n}  # fmt: skip
                out.append({"checkpoint": ckpt, "class": cls, "domains": ids, "metrics": metrics})
        return out

    def _aggregates(self, attribute: str) -> list[dict[str, Any]]:
        key = "class" if attribute == "cls" else attribute
        groups: dict[str, list[str]] = {}
        for d in self.domains:
            groups.setdefault(getattr(d, attribute), []).append(d.domain_id)
        out = []
        for ckpt in self.checkpoints:
            cells = {c.domain_id: c for c in self.cells if c.checkpoint == ckpt["label"]}
            for name, ids in groups.items():
                metrics = aggregate([cells[d].ratios for d in ids if d in cells])
                n = sum(len(cells[d].greedy) for d in ids if d in cells)
                out.append({"checkpoint": ckpt["label"], key: name, "domains": ids, "n": n,
                            "metrics": {m: v.to_dict() for m, v in metrics.items()}})  # fmt: skip
        return out


def evaluate_matrix(
    policies: Iterable[Policy], pool: TaskPool, domain_ids: Sequence[str], score_fn: ScoreFn,
    config: MatrixConfig, cache: ResultCache, log: Callable[[str], None] = print,
) -> MatrixResult:
    """Each policy on each domain (module docstring); `policies` is consumed one at a time."""
    domains = [domain_info(pool, d) for d in domain_ids]
    tasks = {d: pool.eval_tasks(d, config.tasks_per_domain) for d in domain_ids}
    result = MatrixResult(config, domains)
    for policy in policies:
        start = time.perf_counter()
        prompt = {"system_prompt": policy.renderer.system_prompt}
        slots = {d.domain_id: _slots(pool, d, tasks[d.domain_id], config, prompt) for d in domains}
        every = [s for d in domains for s in slots[d.domain_id]]
        got = collect(policy, pool, every, score_fn, cache, config.batch_size)
        hits = {d.domain_id: _cell_hits(policy, slots[d.domain_id], got) for d in domains}
        result.checkpoints.append({"label": policy.label, "hash": policy.weights_hash, "path": policy.path,
                                   "trained_domains": [d for d in domain_ids if d in policy.trained_domains]})  # fmt: skip
        for d in domains:
            result.cells.append(_cell(policy.label, d, tasks[d.domain_id], hits[d.domain_id], config))
        infra = sum(c.infra_errors for c in result.cells if c.checkpoint == policy.label)
        log(f"{policy.label}: {len(every)} responses, {got.num_cached} cached, {got.num_computed} computed, "
            f"{infra} infra failures, {time.perf_counter() - start:.1f} s")  # fmt: skip
    return result


def _aligned(old: dict[str, Ratio], new: dict[str, Ratio]) -> tuple[list[Ratio], list[Ratio]]:
    """Two checkpoints' ratios over the union of their task ids, (0, 0) where one lacks a task."""
    tasks = sorted(old.keys() | new.keys())
    return [old.get(t, (0.0, 0.0)) for t in tasks], [new.get(t, (0.0, 0.0)) for t in tasks]


def domain_info(pool: TaskPool, domain_id: str) -> DomainInfo:
    path = TaxonomyPath.parse(domain_id)
    verifier = pool.registry.verifier_config(domain_id).kind
    return DomainInfo(domain_id, path.cls, f"{path.cls}/{path.family}", verifier, pool.registry.is_episodic(domain_id))


def _slots(pool: TaskPool, domain: DomainInfo, tasks: Sequence[Task], config: MatrixConfig,
           prompt: dict[str, Any]) -> list[SampleSlot]:  # fmt: skip
    """Per task: the greedy slot, then its n sampled slots (`prompt`: how prompts are rendered)."""
    grading = pool.registry.verifier_config(domain.domain_id).model_dump_json()
    greedy = config.sampling(GREEDY, domain.episodic)
    sampled = config.sampling(SAMPLED, domain.episodic)
    return [slot for task in tasks for slot in (
        SampleSlot(task, greedy, 0, grading, prompt),
        *(SampleSlot(task, sampled, j, grading, prompt) for j in range(config.samples_per_task)),
    )]  # fmt: skip


_Hits = list[tuple[SampleSlot, SampleRecord, bool]]
"""(slot, record, whether it came from the cache) of one cell."""


def _cell_hits(policy: Policy, slots: Sequence[SampleSlot], got: Collected) -> _Hits:
    keys = [record_key(policy.weights_hash, slot) for slot in slots]
    return [(slot, got.records[key], key not in got.computed) for slot, key in zip(slots, keys, strict=True)]


def _cell(label: str, domain: DomainInfo, tasks: Sequence[Task], hits: _Hits, config: MatrixConfig) -> Cell:
    by_task: dict[str, list[tuple[SampleSlot, SampleRecord]]] = {t.id: [] for t in tasks}
    for slot, record, _ in hits:
        by_task[slot.task.id].append((slot, record))
    greedy: list[tuple[str, SampleRecord]] = []
    sampled: list[tuple[str, list[SampleRecord]]] = []
    for task in tasks:
        rows = by_task[task.id]
        head = [r for s, r in rows if s.sampling["mode"] == GREEDY and not r.score.is_infra_failure]
        greedy.extend((task.id, r) for r in head)
        graded = [r for s, r in rows if s.sampling["mode"] == SAMPLED and not r.score.is_infra_failure]
        if graded:
            sampled.append((task.id, graded))
    ratios = task_ratio_table(domain.verifier, domain.cls, [(t, r.score) for t, r in greedy],
                              [(t, [r.score for r in rs]) for t, rs in sampled], config.k)  # fmt: skip
    counts = tuple((t, sum(r.score.passed for r in rs), len(rs)) for t, rs in sampled)
    infra = [r.score.message for _, r, _ in hits if r.score.is_infra_failure]
    cached = sum(1 for _, _, from_cache in hits if from_cache)
    examples = tuple(dict.fromkeys(infra))[:INFRA_EXAMPLES]
    return Cell(label, domain.domain_id, tuple(greedy), counts, ratios, len(infra), cached, len(hits) - cached,
                examples)  # fmt: skip
