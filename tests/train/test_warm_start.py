"""Warm start: SFT of a given model before RL, cached by its inputs, rendered as the run renders prompts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from posttrain.tasks.families.arithmetic import ArithmeticConfig
from posttrain.tasks.pool import TaskPool
from posttrain.tasks.registry import DomainEntry, DomainsConfig
from posttrain.train import warm_start
from posttrain.train.config import ModelConfig, TrainConfig, WarmStartConfig
from posttrain.train.models import load_model, weights_sha256

DOMAINS = DomainsConfig(domains=[DomainEntry(family=ArithmeticConfig(ops=["add"], levels=["easy"]))])
RECIPE = WarmStartConfig(max_steps=4, batch_size=8, lr=1e-3, eval_every=2, eval_tasks_per_domain=4,
                         eval_max_new_tokens=3, stop_pass_rate=0.99, max_positions=128)  # fmt: skip


@pytest.fixture()
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("POSTTRAIN_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_sft_changes_the_model_and_the_second_run_reuses_it(tiny_model_dir: Path, cache: Path) -> None:
    base = ModelConfig(path=str(tiny_model_dir))
    logs: list[str] = []
    path = warm_start.ensure_warm_start(base, RECIPE, DOMAINS, None, logs.append)
    meta = json.loads((path / "warm_start.json").read_text())
    assert [h["step"] for h in meta["history"]] == [2, 4]  # the stopping rule was not met: all 4 steps
    assert meta["domains"] == ["math/arithmetic/add@easy"] and "math/arithmetic/add@easy" in meta["before"]
    trained, _ = load_model(ModelConfig(path=str(path)))
    original, _ = load_model(base)
    assert weights_sha256(trained) == meta["weights_sha256"] != weights_sha256(original)
    again: list[str] = []
    assert warm_start.ensure_warm_start(base, RECIPE, DOMAINS, None, again.append) == path
    assert again == [f"using cached warm-started model {path}"]
    # another recipe, system prompt or domain split is another model
    other = warm_start.warm_start_key("x", RECIPE, ["a"], 0, 0.25, None)
    assert other != warm_start.warm_start_key("x", RECIPE, ["a"], 0, 0.25, "Be brief.")
    assert other != warm_start.warm_start_key("x", RECIPE.model_copy(update={"lr": 1e-4}), ["a"], 0, 0.25, None)
    assert other != warm_start.warm_start_key("x", RECIPE, ["a"], 0, 0.5, None)


def test_sft_renders_prompts_with_the_runs_system_prompt(
    tiny_model_dir: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {}

    def fake_sft(config: Any, model: Any, tokenizer: Any, draw: Any, eval_fn: Any, domain_ids: Any, log: Any,
                 transcript: Any, renderer: Any) -> list[dict[str, Any]]:  # fmt: skip
        import random

        seen["system_prompt"] = renderer.system_prompt
        pool = TaskPool.from_config(DOMAINS)
        seen["splits"] = {pool.split_of(t) for t in draw(random.Random(0), 16, {d: 1.0 for d in domain_ids})}
        with torch.no_grad():
            next(model.parameters()).add_(1.0)
        return []

    monkeypatch.setattr(warm_start, "run_sft", fake_sft)
    warm_start.ensure_warm_start(ModelConfig(path=str(tiny_model_dir)), RECIPE, DOMAINS, "Answer briefly.")
    assert seen == {"system_prompt": "Answer briefly.", "splits": {"train"}}  # never an eval task


def test_a_run_with_warm_start_starts_from_the_warm_model(
    tiny_model_dir: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from posttrain.train.warm_start import resolve_model

    config = TrainConfig.model_validate({"model": {"path": str(tiny_model_dir)}, "domains": DOMAINS.model_dump(),
                                         "warm_start": RECIPE.model_dump()})  # fmt: skip
    model, _ = resolve_model(config, log=lambda _: None)
    path = next(cache.glob("warm-*[!.lock]"))
    assert weights_sha256(model) == json.loads((path / "warm_start.json").read_text())["weights_sha256"]
    plain, _ = resolve_model(config.model_copy(update={"warm_start": None}), log=lambda _: None)
    assert weights_sha256(plain) != weights_sha256(model)


def test_one_domain_per_batch_draws_every_row_from_one_domain() -> None:
    import random

    from posttrain.train.base_model import task_drawer

    two = DomainsConfig(domains=[DomainEntry(family=ArithmeticConfig(ops=["add", "sub"], levels=["easy"]))])
    pool = TaskPool.from_config(two)
    mixture = {d: 1.0 for d in pool.registry.ids()}
    rng = random.Random(0)
    batches = [task_drawer(pool, one_domain_per_batch=True)(rng, 8, mixture) for _ in range(20)]
    assert all(len(b) == 8 and len({t.domain_id for t in b}) == 1 for b in batches)
    assert {b[0].domain_id for b in batches} == set(mixture)  # each domain gets batches
    mixed = [task_drawer(pool)(rng, 8, mixture) for _ in range(20)]
    assert any(len({t.domain_id for t in b}) == 2 for b in mixed)  # the tiny base's rows draw apart
