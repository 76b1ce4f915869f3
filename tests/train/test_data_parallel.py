"""A data-parallel PolicyTrainer (two gloo ranks, two processes) takes the optimizer step of one process.

float64 as in the micro-batch invariance tests of test_policy.py: the ranks sum the same per-micro-batch
gradients as one process, in another order, and AdamW would turn float32 rounding of near-zero
gradients into steps of order lr.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from posttrain.algo import LossConfig
from posttrain.train.models import tiny_random
from posttrain.train.policy import PolicyConfig, PolicyTrainer, TrainBatch

PROMPTS = [[2, 3, 4], [5, 6], [7], [8, 9, 10, 11], [12, 13], [14], [15, 16], [17]]
RESPONSES = [[20, 21], [22, 23, 24], [25], [26, 27, 28, 29], [], [30, 31], [32], [33, 34]]
CONFIG = PolicyConfig(lr=1e-2, micro_batch_size=2, mini_batches=2, epochs=2, track_kl_to_base=True,
                      loss=LossConfig(kl_beta=0.1, entropy_coef=0.01))  # fmt: skip
"""Two mini-batches of 4 rows, each 2 micro-batches of 2: one per rank; KL to a reference and entropy
so that every merged metric is exercised."""


def batch() -> TrainBatch:
    return TrainBatch(
        prompt_ids=[list(p) for p in PROMPTS],
        response_ids=[list(r) for r in RESPONSES],
        advantages=[1.0, -1.0, 0.5, 2.0, 1.0, -0.5, 0.3, -1.5],
        domain_ids=["a", "b", "a", "b", "a", "b", "c", "a"],
    )


def one_step(state: dict[str, Any], parallel: Any = None) -> tuple[dict[str, float], list[torch.Tensor]]:
    model = tiny_random().double()
    model.load_state_dict(state)
    trainer = PolicyTrainer(model, CONFIG, parallel=parallel)
    metrics = trainer.step(batch())
    return metrics, [p.detach().clone() for p in trainer.model.parameters()]


def rank_main(rank: int, folder: str) -> None:
    import torch.distributed as dist

    from posttrain.train.data_parallel import DataParallel

    dist.init_process_group("gloo", init_method=f"file://{folder}/store", rank=rank, world_size=2)
    try:
        state = torch.load(f"{folder}/model.pt")
        metrics, params = one_step(state, DataParallel(rank, 2))
        torch.save({"metrics": metrics, "params": params}, f"{folder}/rank{rank}.pt")
    finally:
        dist.destroy_process_group()


def test_two_ranks_take_the_step_of_one_process(tmp_path: Path) -> None:
    import torch.multiprocessing as mp

    state = tiny_random().double().state_dict()
    torch.save(state, tmp_path / "model.pt")
    mp.spawn(rank_main, args=(str(tmp_path),), nprocs=2, join=True)
    single_metrics, single_params = one_step(state)
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in range(2)]
    for a, b in zip(ranks[0]["params"], ranks[1]["params"], strict=True):
        assert torch.equal(a, b)  # the ranks hold one model
    for param, single in zip(ranks[0]["params"], single_params, strict=True):
        torch.testing.assert_close(param, single, atol=1e-9, rtol=1e-9)
    metrics = ranks[0]["metrics"]
    assert set(metrics) == set(single_metrics)
    for key, value in single_metrics.items():
        if not key.startswith("time/"):
            assert metrics[key] == pytest.approx(value, rel=1e-7, abs=1e-10), key


def test_micro_batches_are_dealt_round_robin() -> None:
    from posttrain.train.data_parallel import DataParallel

    assert DataParallel(0, 1).share([[0, 1], [2]]) == [[0, 1], [2]]
    assert DataParallel(1, 3).share(list(range(7))) == [1, 4]
