"""Long-prompt workloads of the rollout benchmark: W5 (chunked prefill) and W6 (sparse attention).

W5 measures how a long prompt arriving mid-decode stalls the running decodes: the worst inter-token
latency (one engine step) of the decodes while the prompt is prefilled, per prefill chunk size.
W6 prefills one long context and teacher-forces a short continuation with exact attention and with
each sparse mode, reporting prefill time, decode speed and divergence from exact.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from posttrain.bench.rollout_workloads import BLOCK_SIZE, BenchSizes, random_ids
from posttrain.rollout.api import GenerationRequest, SamplingParams
from posttrain.rollout.config import AttentionConfig, NativeEngineConfig
from posttrain.rollout.engine.divergence import divergence_from_logits
from posttrain.rollout.engine.engine import NativeEngine


def _w5_one(model: Any, s: BenchSizes, chunk: int | None) -> dict[str, float]:
    vocab = model.config.vocab_size
    engine = NativeEngine(model, NativeEngineConfig(block_size=BLOCK_SIZE, max_prefill_tokens=chunk))
    steps_needed = s.w5_long_prompt_tokens // (chunk or s.w5_long_prompt_tokens) + 8
    decode_params = SamplingParams(max_new_tokens=steps_needed + 8, temperature=1.0, seed=0)
    decodes = [GenerationRequest(prompt_ids=random_ids(128, vocab, i), params=decode_params)
               for i in range(s.w5_decodes)]
    decode_seqs = [seq for group in engine.submit(decodes) for seq in group]
    while not all(seq.is_decoding for seq in decode_seqs):
        engine.step()
    before = []
    for _ in range(4):
        t0 = time.perf_counter()
        engine.step()
        before.append(time.perf_counter() - t0)
    long_request = GenerationRequest(prompt_ids=random_ids(s.w5_long_prompt_tokens, vocab, 99),
                                     params=SamplingParams(max_new_tokens=4, temperature=1.0, seed=0))
    (long_seq,) = engine.submit([long_request])[0]
    arrival = time.perf_counter()
    during = []
    while engine.has_work:
        measured = long_seq.first_token_s is None and any(seq.is_decoding for seq in decode_seqs)
        t0 = time.perf_counter()
        engine.step()
        if measured:
            during.append(time.perf_counter() - t0)
    ttft = (long_seq.first_token_s or arrival) - arrival
    return {"decode_step_s_before": statistics.median(before), "max_itl_s": max(during),
            "max_itl_over_baseline": max(during) / statistics.median(before), "long_prompt_ttft_s": ttft}


def w5_chunked_prefill(model: Any, s: BenchSizes) -> dict[str, Any]:
    result: dict[str, Any] = {"long_prompt_tokens": s.w5_long_prompt_tokens, "decodes": s.w5_decodes}
    for chunk in s.w5_chunk_sizes:
        result[f"chunk_{chunk or 'inf'}"] = _w5_one(model, s, chunk)
    return result


def w6_long_context(model: Any, s: BenchSizes) -> dict[str, Any]:
    vocab = model.config.vocab_size
    prompt = random_ids(s.w6_context_tokens, vocab, 5)
    continuation = random_ids(s.w6_new_tokens, vocab, 6)
    modes = {
        "exact": AttentionConfig(),
        "window": AttentionConfig(kind="window", sink_tokens=4, window_tokens=s.w6_window_tokens),
        "quest": AttentionConfig(kind="quest", top_k_blocks=s.w6_quest_blocks),
    }
    result: dict[str, Any] = {"context_tokens": s.w6_context_tokens, "window_tokens": s.w6_window_tokens,
                              "quest_blocks": s.w6_quest_blocks, "block_size": BLOCK_SIZE}
    exact_logits = None
    for name, attention in modes.items():
        config = NativeEngineConfig(block_size=BLOCK_SIZE, attention=attention, prefix_caching=False,
                                    kv_cache_tokens=s.w6_context_tokens + 4 * BLOCK_SIZE + s.w6_new_tokens)
        engine = NativeEngine(model, config)
        logits, ttft, total = engine.teacher_forced(prompt, continuation)
        row: dict[str, float] = {"prefill_s": ttft, "decode_tokens_per_s": (len(continuation) - 1) / (total - ttft),
                                 "kv_peak_mb": engine.stats()["peak_kv_mb"]}
        if exact_logits is None:
            exact_logits = logits
        else:
            row.update(divergence_from_logits(exact_logits, logits, continuation))
        result[name] = row
    for name in ("window", "quest"):
        result[f"{name}_decode_speedup"] = result[name]["decode_tokens_per_s"] / result["exact"]["decode_tokens_per_s"]
        result[f"{name}_prefill_speedup"] = result["exact"]["prefill_s"] / result[name]["prefill_s"]
    return result
