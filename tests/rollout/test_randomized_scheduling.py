"""Randomised mixes of shared prefixes, groups, chunking, tiny budgets and tiers change no output."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from posttrain.rollout import GenerationRequest, NativeEngine, NativeEngineConfig, SamplingParams
from tests.rollout.conftest import prompt


def _requests(seed: int) -> list[GenerationRequest]:
    rng = random.Random(seed)
    bases = [prompt(rng.randint(3, 14), seed=seed * 10 + i) for i in range(2)]
    requests = []
    for i in range(6):
        ids = rng.choice(bases)[: rng.randint(1, 14)] + prompt(rng.randint(1, 9), seed=seed * 100 + i)
        params = SamplingParams(n=rng.choice([1, 2]), max_new_tokens=rng.randint(1, 12), temperature=0.0)
        requests.append(GenerationRequest(prompt_ids=ids, params=params))
    return requests


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("tiers", [True, False])
def test_constrained_engine_matches_plain_engine(qwen2: Any, tmp_path: Path, seed: int, tiers: bool) -> None:
    requests = _requests(seed)
    plain = NativeEngine(qwen2, NativeEngineConfig(block_size=4, prefix_caching=False, max_prefill_tokens=None))
    expected = [[s.token_ids for s in o.samples] for o in plain.generate(requests)]
    tier_config = {"host_kv_tokens": 24, "disk_kv_dir": str(tmp_path)} if tiers else {}
    tight = NativeEngine(qwen2, NativeEngineConfig(block_size=4, kv_cache_tokens=40, max_prefill_tokens=5,
                                                   **tier_config))
    for _ in range(2):  # the second round runs against a warm, partly offloaded cache
        got = [[s.token_ids for s in o.samples] for o in tight.generate(requests)]
        assert got == expected
