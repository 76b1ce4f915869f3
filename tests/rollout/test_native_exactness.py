"""The native engine computes what a plain full forward computes, whatever the caching path."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from posttrain.rollout import GenerationRequest, HFEngine, NativeEngine, NativeEngineConfig, SamplingParams
from tests.rollout.conftest import ARCHS, full_logits, prompt, tiny_model

GREEDY = SamplingParams(n=1, max_new_tokens=12, temperature=0.0)


def run(engine: Any, ids: list[int], params: SamplingParams = GREEDY) -> Any:
    return engine.generate([GenerationRequest(prompt_ids=ids, params=params)])[0]


def traced(model: Any, **overrides: Any) -> NativeEngine:
    return NativeEngine(model, NativeEngineConfig(trace_logits=True, block_size=4, **overrides))


@pytest.mark.parametrize("arch", ARCHS)
def test_greedy_tokens_identical_to_transformers_generate(arch: str) -> None:
    model = tiny_model(arch)
    ids = prompt(23)
    expected = run(HFEngine(model), ids, SamplingParams(max_new_tokens=24, temperature=0.0))
    got = run(NativeEngine(model, NativeEngineConfig(block_size=4, max_prefill_tokens=8)), ids,
              SamplingParams(max_new_tokens=24, temperature=0.0))
    assert got.samples[0].token_ids == expected.samples[0].token_ids


@pytest.mark.parametrize("arch", ARCHS)
def test_step_logits_match_full_forward(arch: str) -> None:
    model = tiny_model(arch)
    ids = prompt(19)
    sample = run(traced(model, max_prefill_tokens=5), ids).samples[0]
    reference = full_logits(model, ids + sample.token_ids)  # [T, V]
    steps = reference[len(ids) - 1 : len(ids) - 1 + len(sample.token_ids)]
    assert (sample.logits - steps).abs().max().item() < 1e-4


def test_chunked_prefill_equals_unchunked(qwen2: Any) -> None:
    ids = prompt(37)
    chunked = run(traced(qwen2, max_prefill_tokens=6), ids).samples[0]
    whole = run(traced(qwen2, max_prefill_tokens=None), ids).samples[0]
    assert chunked.token_ids == whole.token_ids
    assert (chunked.logits - whole.logits).abs().max().item() < 1e-5


def test_prefix_hit_equals_miss(qwen2: Any) -> None:
    shared = prompt(21)
    engine = traced(qwen2)
    run(engine, shared + prompt(5, seed=7))
    hit = run(engine, shared + prompt(6, seed=8)).samples[0]
    miss = run(traced(qwen2, prefix_caching=False), shared + prompt(6, seed=8)).samples[0]
    assert engine.stats()["cached_tokens"] >= 21
    assert (hit.logits - miss.logits).abs().max().item() < 1e-5


def test_paged_gather_equals_contiguous_cache(qwen2: Any) -> None:
    ids = prompt(30)
    paged = run(traced(qwen2, max_prefill_tokens=7), ids).samples[0]
    contiguous = run(NativeEngine(qwen2, NativeEngineConfig(trace_logits=True, block_size=256)), ids)
    assert (paged.logits - contiguous.samples[0].logits).abs().max().item() < 1e-5


def test_weight_version_bump_yields_zero_hits(qwen2: Any) -> None:
    engine = traced(qwen2)
    ids = prompt(20)
    run(engine, ids)
    engine.update_weights(qwen2.state_dict(), version=2)
    before = engine.stats()["cached_tokens"]
    run(engine, ids)
    assert engine.stats()["cached_tokens"] == before


def test_returned_logprobs_equal_teacher_forced_recomputation(qwen2: Any) -> None:
    ids = prompt(17)
    params = SamplingParams(n=4, max_new_tokens=10, temperature=1.0, top_p=0.9, top_k=20, seed=3)
    out = run(NativeEngine(qwen2, NativeEngineConfig(block_size=4)), ids, params)
    for sample in out.samples:
        logits = full_logits(qwen2, ids + sample.token_ids)[len(ids) - 1 : -1]  # [T, V]
        expected = torch.log_softmax(logits, -1).gather(-1, torch.tensor(sample.token_ids)[:, None])[:, 0]
        assert (torch.tensor(sample.logprobs) - expected).abs().max().item() < 1e-4


@pytest.mark.parametrize("length", [3, 4, 5, 7, 8, 9])
def test_group_sharing_at_block_boundaries_matches_hf(qwen2: Any, length: int) -> None:
    """n=3 siblings reuse the prompt: hits end at length-1, i.e. at, before and after a block edge."""
    ids = prompt(length, seed=length)
    params = SamplingParams(n=3, max_new_tokens=9, temperature=0.0)
    expected = run(HFEngine(qwen2), ids, params).samples[0].token_ids
    engine = NativeEngine(qwen2, NativeEngineConfig(block_size=4))
    out = run(engine, ids, params)
    assert [s.token_ids for s in out.samples] == [expected] * 3
    assert engine.stats()["cached_tokens"] == 2 * (length - 1)


def test_hit_ending_mid_block_copies_on_write(qwen2: Any) -> None:
    """Two prompts share 6 tokens (block size 4): the second maps one full block, copies the second."""
    engine = traced(qwen2)
    first, second = prompt(6) + [5, 6, 7], prompt(6) + [9, 10, 11]
    run(engine, first)
    hit = run(engine, second).samples[0]
    fresh = run(traced(qwen2, prefix_caching=False), second).samples[0]
    assert engine.stats()["cached_tokens"] == 6
    assert (hit.logits - fresh.logits).abs().max().item() < 1e-5


def test_shared_prefix_attention_equals_per_sequence_attention(qwen2: Any) -> None:
    ids = prompt(29)
    params = SamplingParams(n=3, max_new_tokens=8, temperature=1.0, seed=4)
    cascade = run(traced(qwen2, shared_prefix_min_blocks=1), ids, params)
    plain = run(traced(qwen2, shared_prefix_min_blocks=10_000), ids, params)
    for a, b in zip(cascade.samples, plain.samples, strict=True):
        assert a.token_ids == b.token_ids
        assert (a.logits - b.logits).abs().max().item() < 1e-5
