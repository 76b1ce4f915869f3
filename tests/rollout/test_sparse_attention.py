"""Sparse modes: exact when they keep everything, measurably divergent when they do not."""

from __future__ import annotations

from typing import Any

import torch

from posttrain.rollout import GenerationRequest, NativeEngine, NativeEngineConfig, SamplingParams
from posttrain.rollout.config import AttentionConfig
from posttrain.rollout.engine.attention import key_positions
from posttrain.rollout.engine.divergence import divergence_from_logits, measure_divergence
from tests.rollout.conftest import prompt

BASE = NativeEngineConfig(block_size=4, max_prefill_tokens=8)


def forced(model: Any, attention: AttentionConfig, ids: list[int], cont: list[int]) -> torch.Tensor:
    config = BASE.model_copy(update={"attention": attention})
    return NativeEngine(model, config).teacher_forced_logits(ids, cont)


def test_teacher_forced_logits_match_full_forward(qwen2: Any) -> None:
    ids, cont = prompt(20), prompt(6, seed=5)
    got = forced(qwen2, AttentionConfig(), ids, cont)
    with torch.no_grad():
        full = qwen2(torch.tensor([ids + cont])).logits[0, len(ids) - 1 : -1]
    assert (got - full).abs().max().item() < 1e-4


def test_window_covering_the_context_is_exact(qwen2: Any) -> None:
    ids, cont = prompt(20), prompt(6, seed=5)
    exact = forced(qwen2, AttentionConfig(), ids, cont)
    window = forced(qwen2, AttentionConfig(kind="window", sink_tokens=2, window_tokens=64), ids, cont)
    assert (exact - window).abs().max().item() < 1e-5


def test_quest_keeping_every_block_is_exact(qwen2: Any) -> None:
    ids, cont = prompt(20), prompt(6, seed=5)
    exact = forced(qwen2, AttentionConfig(), ids, cont)
    quest = forced(qwen2, AttentionConfig(kind="quest", top_k_blocks=64), ids, cont)
    assert (exact - quest).abs().max().item() < 1e-5


def test_window_positions_are_sinks_plus_recent_keys() -> None:
    keys = key_positions(AttentionConfig(kind="window", sink_tokens=2, window_tokens=3), start=10, num_queries=1)
    assert keys.tolist() == [0, 1, 8, 9, 10]


def test_narrow_modes_report_nonzero_divergence(qwen2: Any) -> None:
    ids, cont = prompt(40), prompt(8, seed=5)
    for attention in (AttentionConfig(kind="window", sink_tokens=1, window_tokens=4),
                      AttentionConfig(kind="quest", top_k_blocks=2)):
        report = measure_divergence(qwen2, ids, cont, attention, BASE)
        assert report["kl_mean"] > 1e-6
        assert report["logprob_drift_max"] > 0


def test_identical_logits_have_zero_divergence() -> None:
    logits = torch.randn(3, 10)
    report = divergence_from_logits(logits, logits.clone(), [1, 2, 3])
    assert report["kl_max"] == 0 and report["argmax_agreement"] == 1.0


def _quest_runs(model: Any, refresh_all: bool) -> list[torch.Tensor]:
    """Quest decoding of prompts that share a prefix ending mid-block (copy-on-write) and hit the cache."""
    config = BASE.model_copy(update={"attention": AttentionConfig(kind="quest", top_k_blocks=2),
                                     "trace_logits": True})
    engine = NativeEngine(model, config)
    engine.runner.refresh_all_bounds = refresh_all
    shared = prompt(30)
    params = SamplingParams(n=3, max_new_tokens=10, temperature=1.0, seed=3)
    traces = []
    for tail in (prompt(3, seed=1), prompt(5, seed=2)):
        out = engine.generate([GenerationRequest(prompt_ids=shared + tail, params=params)])[0]
        traces += [sample.logits for sample in out.samples]
    assert engine.stats()["cached_tokens"] > 0
    return traces


def test_quest_block_bounds_kept_between_steps_equal_bounds_recomputed_every_step(qwen2: Any) -> None:
    kept, recomputed = _quest_runs(qwen2, False), _quest_runs(qwen2, True)
    assert all(torch.equal(a, b) for a, b in zip(kept, recomputed, strict=True))
