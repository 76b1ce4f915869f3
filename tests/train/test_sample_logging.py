"""Samples logged by a run: `Outputs.log_samples` appends a step's draw, the option switches it off, and a
training run leaves `samples.jsonl` next to its metrics."""

from __future__ import annotations

from pathlib import Path

import pytest

from posttrain.eval.sample_log import read_samples
from posttrain.train.config import TrainConfig
from posttrain.train.outputs import Outputs
from posttrain.types import Group, Score, Task, Trajectory
from posttrain.verify.configs import NumericConfig


def _group(index: int) -> Group:
    task = Task(id=f"math/x/y#{index}", domain_id="math/x/y", prompt=f"prompt {index}", gold="1")
    trajectories = tuple(Trajectory.single_turn(task, [1], [2, 3], [-0.1, -0.1], f"r{index}.{i}", group_index=i)
                         for i in range(2))  # fmt: skip
    return Group(task=task, trajectories=trajectories, scores=(Score.correct(), Score.wrong()))


def _kind(_domain_id: str) -> NumericConfig:
    return NumericConfig()


def test_outputs_append_a_step_of_samples_and_can_be_switched_off(tmp_path: Path) -> None:
    groups = [_group(i) for i in range(5)]
    outputs = Outputs(tmp_path / "on", TrainConfig(), ["math/x/y"])
    outputs.log_samples(0, groups, _kind)
    outputs.log_samples(1, groups, _kind)
    outputs.close()
    logged = read_samples(tmp_path / "on" / "samples.jsonl")
    assert [s.step for s in logged] == [0] * 4 + [1] * 4  # default: 4 per domain and step
    off = TrainConfig.model_validate({"log_samples": {"per_domain_per_step": 0}})
    outputs = Outputs(tmp_path / "off", off, ["math/x/y"])
    outputs.log_samples(0, groups, _kind)
    outputs.close()
    assert not (tmp_path / "off" / "samples.jsonl").exists()


@pytest.mark.slow
def test_a_training_run_logs_samples_per_domain_and_step(tmp_path: Path) -> None:
    from posttrain.train.base_model import train_tokenizer
    from posttrain.train.loop import train
    from posttrain.train.models import TinyModelConfig, tiny_random
    from tests.train.test_loop import make_config

    texts = [f"Q: What is {a} + {b}?\nA: {a + b}" for a in range(30) for b in range(10)]
    tokenizer = train_tokenizer(texts, vocab_size=300)
    model = tiny_random(TinyModelConfig(vocab_size=len(tokenizer), hidden_size=32, num_layers=2))
    model.config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    train(make_config(tmp_path / "model", steps=2), tmp_path / "run", log=lambda _: None)
    logged = read_samples(tmp_path / "run" / "samples.jsonl")
    assert [s.step for s in logged] == [0] * 4 + [1] * 4
    assert {s.domain_id for s in logged} == {"math/arithmetic/add@easy"} and {s.verifier for s in logged} == {"plugin"}
    assert all(s.num_tokens >= 1 and s.prompt.startswith("What is") for s in logged)
