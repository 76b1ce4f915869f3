"""`RayLearnerGroup`: the learner as a group of Ray actors with `PolicyTrainer`'s surface.

`dist.learner_workers: N` (with `backend: ray`) puts the policy update in N `LearnerWorker` actors
instead of the driver process. Each rank builds the run's model and a `PolicyTrainer` in its own process
(the same weights: the same files and seeds); with N > 1 the ranks first join one torch.distributed
process group (rank 0's host and a free port; gloo, or NCCL when the ranks have GPUs) and the trainer
splits every optimizer step's micro-batches over them and sums their gradients
(`posttrain.train.data_parallel`). The driver keeps the loop: `step(batch)` sends the batch to every
rank once (one object in Ray's store) and returns rank 0's metrics (every merged metric is the same on
each rank); `policy_state()` is rank 0's weights as CPU tensors, which weight sync then sends to the
rollout workers; `state_dict()` / `load_state_dict()` checkpoint and resume through rank 0 / every rank.

Guarantees: a group of one computes what the driver's trainer computes, bit for bit (same code, same
inputs, another process); with N ranks the weights are identical on every rank after each step and
differ from one process only by float summation order. A rank that dies fails the step (`ray.get`
raises): a learner cannot be replaced mid-step without its optimizer state, so the run stops and
resumes from its last checkpoint (`posttrain train --resume`). Ray is imported inside the methods.
Not here: what a rank computes (`PolicyTrainer`), the rollout and reward pools (`engine_pool`,
`grader_pool`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from posttrain.dist.actors import LearnerWorker
from posttrain.dist.workers import WorkerOptions


class RayLearnerGroup:
    """N learner ranks on Ray; `step`, `policy_state`, `state_dict`, `load_state_dict`, `close`."""

    causal_lm = None
    """No module in this process: engines get the weights through `policy_state()`."""

    def __init__(self, factory: Callable[[int, int], Any], num_workers: int, options: WorkerOptions,
                 startup_timeout_s: float) -> None:  # fmt: skip
        import ray

        actor: Any = ray.remote(LearnerWorker).options(**options.ray_options())
        self.workers: list[Any] = [actor.remote(factory, rank, num_workers) for rank in range(num_workers)]
        try:
            address = ray.get(self.workers[0].address.remote(), timeout=startup_timeout_s)
            backend = "nccl" if options.num_gpus else "gloo"
            self.pids = ray.get([w.join.remote(address, backend) for w in self.workers], timeout=startup_timeout_s)
        except BaseException:
            self.close()
            raise

    @property
    def num_workers(self) -> int:
        return len(self.workers)

    def step(self, batch: Any) -> dict[str, float]:
        import ray

        shared = ray.put(batch)
        return dict(ray.get([w.step.remote(shared) for w in self.workers])[0])

    def policy_state(self) -> dict[str, Any]:
        import ray

        return dict(ray.get(self.workers[0].policy_state.remote()))

    def state_dict(self) -> dict[str, Any]:
        import ray

        return dict(ray.get(self.workers[0].state_dict.remote()))

    def load_state_dict(self, state: dict[str, Any]) -> None:
        import ray

        shared = ray.put(state)
        ray.get([w.load_state_dict.remote(shared) for w in self.workers])

    def close(self) -> None:
        import ray

        try:
            ray.get([w.close.remote() for w in self.workers], timeout=30)
        except Exception:  # noqa: BLE001, S110 - a dead rank: killing it below is all that is left
            pass
        for worker in self.workers:
            ray.kill(worker)
        self.workers = []
