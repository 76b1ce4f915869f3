"""Each step's wall time in metrics.jsonl, split into its stages (what the pipeline simulator is fitted to)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from posttrain.tasks.families.arithmetic import ArithmeticConfig
from posttrain.tasks.registry import DomainEntry, DomainsConfig
from posttrain.train.config import TrainConfig
from posttrain.train.loop import train
from posttrain.train.outputs import _step_times

STAGES = ("time/generate_s", "time/verify_s", "time/learn_s", "time/other_s")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from posttrain.train.base_model import train_tokenizer
    from posttrain.train.models import TinyModelConfig, tiny_random

    texts = [f"Q: What is {a} + {b}?\nA: {a + b}" for a in range(30) for b in range(10)]
    tokenizer = train_tokenizer(texts, vocab_size=300)
    model = tiny_random(TinyModelConfig(vocab_size=len(tokenizer), hidden_size=32, num_layers=2))
    path = tmp_path_factory.mktemp("tiny")
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def test_each_step_row_splits_its_wall_time_into_stages(model_dir: Path, tmp_path: Path) -> None:
    domains = DomainsConfig(domains=[DomainEntry(family=ArithmeticConfig(ops=["add"], levels=["easy"]))])
    config = TrainConfig.model_validate({
        "steps": 3, "tasks_per_step": 4, "threads": 1, "model": {"path": str(model_dir)},
        "domains": domains.model_dump(), "mixture": {"kind": "uniform"},
        "rollout": {"group_size": 4, "max_new_tokens": 3}, "reward": {"workers": 0},
        # Refills make a step generate and grade more than once: the step's times include them.
        "filter": {"enabled": True, "max_extra_fraction": 1.0, "max_draw_calls": 2},
        "eval": {"tasks_per_domain": 2, "max_new_tokens": 3},
    })  # fmt: skip
    train(config, tmp_path, log=lambda _: None)
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 3
    for row in rows:
        assert all(row[key] >= 0 for key in STAGES)
        assert row["time/generate_s"] > 0 and row["time/learn_s"] > 0
        assert sum(row[key] for key in STAGES) == pytest.approx(row["time/step_s"])
    # The per-step times add up to the run's training time (evaluations are outside it).
    assert sum(row["time/step_s"] for row in rows) == pytest.approx(rows[-1]["train_s"], abs=0.01)


def test_other_time_only_when_every_stage_timed_itself() -> None:
    assert _step_times(2.0, {"time/generate_s": 1.0}) == {"time/step_s": 2.0}
    times = {"time/generate_s": 0.5, "time/verify_s": 0.25, "time/learn_s": 1.0}
    assert _step_times(2.0, times) == {"time/step_s": 2.0, "time/other_s": 0.25}
    # async: generating and grading partly ran while the learner was busy; only the rest is the step's
    hidden = {**times, "time/generate_s": 1.5, "async/overlap_s": 1.0}
    assert _step_times(2.0, hidden) == {"time/step_s": 2.0, "time/other_s": 0.25}
