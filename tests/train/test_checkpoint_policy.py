"""Checkpoint specs to policies: HF dirs, run dirs (full weights and LoRA adapters), configs, errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

from posttrain.bench.agents import chatml_tokenizer
from posttrain.errors import ConfigError
from posttrain.train.checkpoint import save_checkpoint
from posttrain.train.checkpoint_policy import load_policy
from posttrain.train.config import TrainConfig, load_train_config
from posttrain.train.models import weights_sha256

DOMAINS = {"seed": 0, "untrained": ["math/arithmetic/sub@*"],
           "domains": [{"family": {"kind": "arithmetic", "ops": ["add", "sub"], "levels": ["easy"]}}]}  # fmt: skip


VOCAB = 264
"""The test tokenizer's size (its BPE stops merging below the 280 asked for)."""


def _model(vocab: int) -> Any:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=256)  # fmt: skip
    torch.manual_seed(0)
    return Qwen2ForCausalLM(config).eval()


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("hf")
    tokenizer = chatml_tokenizer(["1 + 2 = 3"], vocab_size=280)
    assert len(tokenizer) == VOCAB
    _model(VOCAB).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def _run_dir(tmp_path: Path, hf_dir: Path, **sections: Any) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    config = {"model": {"path": str(hf_dir)}, "domains": DOMAINS, **sections}
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    return run


def _no_config(name: str) -> TrainConfig:
    raise AssertionError(f"no config lookup expected, got {name}")


def test_a_run_dir_loads_its_latest_checkpoint_into_its_base_model(tmp_path: Path, hf_dir: Path) -> None:
    run = _run_dir(tmp_path, hf_dir, rollout={"system_prompt": "be brief"})
    trained = _model(VOCAB)
    with torch.no_grad():
        for p in trained.parameters():
            p.add_(0.01)
    save_checkpoint(run, {"model": trained.state_dict(), "step": 3})
    base = load_policy(str(hf_dir), TrainConfig(), _no_config, print)
    loaded = load_policy(str(run), TrainConfig(), _no_config, print)
    assert loaded.weights_hash == weights_sha256(trained) != base.weights_hash
    assert loaded.path.endswith("step_00000003") and loaded.system_prompt == "be brief"
    assert loaded.trained_domains == ("math/arithmetic/add@easy",) and base.trained_domains == ()
    direct = load_policy(loaded.path, TrainConfig(), _no_config, print)  # the checkpoint dir itself
    assert direct.weights_hash == loaded.weights_hash
    save_checkpoint(run / "best_passing", {"model": _model(VOCAB).state_dict(), "step": 2})  # the run's config above
    best = load_policy(str(run / "best_passing"), TrainConfig(), _no_config, print)
    assert best.weights_hash == base.weights_hash and best.system_prompt == "be brief"


def test_a_lora_checkpoint_gives_the_trainers_policy(tmp_path: Path, hf_dir: Path) -> None:
    from posttrain.train.policy import PolicyConfig, PolicyTrainer

    run = _run_dir(tmp_path, hf_dir, policy={"lora": {"r": 2, "alpha": 4}})
    config = load_train_config(run / "config.yaml")
    trainer = PolicyTrainer(_model(VOCAB), config.policy)
    assert isinstance(config.policy, PolicyConfig)
    with torch.no_grad():
        for name, p in trainer.model.named_parameters():
            if "lora_B" in name:
                p.normal_()
    save_checkpoint(run, trainer.state_dict())
    loaded = load_policy(str(run), TrainConfig(), _no_config, print)
    ids = torch.tensor([[1, 5, 9, 12]])
    with torch.no_grad():
        expected = trainer.causal_lm(ids).logits
        assert torch.allclose(loaded.model(ids).logits, expected)
        assert not torch.allclose(_model(VOCAB)(ids).logits, expected)  # the adapters change the output
    assert loaded.weights_hash == weights_sha256(trainer.causal_lm)


def test_a_config_name_is_resolved_by_the_caller_and_odd_dirs_are_refused(tmp_path: Path, hf_dir: Path) -> None:
    asked = []

    def config_of(name: str) -> TrainConfig:
        asked.append(name)
        return TrainConfig(model={"path": str(hf_dir)})  # type: ignore[arg-type]

    assert load_policy("myconfig", TrainConfig(), config_of, print).path == "myconfig" and asked == ["myconfig"]
    with pytest.raises(ConfigError, match="not a checkpoint"):
        load_policy(str(tmp_path), TrainConfig(), config_of, print)
    (tmp_path / "empty" / "checkpoints").mkdir(parents=True)
    with pytest.raises(ConfigError, match="without a complete checkpoint"):
        load_policy(str(tmp_path / "empty"), TrainConfig(), config_of, print)


def test_a_named_model_is_evaluated_as_it_is_while_a_config_keeps_its_warm_start(
        tmp_path: Path, hf_dir: Path, monkeypatch: Any) -> None:
    """With a default config that warm-starts (a training config given as `--domains`), a model
    directory named on the command line is loaded as it is, not fine-tuned again; a train config named
    as the spec still starts from its warm-started model."""
    import posttrain.train.warm_start as warm_start

    calls: list[str] = []

    def fake_warm_start(model: Any, config: Any, domains: Any, system_prompt: Any, log: Any) -> Path:
        calls.append(str(model.path))
        return hf_dir

    monkeypatch.setattr(warm_start, "ensure_warm_start", fake_warm_start)
    warming = TrainConfig.model_validate({"model": {"path": str(hf_dir)}, "domains": DOMAINS,
                                          "warm_start": {"max_steps": 1}})
    plain = load_policy(str(hf_dir), warming, _no_config, print)
    assert calls == [] and plain.weights_hash == weights_sha256(_model(VOCAB))
    load_policy("some-config", TrainConfig(), lambda name: warming, print)
    assert calls == [str(hf_dir)]
