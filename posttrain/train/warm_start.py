"""Warm start: SFT of a pretrained model on the run's domains before RL, cached like the tiny base.

RL learns only from groups whose samples differ in reward; a model that never answers in a domain's
format (SmolLM2-135M-Instruct on the knowledge domains: 0 of 288 sampled responses rewarded) gives it
nothing. `ensure_warm_start` fine-tunes the whole model on the train split's gold responses, rendered
exactly as the run renders prompts (the model's chat template, the run's system prompt; agent tasks as
their gold episodes), with `base_model.run_sft`'s stopping rule: stop once the mean greedy pass rate
reaches `stop_pass_rate` and every domain `min_domain_pass_rate`, so RL starts with successes to
learn from and headroom. The result is an HF directory under the model cache, keyed by the base
weights, the recipe, the domains, the split and the system prompt; runs started together build it
once (a file lock). Held-out (eval-split) tasks are never trained on.
`resolve_model` is the model a run starts from: the config's model (the tiny preset built or reused
first), warm-started when `warm_start` is set.
Not here: the tiny model's own build (`posttrain.train.base_model`).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from posttrain.config import cache_root
from posttrain.rollout.prompting import PromptRenderer
from posttrain.tasks.pool import TaskPool
from posttrain.train.base_model import (
    cached_build,
    ensure_tiny_base,
    gold_transcript,
    greedy_pass_rate,
    run_sft,
    save_model_dir,
    task_drawer,
)
from posttrain.train.config import ModelConfig, TrainConfig, WarmStartConfig
from posttrain.train.models import load_model, weights_sha256

WARM_START_VERSION = 1
"""Bumped whenever the recipe changes, so stale cached models are not reused."""


def resolve_model(config: TrainConfig, log: Callable[[str], None]) -> tuple[Any, Any]:
    """(model, tokenizer) a run starts from: the config's model (the `tiny` preset built or reused first),
    warm-started by SFT on the run's domains when `warm_start` is set."""
    model = config.model
    if model.preset == "tiny":
        model = ModelConfig(path=str(ensure_tiny_base(config.tiny_base, config.domains, log)), dtype=model.dtype)
    if config.warm_start is not None:
        path = ensure_warm_start(model, config.warm_start, config.domains, config.rollout.system_prompt, log)
        model = ModelConfig(path=str(path), dtype=model.dtype)
    return load_model(model)


def warm_start_key(base_sha256: str, config: WarmStartConfig, domain_ids: list[str], data_seed: int,
                   eval_fraction: float, system_prompt: str | None) -> str:  # fmt: skip
    """Hash of everything the warm-started model depends on."""
    blob = json.dumps([WARM_START_VERSION, base_sha256, config.model_dump(), sorted(domain_ids), data_seed,
                       eval_fraction, system_prompt], sort_keys=True)  # fmt: skip
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def ensure_warm_start(model_config: ModelConfig, config: WarmStartConfig, domains: Any, system_prompt: str | None,
                      log: Callable[[str], None] = print) -> Path:  # fmt: skip
    """The cached warm-started model of `model_config` for these domains, trained first if missing."""
    model, tokenizer = load_model(model_config)
    pool = TaskPool.from_config(domains)
    domain_ids = pool.registry.ids()
    key = warm_start_key(weights_sha256(model), config, domain_ids, domains.seed, domains.eval_fraction, system_prompt)
    out_dir = cache_root() / f"warm-{key}"

    def build() -> Path:
        log(f"warm start: SFT on {len(domain_ids)} domains -> {out_dir}")
        threads = torch.get_num_threads()
        torch.set_num_threads(config.threads)
        try:
            return _train(model, tokenizer, config, pool, domain_ids, system_prompt, out_dir, log)
        finally:
            torch.set_num_threads(threads)

    return cached_build(out_dir, "warm_start.json", "warm-started model", build, log)


def _train(model: Any, tokenizer: Any, config: WarmStartConfig, pool: TaskPool, domain_ids: list[str],
           system_prompt: str | None, out_dir: Path, log: Callable[[str], None]) -> Path:  # fmt: skip
    torch.manual_seed(config.seed)
    start = time.perf_counter()
    evaluate = greedy_pass_rate(pool, domain_ids, config, system_prompt)
    before = evaluate(model, tokenizer)
    log(f"warm start: greedy pass rate before SFT {sum(before.values()) / len(before):.3f}")
    renderer = PromptRenderer(tokenizer, system_prompt)
    draw = task_drawer(pool, config.one_domain_per_batch)
    history = run_sft(config, model, tokenizer, draw, evaluate, domain_ids, log, gold_transcript(pool), renderer)
    model.eval()
    meta = {"config": config.model_dump(), "domains": domain_ids, "system_prompt": system_prompt,
            "before": before, "history": history, "wall_s": round(time.perf_counter() - start, 1)}  # fmt: skip
    return save_model_dir(model, tokenizer, out_dir, "warm_start.json", meta)
