"""Sampling controls, seeding, the HF baselines and the engine contract shared by every backend."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from posttrain.rollout import (
    GenerationRequest,
    HFEngine,
    HFEngineConfig,
    NativeEngine,
    NativeEngineConfig,
    RolloutEngine,
    SamplingParams,
)
from posttrain.rollout.engine.sampler import processed_logits
from tests.rollout.conftest import full_logits, prompt

ENGINES = {
    "native": lambda m: NativeEngine(m, NativeEngineConfig(block_size=4)),
    "hf": lambda m: HFEngine(m),
    "hf_prefill_once": lambda m: HFEngine(m, HFEngineConfig(prefill_once=True)),
}


def one(engine: Any, ids: list[int], params: SamplingParams) -> Any:
    return engine.generate([GenerationRequest(prompt_ids=ids, params=params)])[0]


@pytest.mark.parametrize("name", ENGINES)
def test_engine_contract(qwen2: Any, name: str) -> None:
    engine = ENGINES[name](qwen2)
    assert isinstance(engine, RolloutEngine)
    params = SamplingParams(n=3, max_new_tokens=6, temperature=1.0, seed=0, stop_token_ids=[5])
    out = engine.generate([GenerationRequest(prompt_ids=prompt(8), params=params)] * 2)
    assert [len(o.samples) for o in out] == [3, 3]
    for sample in out[0].samples:
        assert len(sample.token_ids) == len(sample.logprobs) <= 6
        assert sample.finish_reason == ("stop" if sample.token_ids[-1] == 5 else "length")
        assert 5 not in sample.token_ids[:-1]
    assert engine.stats()["prompt_tokens"] == 2 * 3 * 8


@pytest.mark.parametrize("name", ENGINES)
def test_logprobs_are_raw_log_softmax(qwen2: Any, name: str) -> None:
    ids = prompt(11)
    params = SamplingParams(n=2, max_new_tokens=7, temperature=0.7, top_k=10, seed=1)
    for sample in one(ENGINES[name](qwen2), ids, params).samples:
        logits = full_logits(qwen2, ids + sample.token_ids)[len(ids) - 1 : -1]
        expected = torch.log_softmax(logits, -1).gather(-1, torch.tensor(sample.token_ids)[:, None])[:, 0]
        assert (torch.tensor(sample.logprobs) - expected).abs().max().item() < 1e-4


def test_hf_prefill_once_matches_generate_greedy(qwen2: Any) -> None:
    ids = prompt(13)
    params = SamplingParams(n=2, max_new_tokens=10, temperature=0.0)
    b0 = one(HFEngine(qwen2), ids, params)
    b1 = one(HFEngine(qwen2, HFEngineConfig(prefill_once=True)), ids, params)
    assert [s.token_ids for s in b1.samples] == [s.token_ids for s in b0.samples]


def test_same_seed_same_samples_whatever_the_batch(qwen2: Any) -> None:
    params = SamplingParams(n=2, max_new_tokens=8, temperature=1.0, seed=42)
    ids = prompt(9)
    alone = one(NativeEngine(qwen2), ids, params)
    crowd = NativeEngine(qwen2).generate([GenerationRequest(prompt_ids=prompt(12, seed=s), params=params)
                                          for s in range(3)] + [GenerationRequest(prompt_ids=ids, params=params)])
    assert [s.token_ids for s in crowd[-1].samples] == [s.token_ids for s in alone.samples]


def test_samples_of_a_group_differ(qwen2: Any) -> None:
    out = one(NativeEngine(qwen2), prompt(9), SamplingParams(n=4, max_new_tokens=8, temperature=1.0, seed=0))
    assert len({tuple(s.token_ids) for s in out.samples}) > 1


def test_top_k_one_is_greedy(qwen2: Any) -> None:
    ids = prompt(9)
    greedy = one(NativeEngine(qwen2), ids, SamplingParams(max_new_tokens=8, temperature=0.0))
    top1 = one(NativeEngine(qwen2), ids, SamplingParams(max_new_tokens=8, temperature=1.0, top_k=1, seed=0))
    assert top1.samples[0].token_ids == greedy.samples[0].token_ids


def test_top_p_keeps_the_smallest_set_reaching_the_mass() -> None:
    # probabilities 0.5, 0.3, 0.2: top_p=0.7 keeps the first two (0.5 < 0.7 <= 0.8)
    logits = torch.log(torch.tensor([0.5, 0.3, 0.2]))
    kept = processed_logits(logits, SamplingParams(top_p=0.7)).isfinite().tolist()
    assert kept == [True, True, False]


def test_session_reuses_history(qwen2: Any) -> None:
    engine = NativeEngine(qwen2, NativeEngineConfig(block_size=4))
    conversation = engine.open_conversation()
    conversation.append(prompt(10))
    first = conversation.generate(SamplingParams(max_new_tokens=5, temperature=0.0))
    conversation.append(prompt(6, seed=9))
    conversation.generate(SamplingParams(max_new_tokens=5, temperature=0.0))
    assert conversation.token_ids[10:15] == first.token_ids
    assert engine.stats()["cached_tokens"] >= 10 + 5 - 1


def test_rows_of_many_requests_sample_as_each_would_alone() -> None:
    """Rows of requests with different seeds, temperatures, top-k/p and logprob modes, sampled in one
    call, give each row the token and logprob it gets sampled on its own."""
    from posttrain.rollout.engine.sampler import make_generator, sample_tokens

    logits = torch.randn(7, 50, generator=torch.Generator().manual_seed(0)) * 3  # [rows, V]
    params = [SamplingParams(temperature=1.0, seed=s) for s in range(3)] + [
        SamplingParams(temperature=0.7, top_k=5, seed=9), SamplingParams(temperature=0.7, top_k=5, seed=10),
        SamplingParams(temperature=1.0, top_p=0.8, seed=3, logprobs_mode="processed"),
        SamplingParams(temperature=0.0)]
    gens = [make_generator(p, 0, torch.device("cpu")) for p in params]
    together = sample_tokens(logits, params, gens)
    alone = [sample_tokens(logits[i:i + 1], [p], [make_generator(p, 0, torch.device("cpu"))])
             for i, p in enumerate(params)]
    assert together[0] == [a[0][0] for a in alone]
    assert together[1] == pytest.approx([a[1][0] for a in alone], abs=1e-6)


def _whole_vocab_inverse_cdf(weights: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """The one-level search the sampler's two levels stand for: one float64 running sum per row."""
    cdf = weights.double().cumsum(-1)
    return torch.searchsorted(cdf, (u * cdf[:, -1])[:, None], right=True)[:, 0]


@pytest.fixture(params=["kernel", "torch"])
def block_sums_by(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways of the sampler's first-level sums: `cpu_kernels` (where it builds) and torch's."""
    from posttrain.rollout.engine import cpu_kernels

    if request.param == "kernel" and not cpu_kernels.available():
        pytest.skip("no cpu_kernels here")
    if request.param == "torch":
        monkeypatch.setattr(cpu_kernels, "available", lambda: False)
    return str(request.param)


@pytest.mark.parametrize("vocab", [50, 256, 257, 1000, 49152])
def test_two_level_inverse_cdf_picks_the_whole_vocab_search_token(vocab: int, block_sums_by: str) -> None:
    from posttrain.rollout.engine.sampler import _inverse_cdf

    gen = torch.Generator().manual_seed(vocab)
    for scale, masked in ((1.0, False), (4.0, False), (2.0, True)):
        logits = torch.randn(64, vocab, generator=gen) * scale
        if masked:  # top-5: every other weight exactly 0
            logits = logits.masked_fill(logits < torch.topk(logits, 5, -1).values[:, -1:], float("-inf"))
        weights = (logits - logits.amax(-1, keepdim=True)).exp()
        u = torch.rand(64, generator=gen, dtype=torch.float64)
        picked, total = _inverse_cdf(weights, u)
        assert picked.tolist() == _whole_vocab_inverse_cdf(weights, u).tolist()
        assert torch.allclose(total, weights.double().sum(-1), rtol=1e-12)


def test_two_level_inverse_cdf_never_picks_a_zero_weight_at_the_edges(block_sums_by: str) -> None:
    """Draws at 0 and just below 1, with zero-weight blocks before, between and after the kept tokens
    (rounding can put the target on a level's last sum): the pick is always a token of positive weight."""
    from posttrain.rollout.engine.sampler import CDF_BLOCK, _inverse_cdf

    vocab = 5 * CDF_BLOCK + 7
    weights = torch.zeros(4, vocab)
    kept = [CDF_BLOCK + 3, 2 * CDF_BLOCK + 100, 3 * CDF_BLOCK - 1]
    weights[:, kept] = torch.tensor([1e-30, 0.7, 0.3])
    u = torch.tensor([0.0, 1.0 - 2**-53, 0.5, 1.0 - 1e-12], dtype=torch.float64)
    picked, _ = _inverse_cdf(weights, u)
    assert all(t in kept for t in picked.tolist())
    assert picked.tolist()[1] == kept[-1]
    assert picked.tolist()[0] == kept[0]
