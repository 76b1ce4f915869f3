"""Prefill chunks after cached history attend without a mask and equal the masked computation."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from posttrain.rollout import GenerationRequest, NativeEngine, NativeEngineConfig, SamplingParams
from posttrain.rollout.engine.model import attend, attend_after_history
from tests.rollout.conftest import prompt


def _masked(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, history: int) -> torch.Tensor:
    tq, s = q.shape[2], k.shape[2]
    visible = torch.arange(s)[None, :] <= torch.arange(history, history + tq)[:, None]  # [Tq, S]
    return attend(q, k, v, visible[None, None])


@pytest.mark.parametrize("heads", [(4, 4), (4, 2), (6, 2), (8, 1)])
@pytest.mark.parametrize("history", [0, 1, 15, 16, 17, 40])
@pytest.mark.parametrize("num_queries", [2, 5, 16])
def test_attention_after_history_equals_masked_sdpa(heads: tuple[int, int], history: int, num_queries: int) -> None:
    h, hkv = heads
    gen = torch.Generator().manual_seed(history * 31 + num_queries)
    q = torch.randn(1, h, num_queries, 8, generator=gen) * 2
    k = torch.randn(1, hkv, history + num_queries, 8, generator=gen) * 2
    v = torch.randn(1, hkv, history + num_queries, 8, generator=gen)
    got = attend_after_history(q, k, v, history)
    assert got.shape == q.shape
    assert (got - _masked(q, k, v, history)).abs().max().item() < 1e-5


def test_strided_query_and_sliced_keys_are_accepted() -> None:
    """The runner passes a transposed query view; keys sliced from a wider gathered tensor also work."""
    q = torch.randn(1, 7, 4, 8).transpose(1, 2)  # [1, H=4, Tq=7, D] as a view
    k, v = torch.randn(1, 2, 30, 8), torch.randn(1, 2, 30, 8)
    expected = _masked(q.contiguous(), k[:, :, :27].contiguous(), v[:, :, :27].contiguous(), 20)
    assert (attend_after_history(q, k[:, :, :27], v[:, :, :27], 20) - expected).abs().max().item() < 1e-5


def _turns(model: Any, masked: bool) -> list[Any]:
    """Chunked prefill, a prefix hit ending mid-block and a multi-turn session, one engine."""
    engine = NativeEngine(model, NativeEngineConfig(trace_logits=True, block_size=4, max_prefill_tokens=6))
    assert engine.runner.masked_prefill is False  # CPU: the unmasked path is the default
    engine.runner.masked_prefill = masked
    greedy = SamplingParams(n=2, max_new_tokens=6, temperature=0.0)
    shared = prompt(22)
    outs = [sample for s in (1, 2)
            for sample in engine.generate([GenerationRequest(prompt_ids=shared + prompt(5, seed=s), params=greedy)])[0].samples]
    conversation = engine.open_conversation()
    for turn in range(3):
        conversation.append(prompt(9, seed=10 + turn))
        outs.append(conversation.generate(SamplingParams(max_new_tokens=5, temperature=0.0)))
    assert engine.stats()["cached_tokens"] > 22
    return outs


def test_unmasked_prefill_matches_masked_prefill_in_the_engine(qwen2: Any) -> None:
    unmasked, masked = _turns(qwen2, masked=False), _turns(qwen2, masked=True)
    assert len(unmasked) == 7
    for a, b in zip(unmasked, masked, strict=True):
        assert a.token_ids == b.token_ids
        assert (a.logits - b.logits).abs().max().item() < 1e-5
