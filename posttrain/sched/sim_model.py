"""The pipeline simulator's scenario: service-time models, pools and batch, and the seeded workload.

What it is: frozen configs for one training pipeline as the simulator (`posttrain.sched.sim`) sees it —
the batch (tasks per step, group size, domains in classes with their share of each batch, prompt and
response lengths, per-item verification time distributions), the three pools (rollout engines,
verification workers, the learner), the weight sync and the mode (sync, or async with
`max_staleness`) — and `Workload`, the per-step draws from them.

Cost models (each a sum of measured or assumed coefficients):
  * one generate call of `n` sequences, response lengths `l_i` after prompts of `p_i`, on an engine
    holding at most `M` sequences: `call_s + decode_steps * decode_step_s + sum(l_i) * token_s
    + sum(l_i * (p_i + l_i / 2)) * kv_token_s + prompt_tokens * prefill_token_s`, where
    `decode_steps = max(max(l_i), ceil(sum(l_i) / M))` (continuous batching: the longest sequence, or the
    tokens over the batch capacity, whichever is larger), the `kv_token_s` term is attention over each
    token's context, and a task's prompt is prefilled once per group;
  * one verification: a draw from its domain's distribution, scaled by the domain's own factor and cut at
    the pool's `timeout_s`;
  * one update: `step_s + token_s * sum(L_r) + attention_s * sum(L_r ** 2)` over the batch's rows of
    length `L_r` = prompt + response (with `micro_batch_size`, padded: a row counts as long as the
    longest row of its micro-batch, rows in domain order).

Guarantees: pure numpy; every draw of step `t` comes from a generator seeded by `(seed, t)`, so a step's
workload is the same whatever the mode, pool sizes or event order (common random numbers make
comparisons between scenarios less noisy). Not here: the event loop, fitting coefficients to
measurements (`posttrain.bench.sim_validate`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Literal

import numpy as np
from pydantic import Field, model_validator

from posttrain.config import StrictModel


class ConstantTime(StrictModel):
    """Every item takes the same time."""

    kind: Literal["constant"] = "constant"
    value_s: float = Field(ge=0)
    """The service time."""

    def draw(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return np.full(size, self.value_s)

    @property
    def mean_s(self) -> float:
        return self.value_s


class LognormalTime(StrictModel):
    """Lognormal service times: a median and a log-space spread (a moderately heavy right tail)."""

    kind: Literal["lognormal"] = "lognormal"
    median_s: float = Field(gt=0)
    """Median service time."""
    sigma: float = Field(ge=0)
    """Standard deviation of the log time (0: constant)."""

    def draw(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return self.median_s * np.exp(self.sigma * rng.standard_normal(size))

    @property
    def mean_s(self) -> float:
        return self.median_s * math.exp(self.sigma**2 / 2)


class ParetoTime(StrictModel):
    """Pareto (type I) service times: at least `scale_s`, P(T > t) = (scale_s / t) ** alpha."""

    kind: Literal["pareto"] = "pareto"
    scale_s: float = Field(gt=0)
    """The smallest service time."""
    alpha: float = Field(gt=0)
    """Tail index: the smaller, the heavier the tail (the mean is infinite for alpha <= 1)."""

    def draw(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return self.scale_s * (1.0 + rng.pareto(self.alpha, size))

    @property
    def mean_s(self) -> float:
        return self.alpha * self.scale_s / (self.alpha - 1) if self.alpha > 1 else math.inf


class EmpiricalTime(StrictModel):
    """Service times resampled from measured ones."""

    kind: Literal["empirical"] = "empirical"
    samples_s: tuple[float, ...] = Field(min_length=1)
    """Measured service times, drawn uniformly with replacement."""

    def draw(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return rng.choice(np.asarray(self.samples_s), size)

    @property
    def mean_s(self) -> float:
        return float(np.mean(self.samples_s))


ServiceTime = Annotated[ConstantTime | LognormalTime | ParetoTime | EmpiricalTime, Field(discriminator="kind")]


class DomainClass(StrictModel):
    """Domains that share lengths and a verification time distribution (e.g. all unit-tested code)."""

    name: str
    """Label in reports."""
    num_domains: int = Field(1, ge=1)
    """Domains in the class; they split the class's share of a batch equally (fair share)."""
    batch_share: float = Field(1.0, gt=0)
    """Relative share of each batch's tasks drawn from the class (normalised over the classes)."""
    prompt_tokens: int = Field(0, ge=0)
    """Median prompt length of a task."""
    prompt_sigma: float = Field(0.0, ge=0)
    """Log-space spread of prompt lengths (0: all `prompt_tokens`)."""
    response_tokens: int = Field(1, ge=1)
    """Median response length."""
    response_sigma: float = Field(0.0, ge=0)
    """Log-space spread of response lengths (0: all `response_tokens`); lengths are clipped to
    [1, max_new_tokens]."""
    verify: ServiceTime
    """Per-item verification time of the class's domains."""
    domain_spread: float = Field(1.0, ge=1)
    """Each domain's verification times are scaled by its own factor, log-uniform in [1/spread, spread]."""


class RolloutPool(StrictModel):
    """The rollout engines: each takes a call's tasks and generates their groups."""

    num_workers: int = Field(1, ge=1)
    """Engines (one per GPU, or per tensor-parallel group of GPUs)."""
    call_s: float = Field(0.0, ge=0)
    """Fixed cost of one generate call (rendering, scheduling, decoding to text)."""
    decode_step_s: float = Field(0.0, ge=0)
    """Fixed cost of one decode step of the whole batch (reading the weights once)."""
    token_s: float = Field(0.0, ge=0)
    """Extra cost per sequence and decode step, i.e. per generated token (its compute)."""
    kv_token_s: float = Field(0.0, ge=0)
    """Cost per generated token and token of its context (attention reading the KV cache)."""
    prefill_token_s: float = Field(0.0, ge=0)
    """Cost per prompt token prefilled (once per task: a group shares its prompt)."""
    max_batch_seqs: int = Field(256, ge=1)
    """Sequences an engine decodes at once."""
    jitter_sigma: float = Field(0.0, ge=0)
    """Log-space spread of a multiplicative noise on each call (0: deterministic)."""
    tasks_per_call: int | None = Field(None, ge=1)
    """Tasks one call takes; None: a step's tasks split evenly over the engines."""
    grades_own_calls: bool = False
    """An engine takes its next call only once its last call's samples are graded (one producer thread
    that generates, then grades, as the local async loop does); False: engines and graders are separate."""


class VerifyPool(StrictModel):
    """The verification (reward / sandbox) workers: each grades one item at a time."""

    num_workers: int = Field(1, ge=1)
    """Workers grading in parallel."""
    timeout_s: float | None = Field(None, gt=0)
    """A verification running longer is cut off at this time (None: no cap)."""
    call_s: float = Field(0.0, ge=0)
    """Fixed cost of handing a batch of items to the pool (one per step in sync mode, one per generate
    call in async mode)."""
    order: Literal["fair_share", "fifo"] = "fair_share"
    """fair_share: oldest step first, its domains in turn; fifo: arrival order."""


class LearnerModel(StrictModel):
    """The learner (one trainer group): one update per step."""

    step_s: float = Field(0.0, ge=0)
    """Fixed cost of one update (optimizer step, batch building, bookkeeping)."""
    token_s: float = Field(0.0, ge=0)
    """Cost per token of the batch (prompt and response, forward and backward)."""
    attention_s: float = Field(0.0, ge=0)
    """Cost per squared row length (attention over every pair of a row's tokens, forward and backward)."""
    micro_batch_size: int | None = Field(None, ge=1)
    """Rows per micro-batch of a learner that pads (rows in domain order; a micro-batch costs its rows x
    its longest row); None: packed sequences, every token counted once."""
    jitter_sigma: float = Field(0.0, ge=0)
    """Log-space spread of a multiplicative noise on each update."""


class PipelineScenario(StrictModel):
    """Everything one simulation needs."""

    name: str = "scenario"
    """Label in reports."""
    seed: int = 0
    """Seed of every draw."""
    steps: int = Field(20, ge=1)
    """Training steps simulated."""
    warmup_steps: int = Field(2, ge=0)
    """Steps left out of the measured window (the pipeline filling up)."""
    tasks_per_step: int = Field(16, ge=1)
    """Tasks per step (each gives `group_size` samples)."""
    group_size: int = Field(8, ge=1)
    """Samples per task."""
    max_new_tokens: int = Field(256, ge=1)
    """Cap on a response's length."""
    domains: tuple[DomainClass, ...] = Field(min_length=1)
    """The domain classes a batch is drawn from."""
    rollout: RolloutPool = Field(default_factory=RolloutPool)
    """Generation."""
    verify: VerifyPool = Field(default_factory=VerifyPool)
    """Verification."""
    learner: LearnerModel = Field(default_factory=LearnerModel)
    """The update."""
    sync_s: float = Field(0.0, ge=0)
    """Weight sync: the learner publishing new weights (and, in async mode, an engine loading them)."""
    mode: Literal["sync", "async"] = "sync"
    """sync: generate, verify, learn, sync, one after another; async: generation runs ahead."""
    max_staleness: int = Field(1, ge=0)
    """async: a call for step t starts only once weights of version >= t - max_staleness exist."""

    @model_validator(mode="after")
    def _window(self) -> PipelineScenario:
        if self.warmup_steps >= self.steps:
            raise ValueError("warmup_steps must be smaller than steps (nothing would be measured)")
        return self

    @property
    def samples_per_step(self) -> int:
        return self.tasks_per_step * self.group_size


def generation_s(pool: RolloutPool, prompt_tokens: np.ndarray, response_tokens: np.ndarray, jitter: float) -> float:
    """One generate call's time: `prompt_tokens` per task, `response_tokens` per sequence (task-major)."""
    num_tokens = float(response_tokens.sum())
    decode_steps = max(float(response_tokens.max(initial=0)), math.ceil(num_tokens / pool.max_batch_seqs))
    group = response_tokens.size // max(prompt_tokens.size, 1)
    context = float((response_tokens * (np.repeat(prompt_tokens, group) + response_tokens / 2)).sum())
    cost = (pool.call_s + decode_steps * pool.decode_step_s + num_tokens * pool.token_s
            + context * pool.kv_token_s + float(prompt_tokens.sum()) * pool.prefill_token_s)  # fmt: skip
    return cost * jitter


def learn_s(learner: LearnerModel, rows: np.ndarray, jitter: float) -> float:
    """One update's time over rows of these lengths (`StepWork.learn_rows`)."""
    tokens, pairs = float(rows.sum()), float((rows.astype(float) ** 2).sum())
    return (learner.step_s + learner.token_s * tokens + learner.attention_s * pairs) * jitter


@dataclass(frozen=True)
class StepWork:
    """One step's drawn workload. Items are task-major: task i's samples are items i*G .. i*G+G-1."""

    task_domain: np.ndarray
    """[B] domain index of each task."""
    item_domain: np.ndarray
    """[B*G] domain index of each item."""
    item_class: np.ndarray
    """[B*G] class index of each item."""
    prompt_tokens: np.ndarray
    """[B] prompt length of each task."""
    response_tokens: np.ndarray
    """[B*G] response length of each item."""
    verify_s: np.ndarray
    """[B*G] verification time of each item (scaled and cut at the timeout)."""
    rollout_jitter: np.ndarray
    """[B] multiplicative noise of a call that starts at this task (one draw per possible call)."""
    learn_jitter: float
    """Multiplicative noise of this step's update."""

    def learn_rows(self, micro_batch_size: int | None) -> np.ndarray:
        """Each row's length as the update processes it: prompt + response, or, with micro-batches (rows
        in domain order), the longest row of its micro-batch."""
        group = len(self.item_domain) // max(len(self.task_domain), 1)
        lengths = np.repeat(self.prompt_tokens, group) + self.response_tokens
        if micro_batch_size is None or not lengths.size:
            return lengths
        ordered = lengths[np.argsort(self.item_domain, kind="stable")]
        starts = np.arange(0, ordered.size, micro_batch_size)
        rows = np.minimum(starts + micro_batch_size, ordered.size) - starts
        return np.repeat(np.maximum.reduceat(ordered, starts), rows)


class Workload:
    """The domains' fixed parameters and each step's draws (seeded by `(seed, step)`)."""

    def __init__(self, scenario: PipelineScenario) -> None:
        self.scenario = scenario
        classes = scenario.domains
        self.domain_class = np.repeat(np.arange(len(classes)), [c.num_domains for c in classes])
        shares = np.asarray([c.batch_share for c in classes])
        per_domain = (shares / shares.sum()) / np.asarray([c.num_domains for c in classes])
        self.domain_probs = per_domain[self.domain_class]
        rng = np.random.default_rng([scenario.seed, 1 << 30])
        spread = np.log(np.asarray([c.domain_spread for c in classes]))[self.domain_class]
        self.domain_factor = np.exp(rng.uniform(-spread, spread))
        self._cache: dict[int, StepWork] = {}

    def step(self, step: int) -> StepWork:
        if step not in self._cache:
            self._cache[step] = self._draw(step)
        return self._cache[step]

    def _draw(self, step: int) -> StepWork:
        sc = self.scenario
        rng = np.random.default_rng([sc.seed, step])
        size, group = sc.tasks_per_step, sc.group_size
        task_domain = rng.choice(len(self.domain_probs), size=size, p=self.domain_probs)
        item_domain = np.repeat(task_domain, group)
        item_class = self.domain_class[item_domain]
        prompt = np.asarray([sc.domains[c].prompt_tokens for c in self.domain_class[task_domain]], dtype=float)
        median = np.asarray([c.response_tokens for c in sc.domains], dtype=float)[item_class]
        sigma = np.asarray([c.response_sigma for c in sc.domains])[item_class]
        response = np.clip(np.round(median * np.exp(sigma * rng.standard_normal(item_class.size))), 1,
                           sc.max_new_tokens)  # fmt: skip
        verify = np.empty(item_class.size)
        for index, cls in enumerate(sc.domains):
            mask = item_class == index
            verify[mask] = cls.verify.draw(rng, int(mask.sum()))
        verify *= self.domain_factor[item_domain]
        if sc.verify.timeout_s is not None:
            verify = np.minimum(verify, sc.verify.timeout_s)
        rollout_jitter = np.exp(sc.rollout.jitter_sigma * rng.standard_normal(size))
        learn_jitter = float(np.exp(sc.learner.jitter_sigma * rng.standard_normal()))
        prompt_sigma = np.asarray([c.prompt_sigma for c in sc.domains])[self.domain_class[task_domain]]
        prompt = np.round(prompt * np.exp(prompt_sigma * rng.standard_normal(size)))
        return StepWork(task_domain, item_domain, item_class, prompt, response, verify, rollout_jitter, learn_jitter)
