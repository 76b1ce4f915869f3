"""Training-recipe rules: the base model's SFT mixture and the single sampling temperature."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from posttrain.train.base_model import sft_mixture
from posttrain.train.config import TrainConfig


def test_sft_mixture_favours_domains_furthest_below_the_ceiling() -> None:
    # ceiling 0.6, floor 0.15: raw = 0.15 + max(0.6 - p, 0) / 0.6 -> (1.15, 0.65, 0.15), total 1.95.
    mix = sft_mixture({"a": 0.0, "b": 0.3, "c": 0.9}, ceiling=0.6, floor=0.15)
    assert mix == pytest.approx({"a": 1.15 / 1.95, "b": 0.65 / 1.95, "c": 0.15 / 1.95})


def test_sft_mixture_is_uniform_when_every_domain_is_past_the_ceiling() -> None:
    mix = sft_mixture({"a": 0.7, "b": 0.95}, ceiling=0.6, floor=0.15)
    assert mix == pytest.approx({"a": 0.5, "b": 0.5})


def test_policy_temperature_follows_the_rollout_temperature() -> None:
    config = TrainConfig.model_validate({"rollout": {"temperature": 0.7}})
    assert config.policy.temperature == 0.7
    assert TrainConfig().policy.temperature == 1.0


def test_contradicting_temperatures_are_refused() -> None:
    with pytest.raises(ValidationError, match="policy.temperature must equal rollout.temperature"):
        TrainConfig.model_validate({"rollout": {"temperature": 0.7}, "policy": {"temperature": 1.0}})


def test_sft_lr_warms_up_then_decays_to_the_floor() -> None:
    from posttrain.train.base_model import TinyBaseConfig, sft_lr_multiplier

    config = TinyBaseConfig(warmup_steps=10, max_steps=110, min_lr_ratio=0.1)
    assert sft_lr_multiplier(0, config) == pytest.approx(0.1)      # 1/10 of the way up
    assert sft_lr_multiplier(10, config) == pytest.approx(1.0)     # cosine starts at the peak
    assert sft_lr_multiplier(60, config) == pytest.approx(0.55)    # half way: 0.1 + 0.9 * 0.5
    assert sft_lr_multiplier(110, config) == pytest.approx(0.1)    # the floor


def test_base_model_cache_key_changes_with_the_split() -> None:
    from posttrain.train.base_model import TinyBaseConfig, cache_key

    config, ids = TinyBaseConfig(), ["math/arithmetic/add@easy"]
    assert cache_key(config, ids, 0, 0.1) == cache_key(config, ids, 0, 0.1)
    assert cache_key(config, ids, 0, 0.1) != cache_key(config, ids, 0, 0.25)
    assert cache_key(config, ids, 0, 0.1) != cache_key(config, ids, 1, 0.1)


def test_two_builds_of_the_base_model_have_identical_weights(tmp_path: Path) -> None:
    import torch

    from posttrain.tasks.pool import TaskPool
    from posttrain.tasks.registry import DomainsConfig
    from posttrain.train.base_model import build_tiny_base
    from posttrain.train.config import TinyBaseConfig
    from posttrain.train.models import weights_sha256

    domains = DomainsConfig.model_validate(
        {"domains": [{"family": {"kind": "arithmetic", "ops": ["add"], "levels": ["easy"]}}]}
    )
    pool = TaskPool.from_config(domains)
    recipe = TinyBaseConfig(hidden_size=32, num_layers=1, intermediate_size=64, max_steps=6, min_steps=6,
                            batch_size=8, eval_every=3, tokenizer_corpus=200, warmup_steps=2)
    hashes = []
    for index, threads in enumerate((2, 1)):  # the build pins its own thread count
        torch.set_num_threads(threads)
        out = build_tiny_base(recipe, pool, pool.registry.ids(), lambda m, t: {"math/arithmetic/add@easy": 0.0},
                              tmp_path / f"build{index}", log=lambda _: None)
        meta = json.loads((out / "build.json").read_text())
        from transformers import AutoModelForCausalLM

        hashes.append((meta["weights_sha256"], weights_sha256(AutoModelForCausalLM.from_pretrained(out))))
    assert hashes[0] == hashes[1]
    assert hashes[0][0] == hashes[0][1]  # the recorded hash is the saved weights'
    assert torch.get_num_threads() == 1  # the caller's setting is restored


def test_runs_started_together_build_the_base_model_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading
    import time

    from posttrain.tasks.registry import DomainsConfig
    from posttrain.train import base_model
    from posttrain.train.config import TinyBaseConfig

    builds: list[Path] = []

    def slow_build(config, pool, ids, eval_fn, out_dir: Path, log) -> Path:  # type: ignore[no-untyped-def]
        builds.append(out_dir)
        time.sleep(0.3)  # the second run asks while the first is still building
        out_dir.mkdir(parents=True)
        (out_dir / "build.json").write_text("{}")
        return out_dir

    monkeypatch.setenv("POSTTRAIN_CACHE", str(tmp_path))
    monkeypatch.setattr(base_model, "build_tiny_base", slow_build)
    domains = DomainsConfig.model_validate(
        {"domains": [{"family": {"kind": "arithmetic", "ops": ["add"], "levels": ["easy"]}}]}
    )
    results: list[Path] = []
    runs = [threading.Thread(target=lambda: results.append(base_model.ensure_tiny_base(TinyBaseConfig(), domains,
                                                                                       log=lambda _: None)))
            for _ in range(2)]
    for run in runs:
        run.start()
    for run in runs:
        run.join()
    assert len(builds) == 1 and results == [builds[0], builds[0]]
