"""Checkpoint directories and exact resume of PolicyTrainer on CPU."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
import torch

from posttrain.train.checkpoint import (
    checkpoint_path,
    latest_checkpoint,
    list_checkpoints,
    load_checkpoint,
    save_checkpoint,
)
from posttrain.train.models import TinyModelConfig, tiny_random
from posttrain.train.policy import LoraConfig, PolicyConfig, PolicyTrainer, TrainBatch

TINY = TinyModelConfig(num_layers=2, hidden_size=32, vocab_size=64)


def _random_batch() -> TrainBatch:
    """A batch drawn from the global torch RNG, so resuming without its state would change it."""
    prompts = [torch.randint(2, 64, (int(n),)).tolist() for n in torch.randint(1, 5, (4,))]
    responses = [torch.randint(2, 64, (int(n),)).tolist() for n in torch.randint(1, 6, (4,))]
    return TrainBatch(prompts, responses, torch.randn(4).tolist(), ["a", "b", "a", "b"])


def _config(lora: bool) -> PolicyConfig:
    # a cosine schedule with warmup and two epochs, so schedule and optimizer state both matter
    return PolicyConfig(
        lr=1e-2, epochs=2, micro_batch_size=3, warmup_steps=2, lr_schedule="cosine", decay_steps=6,
        lora=LoraConfig(r=4) if lora else None,
    )  # fmt: skip


def _run(trainer: PolicyTrainer, num_steps: int) -> list[float]:
    return [trainer.step(_random_batch())["loss"] for _ in range(num_steps)]


@pytest.mark.parametrize("lora", [False, True])
def test_resume_reproduces_uninterrupted_losses(tmp_path: Path, lora: bool) -> None:
    torch.manual_seed(0)
    uninterrupted = _run(PolicyTrainer(tiny_random(TINY), _config(lora)), 4)

    torch.manual_seed(0)
    first = PolicyTrainer(tiny_random(TINY), _config(lora))
    head = _run(first, 2)
    save_checkpoint(tmp_path, first.state_dict(), extra={"mixture": {"weights": [0.25, 0.75]}})
    torch.manual_seed(12345)  # a fresh process would not share the RNG state
    resumed = PolicyTrainer(tiny_random(TINY), _config(lora))
    found = latest_checkpoint(tmp_path)
    assert found is not None
    checkpoint = load_checkpoint(found)
    resumed.load_state_dict(checkpoint.state)
    tail = _run(resumed, 2)

    assert checkpoint.step == 2 and resumed.step_count == 4
    assert checkpoint.extra == {"mixture": {"weights": [0.25, 0.75]}}
    assert head + tail == uninterrupted


def test_resume_without_rng_state_diverges(tmp_path: Path) -> None:
    # the control for the test above: dropping the RNG states changes the later batches
    torch.manual_seed(0)
    uninterrupted = _run(PolicyTrainer(tiny_random(TINY), _config(False)), 3)
    torch.manual_seed(0)
    first = PolicyTrainer(tiny_random(TINY), _config(False))
    head = _run(first, 2)
    state = first.state_dict()
    torch.manual_seed(12345)
    resumed = PolicyTrainer(tiny_random(TINY), _config(False))
    resumed.load_state_dict({**state, "rng": {**state["rng"], "torch": torch.get_rng_state()}})
    assert head + _run(resumed, 1) != uninterrupted


def test_latest_ignores_unfinished_and_picks_highest_step(tmp_path: Path) -> None:
    state = {"model": {"w": torch.ones(2)}, "step": 0}
    for step in (3, 10, 7):
        save_checkpoint(tmp_path, {**state, "step": step})
    (tmp_path / "checkpoints" / ".tmp-step_00000099-dead").mkdir()  # a crash mid-write
    (tmp_path / "checkpoints" / "step_00000050").mkdir()  # no meta.json: incomplete
    assert latest_checkpoint(tmp_path) == checkpoint_path(tmp_path, 10)


def test_no_checkpoint_gives_none(tmp_path: Path) -> None:
    assert latest_checkpoint(tmp_path) is None


def test_keep_last_prunes_oldest(tmp_path: Path) -> None:
    for step in range(1, 6):
        save_checkpoint(tmp_path, {"model": {"w": torch.zeros(1)}, "step": step}, keep_last=2)
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step_00000004", "step_00000005"]


def test_resaving_a_step_replaces_it(tmp_path: Path) -> None:
    save_checkpoint(tmp_path, {"model": {"w": torch.zeros(1)}, "step": 1})
    save_checkpoint(tmp_path, {"model": {"w": torch.ones(1)}, "step": 1})
    assert torch.equal(load_checkpoint(checkpoint_path(tmp_path, 1)).state["model"]["w"], torch.ones(1))
    assert len(list((tmp_path / "checkpoints").iterdir())) == 1


def test_tied_weights_are_saved(tmp_path: Path) -> None:
    # a tied embedding and output head share memory, which safetensors refuses unless split
    model = tiny_random(TINY)
    path = save_checkpoint(tmp_path, {"model": model.state_dict(), "step": 1})
    loaded = load_checkpoint(path).state["model"]
    assert torch.equal(loaded["lm_head.weight"], model.lm_head.weight.detach())


def test_failed_write_leaves_nothing(tmp_path: Path) -> None:
    # the weights are written first; the unpicklable extra then fails the save half way
    with pytest.raises((pickle.PicklingError, AttributeError)):
        save_checkpoint(tmp_path, {"model": {"w": torch.zeros(1)}, "step": 1}, extra={"f": lambda: 0})
    assert list((tmp_path / "checkpoints").iterdir()) == []
