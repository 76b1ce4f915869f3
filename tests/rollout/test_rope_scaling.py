"""Every `rope_scaling` variant of `transformers` runs natively and matches HF past the trained length.

Each model is a tiny random Llama (one Qwen2) whose trained length (`original_max_position_embeddings`,
or `max_position_embeddings` for linear and dynamic) is 32; prompts are longer, or shorter and decoded
across it. The reference is always a fresh copy of the model, because the HF rotary module of dynamic
NTK keeps the largest length it has seen (a full forward of 60 tokens makes the next, shorter one use
the frequencies of 60).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch

from posttrain.rollout import GenerationRequest, NativeEngine, NativeEngineConfig, SamplingParams
from posttrain.rollout.engine.rope_keys import STATIC_KEY, RopeKeys, rope_length
from tests.rollout.conftest import full_logits, prompt

TRAINED = 32
VARIANTS: dict[str, tuple[dict[str, Any], int]] = {
    "linear": ({"rope_type": "linear", "factor": 2.0}, TRAINED),
    "dynamic": ({"rope_type": "dynamic", "factor": 2.0}, TRAINED),
    "yarn": ({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": TRAINED}, 4 * TRAINED),
    "yarn_attention_factor": ({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": TRAINED,
                               "attention_factor": 0.8, "beta_fast": 16.0, "beta_slow": 2.0}, 4 * TRAINED),
    "yarn_mscale": ({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": TRAINED,
                     "mscale": 1.0, "mscale_all_dim": 0.5}, 4 * TRAINED),
    "llama3": ({"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": TRAINED,
                "low_freq_factor": 1.0, "high_freq_factor": 4.0}, 8 * TRAINED),
    "longrope": ({"rope_type": "longrope", "original_max_position_embeddings": TRAINED, "factor": 4.0,
                  "short_factor": [1.0 + 0.1 * i for i in range(8)],
                  "long_factor": [1.0 + 0.5 * i for i in range(8)]}, 4 * TRAINED),
}
GREEDY = SamplingParams(max_new_tokens=10, temperature=0.0)


def scaled_model(variant: str, arch: str = "llama") -> Any:
    """A float32 tiny model (head_dim 16, GQA 4/2) with the variant's RoPE parameters."""
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    rope, max_positions = VARIANTS[variant]
    config_cls, model_cls = {"llama": (LlamaConfig, LlamaForCausalLM), "qwen2": (Qwen2Config, Qwen2ForCausalLM)}[arch]
    config = config_cls(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, head_dim=16, tie_word_embeddings=False,
                        max_position_embeddings=max_positions, rope_parameters={**rope, "rope_theta": 10000.0})
    torch.manual_seed(0)
    model = model_cls(config).eval()
    with torch.no_grad():
        model.lm_head.weight.mul_(8.0)
    return model


def hf_generate(model: Any, ids: list[int], max_new_tokens: int) -> tuple[list[int], torch.Tensor]:
    """Greedy tokens and raw step logits `[T, V]` of `generate` on a fresh copy (KV cache, one step per token)."""
    fresh = copy.deepcopy(model)
    out = fresh.generate(torch.tensor([ids]), max_new_tokens=max_new_tokens, do_sample=False, output_logits=True,
                         return_dict_in_generate=True, pad_token_id=0, eos_token_id=None)
    return out.sequences[0, len(ids):].tolist(), torch.stack([step[0] for step in out.logits]).float()


def native(model: Any, ids: list[int], params: SamplingParams = GREEDY, **overrides: Any) -> Any:
    config = NativeEngineConfig(trace_logits=True, block_size=4, **overrides)
    return NativeEngine(model, config).generate([GenerationRequest(prompt_ids=ids, params=params)])[0]


CASES = [(v, 44) for v in VARIANTS] + [("dynamic", 26), ("longrope", 26)]


@pytest.mark.parametrize(("variant", "prompt_len"), CASES)
def test_prefill_and_decode_match_transformers(variant: str, prompt_len: int) -> None:
    """Prompt 44 > 32 (or 26, decoding across 32); chunks of 8 must not change the frequencies."""
    model = scaled_model(variant)
    ids = prompt(prompt_len)
    prefill = full_logits(copy.deepcopy(model), ids)[-1]  # a full forward of the prompt
    tokens, steps = hf_generate(model, ids, GREEDY.max_new_tokens)
    sample = native(model, ids, max_prefill_tokens=8).samples[0]
    assert (sample.logits[0] - prefill).abs().max().item() < 1e-4
    assert sample.token_ids == tokens
    assert (sample.logits - steps).abs().max().item() < 1e-4


def test_qwen2_yarn_matches_transformers() -> None:
    model = scaled_model("yarn", arch="qwen2")
    ids = prompt(50)
    sample = native(model, ids, max_prefill_tokens=16).samples[0]
    tokens, steps = hf_generate(model, ids, GREEDY.max_new_tokens)
    assert sample.token_ids == tokens
    assert (sample.logits - steps).abs().max().item() < 1e-4


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_prefix_hit_equals_miss(variant: str) -> None:
    """Two prompts of 46 tokens share 40: the second reuses the first's KV and computes the same logits."""
    model = scaled_model(variant)
    shared = prompt(40)
    engine = NativeEngine(model, NativeEngineConfig(trace_logits=True, block_size=4))
    engine.generate([GenerationRequest(prompt_ids=shared + prompt(6, seed=7), params=GREEDY)])
    second = shared + prompt(6, seed=8)
    hit = engine.generate([GenerationRequest(prompt_ids=second, params=GREEDY)])[0].samples[0]
    miss = native(model, second, prefix_caching=False).samples[0]
    assert engine.stats()["cached_tokens"] >= 40
    assert hit.token_ids == miss.token_ids
    assert (hit.logits - miss.logits).abs().max().item() < 1e-5


@pytest.mark.parametrize("variant", ["dynamic", "longrope", "yarn"])
def test_group_computes_its_prompt_once(variant: str) -> None:
    model = scaled_model(variant)
    ids = prompt(41)
    engine = NativeEngine(model, NativeEngineConfig(block_size=4))
    out = engine.generate([GenerationRequest(prompt_ids=ids, params=SamplingParams(
        n=3, max_new_tokens=8, temperature=0.0))])[0]
    assert engine.stats()["cached_tokens"] == 2 * (len(ids) - 1)
    assert [s.token_ids for s in out.samples] == [hf_generate(model, ids, 8)[0]] * 3


def test_dynamic_prompt_of_another_length_recomputes_the_shared_prefix() -> None:
    """Above the trained length every length has its own frequencies: a 60-token prompt's KV is not
    what a 64-token prompt computes for the same 50 tokens, so it is not reused (and the result is
    the 64-token prompt's own)."""
    model = scaled_model("dynamic")
    shared = prompt(50)
    longer = shared + prompt(14, seed=8)
    tokens, steps = hf_generate(model, longer, GREEDY.max_new_tokens)
    engine = NativeEngine(model, NativeEngineConfig(trace_logits=True, block_size=4))
    engine.generate([GenerationRequest(prompt_ids=shared + prompt(10, seed=7), params=GREEDY)])
    got = engine.generate([GenerationRequest(prompt_ids=longer, params=GREEDY)])[0].samples[0]
    assert engine.stats()["cached_tokens"] == 0
    assert got.token_ids == tokens
    assert (got.logits - steps).abs().max().item() < 1e-4


def test_dynamic_prompts_within_the_trained_length_share_their_prefix() -> None:
    """Up to the trained length dynamic NTK is plain RoPE: prompts of 24 and 28 tokens share 20."""
    model = scaled_model("dynamic")
    shared = prompt(20)
    engine = NativeEngine(model, NativeEngineConfig(trace_logits=True, block_size=4))
    engine.generate([GenerationRequest(prompt_ids=shared + prompt(4, seed=7), params=GREEDY)])
    second = shared + prompt(8, seed=8)
    hit = engine.generate([GenerationRequest(prompt_ids=second, params=GREEDY)])[0].samples[0]
    assert engine.stats()["cached_tokens"] >= 20
    tokens, steps = hf_generate(model, second, GREEDY.max_new_tokens)
    assert hit.token_ids == tokens
    assert (hit.logits - steps).abs().max().item() < 1e-4


@pytest.mark.parametrize("variant", ["dynamic", "longrope"])
def test_preemption_recomputes_with_the_original_frequencies(variant: str) -> None:
    """Preempted sequences come back through the cache or recompute; prompts on both sides of 32."""
    model = scaled_model(variant)
    requests = [GenerationRequest(prompt_ids=prompt(n, seed=n), params=SamplingParams(
        max_new_tokens=16, temperature=0.0)) for n in (26, 30, 40, 44)]
    roomy = NativeEngine(model, NativeEngineConfig(block_size=4, trace_logits=True)).generate(requests)
    tight_engine = NativeEngine(model, NativeEngineConfig(block_size=4, kv_cache_tokens=96, trace_logits=True))
    tight = tight_engine.generate(requests)
    assert tight_engine.stats()["preemptions"] > 0
    for a, b in zip(tight, roomy, strict=True):
        assert a.samples[0].token_ids == b.samples[0].token_ids
        assert (a.samples[0].logits - b.samples[0].logits).abs().max().item() < 1e-5


def test_native_engine_leaves_the_hf_rotary_state_alone() -> None:
    """The HF dynamic module caches the frequencies of the longest length it saw; the engine must not
    change them (a trainer's forward on the same module would use them)."""
    model = scaled_model("dynamic")
    rotary = model.model.rotary_emb
    before = (rotary.inv_freq.clone(), rotary.max_seq_len_cached)
    native(model, prompt(70))
    assert torch.equal(rotary.inv_freq, before[0]) and rotary.max_seq_len_cached == before[1]


def test_rope_keys_by_hand() -> None:
    dynamic, longrope, static = RopeKeys(32, per_length=True), RopeKeys(32), RopeKeys()
    assert [rope_length(10, p) for p in (0, 9, 10, 11)] == [10, 10, 11, 12]
    assert [dynamic.key(n) for n in (5, 32, 33, 60)] == [STATIC_KEY, STATIC_KEY, 33, 60]
    assert [longrope.key(n) for n in (5, 32, 33, 60)] == [STATIC_KEY, STATIC_KEY, 1, 1]
    assert static.key(10_000) == STATIC_KEY
    # prompt 20 decoded to 40 tokens: positions 0..31 have lengths <= 32 (base key), 32.. do not
    assert dynamic.cacheable(20, 40) == 32 and longrope.cacheable(20, 40) == 32
    # prompt 40 (key 40 / 1): dynamic keeps only the prompt, longrope every token
    assert dynamic.cacheable(40, 50) == 40 and longrope.cacheable(40, 50) == 50
    assert dynamic.cacheable(40, 30) == 30 and static.cacheable(40, 50) == 50
    assert dynamic.length_of(60) == 60 and longrope.length_of(1) == 33 and dynamic.length_of(STATIC_KEY) is None
