"""The quickstart preset on Ray pools gives the losses of the same run in one process.

The preset is cut down (3 steps of 4 tasks, 4 eval tasks per domain), its model is a tiny random one
(built here in seconds, so nothing waits for the embedded base model's build) and its verifiers reward a
leading digit, so that a random model's groups carry signal and every step's loss depends on what was
sampled and how it was graded. Same seed, same code path: only where the engine and grader run changes.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import pytest

from posttrain.config import read_yaml
from posttrain.tasks.pool import TaskPool
from posttrain.tasks.registry import DomainsConfig
from posttrain.train.config import TrainConfig
from posttrain.train.loop import train

pytestmark = pytest.mark.ray
QUICKSTART = Path(__file__).resolve().parents[2] / "configs" / "quickstart.yaml"
DIGIT = {"kind": "plugin", "plugin": "tests.fakes.families:make_starts_with_digit"}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Qwen2 with a BPE tokenizer fitted on the quickstart domains' prompts."""
    from posttrain.train.base_model import train_tokenizer
    from posttrain.train.models import TinyModelConfig, tiny_random

    pool = TaskPool.from_config(DomainsConfig.model_validate(read_yaml(QUICKSTART)["domains"]))
    rng = random.Random(0)
    texts = [f"Q: {t.prompt}\nA: {t.answer}" for d in pool.registry.ids() for t in pool.sample(d, 20, "train", rng)]
    tokenizer = train_tokenizer(texts, vocab_size=300)
    model = tiny_random(TinyModelConfig(vocab_size=len(tokenizer), hidden_size=32, num_layers=2))
    model.config.eos_token_id = tokenizer.eos_token_id
    path = tmp_path_factory.mktemp("tiny")
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def quickstart(model_dir: Path, **dist: Any) -> TrainConfig:
    raw = read_yaml(QUICKSTART)
    for entry in raw["domains"]["domains"]:
        entry["verifier"] = DIGIT
    raw.update(steps=3, tasks_per_step=4, model={"path": str(model_dir)}, dist=dist,
               eval={"tasks_per_domain": 4, "max_new_tokens": 12})  # fmt: skip
    return TrainConfig.model_validate(raw)


def metrics(run_dir: Path) -> list[dict[str, float]]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def run(config: TrainConfig, run_dir: Path) -> tuple[list[dict[str, float]], dict[str, Any]]:
    summary = train(config, run_dir, log=lambda _: None)
    return metrics(run_dir), summary


def test_ray_pools_give_the_losses_of_one_process(ray_cluster: None, model_dir: Path, tmp_path: Path) -> None:
    local, local_summary = run(quickstart(model_dir), tmp_path / "local")
    assert len(local) == 3 and any(row["loss"] != 0.0 for row in local)  # a loss worth comparing
    one, one_summary = run(quickstart(model_dir, backend="ray", rollout_workers=1, reward_workers=2), tmp_path / "one")
    assert [row["loss"] for row in one] == [row["loss"] for row in local]  # bit for bit
    assert [row["reward"] for row in one] == [row["reward"] for row in local]
    assert one_summary["domains"] == local_summary["domains"]  # base and final evaluations too
    # Two rollout workers each batch half the requests: the same tokens are sampled, but the native
    # engine's sums round differently for another batch shape, so logprobs (hence losses) may differ in
    # the last bits (observed: up to 6e-9 on losses of about 1e-5 to 1e-2).
    two, _ = run(quickstart(model_dir, backend="ray", rollout_workers=2, reward_workers=2), tmp_path / "two")
    assert [row["reward"] for row in two] == [row["reward"] for row in local]
    assert max(abs(a["loss"] - b["loss"]) for a, b in zip(two, local, strict=True)) < 1e-6


def test_a_learner_group_gives_the_losses_of_the_driver(ray_cluster: None, model_dir: Path, tmp_path: Path) -> None:
    """One learner rank on Ray computes what the driver's trainer computes, bit for bit; two ranks sum
    the same micro-batch gradients in another order (float32: differences in the last bits)."""
    local, _ = run(quickstart(model_dir), tmp_path / "local")
    pooled, _ = run(quickstart(model_dir, backend="ray"), tmp_path / "pooled")
    one, one_summary = run(quickstart(model_dir, backend="ray", learner_workers=1), tmp_path / "one")
    assert [row["loss"] for row in one] == [row["loss"] for row in pooled] == [row["loss"] for row in local]
    assert [row["grad_norm"] for row in one] == [row["grad_norm"] for row in local]
    two, _ = run(quickstart(model_dir, backend="ray", learner_workers=2), tmp_path / "two")
    assert [row["reward"] for row in two] == [row["reward"] for row in local]
    assert max(abs(a["loss"] - b["loss"]) for a, b in zip(two, local, strict=True)) < 1e-6
    assert max(abs(a["grad_norm"] - b["grad_norm"]) for a, b in zip(two, local, strict=True)) < 1e-5


def test_the_backend_decides_where_engine_and_grader_live(ray_cluster: None, model_dir: Path) -> None:
    from posttrain.dist.engine_pool import RayEnginePool
    from posttrain.dist.grader_pool import RayGraderPool
    from posttrain.rollout.engine.engine import NativeEngine
    from posttrain.train.components import Components
    from posttrain.verify import Grader

    local = Components.build(quickstart(model_dir), lambda _: None)
    local.close()
    assert isinstance(local.engine, NativeEngine) and isinstance(local.grader, Grader)
    pooled = Components.build(quickstart(model_dir, backend="ray", rollout_workers=2, reward_workers=1), lambda _: None)
    try:
        assert isinstance(pooled.engine, RayEnginePool) and isinstance(pooled.grader, RayGraderPool)
        assert pooled.engine.workers.num_live == 2 and pooled.grader.workers.num_live == 1
        assert pooled.engine.version == 0  # the driver's weights were sent before anything ran
    finally:
        pooled.close()
    from posttrain.dist.learner_group import RayLearnerGroup
    from posttrain.train.components import build_learner

    config = quickstart(model_dir, backend="ray", learner_workers=2)
    group = build_learner(None, config)  # the ranks build their own models
    try:
        assert isinstance(group, RayLearnerGroup) and group.num_workers == 2
        assert len(set(group.pids) | {os.getpid()}) == 3  # two processes, neither of them this one
        assert set(group.policy_state()) == set(local.model.state_dict())
    finally:
        group.close()
    import ray

    assert ray.is_initialized()  # the fixture's cluster: a run that did not start Ray leaves it running
