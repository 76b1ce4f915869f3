"""Evicted KV survives host/disk round trips bit for bit; preemption and tight budgets keep outputs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from posttrain.rollout import GenerationRequest, NativeEngine, NativeEngineConfig, SamplingParams
from posttrain.rollout.engine.kv_store import TieredKVStore
from tests.rollout.conftest import prompt

GREEDY = SamplingParams(max_new_tokens=8, temperature=0.0)


@pytest.mark.parametrize("tier", ["host", "disk"])
def test_store_round_trip_is_bitwise(tmp_path: Path, tier: str) -> None:
    store = TieredKVStore(host_capacity_tokens=100 if tier == "host" else 0, disk_dir=str(tmp_path))
    kv = torch.randn(2, 3, 7, 2, 16)
    key = store.put(kv)
    assert store.tier_of(key) == tier
    back = store.take(key)
    assert torch.equal(back.view(torch.int32), kv.view(torch.int32))


def test_runner_offload_reload_is_bitwise(qwen2: Any) -> None:
    engine = NativeEngine(qwen2, NativeEngineConfig(block_size=4))
    engine.generate([GenerationRequest(prompt_ids=prompt(10), params=GREEDY)])
    slots = list(range(0, 10))
    saved = engine.runner.read_slots(slots)
    engine.runner.k.zero_()
    engine.runner.v.zero_()
    engine.runner.write_slots(slots, saved)
    assert torch.equal(engine.runner.read_slots(slots), saved)


def _multi_turn(engine: NativeEngine, turns: int = 3) -> list[list[int]]:
    sessions = [engine.open_conversation() for _ in range(3)]
    replies = []
    for turn in range(turns):
        for i, s in enumerate(sessions):
            s.append(prompt(14, seed=100 * i + turn))
        outs = engine.generate([s.request(GREEDY) for s in sessions])
        replies.extend(s.record(o).token_ids for s, o in zip(sessions, outs, strict=True))
    return replies


@pytest.mark.parametrize("tier", ["host", "disk"])
def test_tiered_reload_reproduces_unconstrained_run(qwen2: Any, tmp_path: Path, tier: str) -> None:
    roomy = NativeEngine(qwen2, NativeEngineConfig(block_size=4))
    host = 4096 if tier == "host" else 0
    tight = NativeEngine(qwen2, NativeEngineConfig(block_size=4, kv_cache_tokens=96, host_kv_tokens=host,
                                                   disk_kv_dir=str(tmp_path) if tier == "disk" else None))
    assert _multi_turn(tight) == _multi_turn(roomy)
    stats = tight.stats()
    assert stats["reloaded_tokens"] > 0
    assert stats["offloaded_tokens"] > 0


def test_offloaded_prefix_counts_as_cached_not_computed(qwen2: Any) -> None:
    tight = NativeEngine(qwen2, NativeEngineConfig(block_size=4, kv_cache_tokens=96, host_kv_tokens=4096))
    dropping = NativeEngine(qwen2, NativeEngineConfig(block_size=4, kv_cache_tokens=96))
    _multi_turn(tight)
    _multi_turn(dropping)
    assert tight.stats()["computed_tokens"] < dropping.stats()["computed_tokens"]


def test_preemption_under_tiny_budget_keeps_greedy_outputs(qwen2: Any) -> None:
    requests = [GenerationRequest(prompt_ids=prompt(9, seed=s), params=SamplingParams(
        max_new_tokens=20, temperature=0.0)) for s in range(4)]
    roomy = NativeEngine(qwen2, NativeEngineConfig(block_size=4)).generate(requests)
    tight_engine = NativeEngine(qwen2, NativeEngineConfig(block_size=4, kv_cache_tokens=48))
    tight = tight_engine.generate(requests)
    assert [o.samples[0].token_ids for o in tight] == [o.samples[0].token_ids for o in roomy]
    assert tight_engine.stats()["preemptions"] > 0


def test_kv_waste_stays_below_one_block_per_sequence(qwen2: Any) -> None:
    engine = NativeEngine(qwen2, NativeEngineConfig(block_size=8, max_prefill_tokens=5))
    engine.generate([GenerationRequest(prompt_ids=prompt(21), params=SamplingParams(
        n=4, max_new_tokens=13, temperature=1.0, seed=0))])
    assert engine.stats()["max_waste_slots"] < 8


def test_every_block_is_free_or_cached_after_generate(qwen2: Any) -> None:
    engine = NativeEngine(qwen2, NativeEngineConfig(block_size=4, kv_cache_tokens=64))
    engine.generate([GenerationRequest(prompt_ids=prompt(9, seed=s), params=SamplingParams(
        n=2, max_new_tokens=10, temperature=1.0, seed=s)) for s in range(3)])
    engine.update_weights(qwen2.state_dict())
    assert engine.pool.num_free == engine.pool.num_blocks


def test_request_larger_than_the_kv_budget_is_refused(qwen2: Any) -> None:
    engine = NativeEngine(qwen2, NativeEngineConfig(block_size=4, kv_cache_tokens=16))
    with pytest.raises(ValueError, match="KV budget"):
        engine.generate([GenerationRequest(prompt_ids=prompt(10), params=GREEDY)])
