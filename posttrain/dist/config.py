"""Where the stages run and how they overlap: the `dist:` section of a training config.

Plain pydantic; importing it loads neither Ray nor torch. `backend: local` (the default) runs every
stage in this process; `backend: ray` runs rollout and reward workers as Ray actor pools.
`mode: sync` (the default) is exact: each step's samples come from the weights of the step before.
`mode: async` makes the next step's samples while the learner updates (docs/async.md); samples more
than `max_staleness` policy versions behind the learner are dropped or down-weighted (`stale`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from posttrain.config import StrictModel


class AutoscaleConfig(StrictModel):
    """Pool sizes decided from queue depth and service times (`posttrain.sched.scaling`)."""

    enabled: bool = False
    """Resize pools while running; off: pools keep their configured sizes."""
    min_workers: int = Field(1, ge=1)
    """Smallest size of any pool."""
    max_workers: int = Field(8, ge=1)
    """Largest size of any pool."""
    target_wait_s: float = Field(1.0, gt=0)
    """Queueing delay a pool aims for: more workers when the backlog would take longer than this."""
    cooldown_s: float = Field(5.0, ge=0)
    """Minimum time between two resizes of one pool."""


class DistConfig(StrictModel):
    """Placement, pool sizes and the synchronous / asynchronous mode of the pipeline."""

    backend: Literal["local", "ray"] = "local"
    """local: this process (thread pools); ray: Ray actor pools per stage."""
    address: str | None = None
    """Ray cluster address (`ray://host:10001` or `auto`); None starts a local cluster."""
    num_cpus: int | None = Field(None, ge=1)
    """CPUs of a local Ray cluster started by the run (None: Ray's own count)."""
    rollout_workers: int = Field(1, ge=1)
    """Rollout workers, each with its own engine."""
    reward_workers: int = Field(1, ge=1)
    """Reward workers, each grading with the domains' verifiers (sandboxes on its own host)."""
    learner_workers: int = Field(0, ge=0)
    """0: the learner runs in the driver process; N >= 1 (`backend: ray`): a learner group of N Ray
    actors, data parallel over torch.distributed (gloo on CPU, NCCL with GPUs)."""
    learner_worker_gpus: float = Field(0.0, ge=0)
    """GPUs Ray gives each learner worker."""
    mode: Literal["sync", "async"] = "sync"
    """sync: generate, then learn (exact); async: generation of the next step overlaps learning."""
    max_staleness: int = Field(1, ge=0)
    """async: samples whose policy version is older than the learner's by more than this are handled
    by `stale`."""
    stale: Literal["drop", "downweight"] = "drop"
    """What happens to samples beyond `max_staleness`: dropped, or kept with weight 1/(1 + excess)."""
    autoscale: AutoscaleConfig = Field(default_factory=AutoscaleConfig)
    """Pool resizing from queue depth and service times."""
    worker_cpus: float | None = Field(None, ge=0)
    """CPUs Ray holds for each rollout and reward worker; None: Ray's actor default (none held while
    running, so any number of workers fits one node)."""
    rollout_worker_gpus: float = Field(0.0, ge=0)
    """GPUs Ray gives each rollout worker (fractions share one device)."""
    reward_chunk_size: int = Field(64, ge=1)
    """Most (task, response) items of one domain sent to a reward worker in one call."""
    reward_timeout_s: float = Field(600.0, gt=0)
    """Longest one reward call may run, a new worker's start-up included: past it the worker is replaced
    and the call's items are infra failures (re-graded by the reward stage)."""
    startup_timeout_s: float = Field(600.0, gt=0)
    """Longest the pools may take to start their workers (Ray waits forever for resources it lacks)."""
    max_attempts: int = Field(3, ge=1)
    """Attempts of one call when its worker dies (each time on a fresh worker)."""

    @model_validator(mode="after")
    def _learner_group_needs_ray(self) -> DistConfig:
        if self.learner_workers and self.backend != "ray":
            raise ValueError("dist.learner_workers needs dist.backend: ray")
        return self
