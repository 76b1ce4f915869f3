"""The knowledge-serving workload and its measured runs: native with and without prefix caching, HF.

The workload (`knowledge_workload`): Q questions about ONE long document, each asked as its own
request of `group` samples; a prompt is the document's tokens, then the question's (encoded apart, so
every prompt starts with exactly the same document tokens). `measure_all` runs, in one process:
`native` (prefix caching on, every question), `native_tier_pressure` (the same with the device KV
budget below the working set, host and disk tiers behind it), `native_no_cache` (prefix caching off)
and the HF baselines `hf_b1` (each prompt prefilled once, KV expanded to the group) and `hf_b0`
(`generate(num_return_sequences=group)`). The last three can take a subset of the questions (their
cost per question does not depend on how many are asked; the JSON records how many each run served)
and are compared by rates (tokens per second), never by wall time.
Guarantees: every run serves the same prompts with the same sampling parameters and no stop tokens,
so each generates `group x new_tokens` tokens per question. Not here: the CLI (`knowledge.py`).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from posttrain.rollout.api import GenerationRequest, RequestOutput, SamplingParams
from posttrain.rollout.config import HFEngineConfig, NativeEngineConfig
from posttrain.rollout.engine.engine import NativeEngine
from posttrain.rollout.hf_engine import HFEngine

BLOCK_SIZE = 16
DOCUMENT_PREAMBLE = "Read the report below, then answer the question about it.\n"
TIER_KEYS = ("offloaded_tokens", "offloaded_blocks", "reloaded_tokens", "reloaded_blocks", "evicted_tokens",
             "spilled_to_disk_tokens", "read_from_disk_tokens", "read_from_host_tokens", "preemptions")


class KnowledgeSizes(BaseModel):
    """Workload sizes; the default preset finishes in about a minute on two cores, `full()` is the issue's."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    document_tokens: int = Field(4096, gt=0)
    """Tokens of the synthetic document (at least; it ends at a subsection boundary)."""
    questions: int = Field(16, gt=0)
    """Questions about the document, one request each."""
    group: int = Field(8, gt=0)
    """Samples per question (a GRPO group)."""
    new_tokens: int = Field(32, gt=0)
    """Tokens generated per sample (no stop tokens)."""
    hf_questions: int = Field(2, ge=0)
    """Questions served by the HF B1 baseline (the first ones); 0 skips it."""
    hf_b0_questions: int = Field(1, ge=0)
    """Questions served by the HF B0 baseline; 0 skips it."""
    no_cache_questions: int = Field(2, ge=0)
    """Questions served by the native engine with prefix caching off; 0 skips it."""
    tier_device_fraction: float = Field(0.5, gt=0, le=1)
    """Device KV budget of the tier-pressure run, as a fraction of the working set (at least the
    document plus one group)."""
    tier_host_fraction: float = Field(0.25, ge=0)
    """Host KV tier of the tier-pressure run, as a fraction of the working set; the rest spills to disk."""
    device_kv_tokens: int | None = Field(None, gt=0)
    """Device KV budget of the tier-pressure run in tokens (overrides `tier_device_fraction`)."""
    max_num_seqs: int = Field(512, gt=0)
    """Sequences the native engine decodes together (512: every sample of the full workload at once)."""

    @classmethod
    def full(cls) -> KnowledgeSizes:
        """64 questions x 8 samples over a 16K-token document; HF B1 on 2 questions, B0 and prefix
        caching off on 1 (8 samples each)."""
        return cls(document_tokens=16384, questions=64, hf_questions=2, hf_b0_questions=1, no_cache_questions=1)


def knowledge_workload(document: str, questions: Sequence[str], encode: Callable[[str], list[int]],
                       group: int, new_tokens: int, seed: int = 0) -> list[GenerationRequest]:
    """One request of `group` samples per question: the document's tokens, then the question's."""
    head = encode(DOCUMENT_PREAMBLE + document + "\n\n")
    return [GenerationRequest(prompt_ids=tuple(head + encode(f"Question: {q}\nAnswer:")), request_id=f"q{i}",
                              params=SamplingParams(n=group, max_new_tokens=new_tokens, temperature=1.0,
                                                    seed=seed + i))
            for i, q in enumerate(questions)]


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile, `q` in [0, 100]."""
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def _rates(requests: Sequence[GenerationRequest], outputs: list[RequestOutput], wall_s: float,
           ttfts: list[float]) -> dict[str, float]:
    output_tokens = sum(len(s.token_ids) for o in outputs for s in o.samples)
    prompt_tokens = sum(len(r.prompt_ids) * r.params.n for r in requests)
    return {"questions": len(requests), "sequences": sum(r.params.n for r in requests), "wall_s": wall_s,
            "output_tokens": output_tokens, "prompt_tokens": prompt_tokens,
            "output_tokens_per_s": output_tokens / wall_s, "prompt_tokens_per_s": prompt_tokens / wall_s,
            "ttft_mean_s": sum(ttfts) / len(ttfts), "ttft_p50_s": percentile(ttfts, 50),
            "ttft_p90_s": percentile(ttfts, 90)}


def run_native(model: Any, requests: Sequence[GenerationRequest], config: NativeEngineConfig) -> dict[str, Any]:
    """All requests submitted at once; TTFT of a question counts from that submission."""
    engine = NativeEngine(model, config)
    start = time.perf_counter()
    outputs = engine.generate(list(requests))
    result: dict[str, Any] = _rates(requests, outputs, time.perf_counter() - start,
                                    [o.metrics["ttft_s"] for o in outputs])
    stats = engine.stats()
    bytes_per_token = engine.runner.bytes_per_token
    result.update({"kv_cache_tokens": config.kv_cache_tokens, "host_kv_tokens": config.host_kv_tokens,
                   "prefix_caching": config.prefix_caching, "max_num_seqs": config.max_num_seqs,
                   "cached_prompt_tokens": stats["cached_tokens"],
                   "computed_prompt_tokens": stats["computed_prompt_tokens"],
                   "cache_hit_rate": stats["cached_tokens"] / max(1, stats["cached_tokens"]
                                                                  + stats["computed_prompt_tokens"]),
                   "steps": stats["steps"], "peak_kv_mb": stats["peak_kv_mb"], "decode_stage_peak_mb": stats.get("peak_decode_stage_mb", 0.0)})
    result.update({k: stats.get(k, 0) for k in TIER_KEYS})
    for kind in ("offloaded", "reloaded", "spilled_to_disk", "read_from_disk"):
        result[f"{kind}_mb"] = result[f"{kind}_tokens"] * bytes_per_token / 2**20
    return result


def run_hf(model: Any, requests: Sequence[GenerationRequest], prefill_once: bool,
           total_questions: int) -> dict[str, Any]:
    """Requests one after another (HFEngine serves them in order). TTFT here is each request's own
    (service) TTFT; `ttft_queued_mean_s_estimate` adds the wait behind earlier questions had all
    `total_questions` been asked: mean service TTFT + (Q - 1) / 2 x mean latency."""
    engine = HFEngine(model, HFEngineConfig(prefill_once=prefill_once))
    start = time.perf_counter()
    outputs = engine.generate(list(requests))
    wall = time.perf_counter() - start
    result: dict[str, Any] = _rates(requests, outputs, wall, [o.metrics["ttft_s"] for o in outputs])
    latency = sum(o.metrics["latency_s"] for o in outputs) / len(outputs)
    result["ttft_queued_mean_s_estimate"] = result["ttft_mean_s"] + (total_questions - 1) / 2 * latency
    result["cache_hit_rate"] = 0.0
    return result


def working_set_tokens(requests: Sequence[GenerationRequest], document_tokens: int) -> int:
    """KV tokens of the whole workload held at once: the document once, each question's tokens once
    (its group shares them), every sample's generated tokens, and one partly filled block for each
    question and each sample (a private part starts mid-block)."""
    return document_tokens + sum(len(r.prompt_ids) - document_tokens + BLOCK_SIZE
                                 + r.params.n * (r.params.max_new_tokens + BLOCK_SIZE) for r in requests)


def tier_budget(sizes: KnowledgeSizes, requests: Sequence[GenerationRequest], document_tokens: int) -> int:
    """Device KV tokens of the tier-pressure run: the given budget, else the fraction of the working
    set, but never below the document plus one group (nothing could run)."""
    one_group = working_set_tokens(requests[:1], document_tokens)
    wanted = sizes.device_kv_tokens or int(sizes.tier_device_fraction * working_set_tokens(requests, document_tokens))
    return max(wanted, one_group + BLOCK_SIZE)


def measure_all(model: Any, encode: Callable[[str], list[int]], document: str, questions: Sequence[str],
                sizes: KnowledgeSizes, log: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Every run of the module docstring on one document, with the ratios between them."""
    requests = knowledge_workload(document, questions, encode, sizes.group, sizes.new_tokens)
    document_tokens = len(encode(DOCUMENT_PREAMBLE + document + "\n\n"))
    working_set = working_set_tokens(requests, document_tokens)
    roomy = NativeEngineConfig(block_size=BLOCK_SIZE, kv_cache_tokens=working_set + 4 * BLOCK_SIZE,
                               max_num_seqs=sizes.max_num_seqs)
    runs: dict[str, Any] = {}
    log("native (prefix caching)")
    runs["native"] = run_native(model, requests, roomy)
    log("native, tier pressure")
    device = tier_budget(sizes, requests, document_tokens)
    with tempfile.TemporaryDirectory(prefix="bench-knowledge-kv-") as disk:
        tight = roomy.model_copy(update={"kv_cache_tokens": device, "disk_kv_dir": disk,
                                         "host_kv_tokens": int(sizes.tier_host_fraction * working_set)})
        runs["native_tier_pressure"] = run_native(model, requests, tight)
    if sizes.no_cache_questions:
        log("native, prefix caching off")
        runs["native_no_cache"] = run_native(model, requests[: sizes.no_cache_questions],
                                             roomy.model_copy(update={"prefix_caching": False}))
    if sizes.hf_questions:
        log("HF B1 (prefill once)")
        runs["hf_b1"] = run_hf(model, requests[: sizes.hf_questions], True, len(requests))
    if sizes.hf_b0_questions:
        log("HF B0 (generate)")
        runs["hf_b0"] = run_hf(model, requests[: sizes.hf_b0_questions], False, len(requests))
    return {"document_tokens": document_tokens, "prompt_tokens_mean": sum(len(r.prompt_ids) for r in requests)
            / len(requests), "working_set_tokens": working_set, "tier_device_kv_tokens": device,
            "runs": runs, "ratios": ratios(runs)}


def ratios(runs: dict[str, Any]) -> dict[str, float]:
    """Native's rates over each baseline's (and the tier-pressure run's over native's)."""
    native = runs["native"]
    out: dict[str, float] = {}
    for base in ("hf_b1", "hf_b0", "native_no_cache"):
        if base in runs:
            for metric in ("output_tokens_per_s", "prompt_tokens_per_s"):
                out[f"native_over_{base}_{metric}"] = native[metric] / runs[base][metric]
    if "hf_b1" in runs:
        out["hf_b1_queued_ttft_estimate_over_native_ttft"] = runs["hf_b1"]["ttft_queued_mean_s_estimate"] / \
            native["ttft_mean_s"]
    out["tier_pressure_over_native_output_tokens_per_s"] = (runs["native_tier_pressure"]["output_tokens_per_s"]
                                                            / native["output_tokens_per_s"])
    return out
