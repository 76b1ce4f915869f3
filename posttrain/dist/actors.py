"""What runs inside a Ray worker: a rollout engine, a grader or a learner rank, built in the worker from a factory.

Plain classes (Ray wraps them in `posttrain.dist.workers`, so this module imports no Ray and no torch).
Each builds its object once, in the worker's process, from a picklable zero-argument factory the caller
gives (e.g. `functools.partial(rollout_engine, config)`): the model, the verifiers and their sandboxes
therefore live on the worker's host. `EngineWorker` remembers the weight version it holds and returns it
with every batch of outputs, so the caller knows which policy produced them.
`LearnerWorker` is one rank of the learner group: its factory takes (rank, world size) and returns a
`PolicyTrainer` for that rank; the rank joins the group's torch.distributed process group before
building it.
Not here: choosing a worker, replacing dead ones, retries (`posttrain.dist.workers`, `dispatch`); the
learner group's driver side (`posttrain.dist.learner_group`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from posttrain.rollout.api import GenerationRequest, RequestOutput, RolloutEngine
from posttrain.types import Score, Task
from posttrain.verify import Grader


class EngineWorker:
    """A rollout engine of its own; `generate` answers with (weight version held, outputs)."""

    def __init__(self, factory: Callable[[], RolloutEngine]) -> None:
        self.engine = factory()
        self.version: int | None = None

    def generate(self, requests: Sequence[GenerationRequest]) -> tuple[int | None, list[RequestOutput]]:
        return self.version, self.engine.generate(requests)

    def update_weights(self, state_dict: Mapping[str, Any], version: int) -> int:
        self.engine.update_weights(state_dict, version)
        self.version = version
        return version

    def stats(self) -> dict[str, float]:
        return self.engine.stats()

    def pid(self) -> int:
        return os.getpid()

    def close(self) -> None:
        close = getattr(self.engine, "close", None)
        if close is not None:
            close()


class GraderWorker:
    """A `Grader` of its own (its verifier processes and sandboxes run on this worker's host)."""

    def __init__(self, factory: Callable[[], Grader]) -> None:
        self.grader = factory()

    def grade(self, pairs: Sequence[tuple[Task, str]]) -> list[Score]:
        return self.grader.grade(pairs)

    def grade_turns(self, items: Sequence[tuple[Task, Sequence[str]]]) -> list[Score]:
        return self.grader.grade_turns(items)

    def pid(self) -> int:
        return os.getpid()

    def close(self) -> None:
        self.grader.close()


class LearnerWorker:
    """One rank of the learner group: a `PolicyTrainer` over its own copy of the model."""

    def __init__(self, factory: Callable[[int, int], Any], rank: int, world_size: int) -> None:
        self.factory, self.rank, self.world_size = factory, rank, world_size
        self.trainer: Any = None

    def address(self) -> str:
        """`host:port` where rank 0 listens for the other ranks (a free port of this host)."""
        import socket

        with socket.socket() as probe:
            probe.bind(("", 0))
            port = probe.getsockname()[1]
        import ray

        return f"{ray.util.get_node_ip_address()}:{port}"

    def join(self, address: str, backend: str) -> int:
        """Join the process group at `address` (rank 0's), then build the trainer; returns the pid."""
        if self.world_size > 1:
            import torch.distributed as dist

            dist.init_process_group(backend, init_method=f"tcp://{address}", rank=self.rank,
                                    world_size=self.world_size)  # fmt: skip
        self.trainer = self.factory(self.rank, self.world_size)
        return os.getpid()

    def step(self, batch: Any) -> dict[str, float]:
        return dict(self.trainer.step(batch))

    def policy_state(self) -> dict[str, Any]:
        return {name: tensor.detach().to("cpu", copy=True) for name, tensor in self.trainer.policy_state().items()}

    def state_dict(self) -> dict[str, Any]:
        return dict(self.trainer.state_dict())

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.trainer.load_state_dict(state)

    def close(self) -> None:
        if self.world_size > 1:
            import torch.distributed as dist

            if dist.is_initialized():
                dist.destroy_process_group()
