"""The rollout benchmark's workloads W1-W6, each run against its baselines in the same process.

Every function takes a model and a `BenchSizes` and returns a JSON-ready dict of measurements and
ratios. Baselines: B0 = `transformers` `generate(num_return_sequences=N)` (`HFEngine`), B1 = HF with
each prompt prefilled once and its KV expanded to the N samples (`HFEngineConfig(prefill_once=True)`).
Prompts are random token ids; no stop tokens, so every engine generates the same number of tokens.
"""

from __future__ import annotations

import functools
import tempfile
import time
from collections.abc import Callable
from typing import Any

import torch
from pydantic import BaseModel, ConfigDict

from posttrain.rollout.api import GenerationRequest, RolloutEngine, SamplingParams
from posttrain.rollout.config import HFEngineConfig, NativeEngineConfig
from posttrain.rollout.engine.engine import NativeEngine
from posttrain.rollout.hf_engine import HFEngine


class BenchSizes(BaseModel):
    """Workload sizes (the issue's full sizes by default; `quick()` scales them down)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    w1_prompts: int = 4
    w1_group: int = 8
    w1_prompt_tokens: int = 2048
    w1_new_tokens: int = 64
    w2_sessions: int = 4
    w2_turns: int = 8
    w2_tool_tokens: int = 256
    w2_new_tokens: int = 64
    w3_requests: int = 32
    w3_shared_tokens: int = 2048
    w3_unique_tokens: int = 128
    w3_new_tokens: int = 16
    w4_device_fraction: float = 0.3
    w5_decodes: int = 8
    w5_long_prompt_tokens: int = 8192
    w5_chunk_sizes: tuple[int | None, ...] = (256, 1024, None)
    w6_context_tokens: int = 32768
    w6_new_tokens: int = 32
    w6_window_tokens: int = 1024
    w6_quest_blocks: int = 64
    w7_prompts: int = 4
    w7_group: int = 8
    w7_prompt_tokens: int = 200
    w7_new_tokens: int = 64
    w7_rounds: int = 3

    @classmethod
    def quick(cls) -> BenchSizes:
        return cls(w1_prompt_tokens=512, w1_new_tokens=32, w2_tool_tokens=64, w2_new_tokens=16,
                   w3_shared_tokens=512, w3_unique_tokens=32, w3_new_tokens=8, w5_long_prompt_tokens=2048,
                   w6_context_tokens=4096, w6_new_tokens=16, w6_window_tokens=512, w6_quest_blocks=32,
                   w7_new_tokens=32)


BLOCK_SIZE = 16


def random_ids(length: int, vocab: int, seed: int) -> list[int]:
    return torch.randint(3, vocab, (length,), generator=torch.Generator().manual_seed(seed)).tolist()


def kv_mb(model: Any, num_tokens: int) -> float:
    """KV bytes of `num_tokens` tokens for `model`, in MiB (what a contiguous cache must hold)."""
    c = model.config
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    return 2 * c.num_hidden_layers * c.num_key_value_heads * head_dim * 4 * num_tokens / 2**20


def timed(engine: RolloutEngine, requests: list[GenerationRequest]) -> tuple[float, list[Any]]:
    start = time.perf_counter()
    outputs = engine.generate(requests)
    return time.perf_counter() - start, outputs


def summary(engine: RolloutEngine, wall_s: float, outputs: list[Any], kv_peak_mb: float) -> dict[str, float]:
    stats = engine.stats()
    generated = sum(len(s.token_ids) for o in outputs for s in o.samples)
    ttfts = [o.metrics.get("ttft_s", 0.0) for o in outputs]
    return {"wall_s": wall_s, "tokens_per_s": generated / wall_s, "ttft_mean_s": sum(ttfts) / len(ttfts),
            "computed_tokens": stats.get("computed_tokens", 0), "cached_tokens": stats.get("cached_tokens", 0),
            "kv_peak_mb": kv_peak_mb, "decode_stage_peak_mb": stats.get("peak_decode_stage_mb", 0.0)}


def engines(model: Any, config: NativeEngineConfig) -> dict[str, Callable[[], RolloutEngine]]:
    return {"native": lambda: NativeEngine(model, config), "B0": lambda: HFEngine(model),
            "B1": lambda: HFEngine(model, HFEngineConfig(prefill_once=True))}


def add_ratios(result: dict[str, Any], metric: str = "wall_s") -> None:
    native = result["native"][metric]
    for base in ("B0", "B1"):
        if base in result:
            result[f"speedup_vs_{base}"] = result[base][metric] / native


def w1_grpo_group(model: Any, s: BenchSizes) -> dict[str, Any]:
    vocab = model.config.vocab_size
    requests = [GenerationRequest(prompt_ids=random_ids(s.w1_prompt_tokens, vocab, i), params=SamplingParams(
        n=s.w1_group, max_new_tokens=s.w1_new_tokens, temperature=1.0, seed=i)) for i in range(s.w1_prompts)]
    result: dict[str, Any] = {}
    config = NativeEngineConfig(block_size=BLOCK_SIZE)
    for name, make in engines(model, config).items():
        engine = make()
        wall, outputs = timed(engine, requests)
        seqs = s.w1_prompts * s.w1_group
        if isinstance(engine, NativeEngine):
            peak = engine.stats()["peak_kv_mb"]
            result["max_waste_slots"] = engine.stats()["max_waste_slots"]
        else:
            shared = s.w1_prompt_tokens if name == "B1" else 0
            peak = kv_mb(model, (seqs * (s.w1_prompt_tokens + s.w1_new_tokens) - shared * (s.w1_group - 1))
                         // s.w1_prompts)
        result[name] = summary(engine, wall, outputs, peak)
    add_ratios(result)
    return result


def run_sessions(engine: RolloutEngine, model: Any, s: BenchSizes) -> tuple[float, list[float]]:
    """W2's conversation: every turn each session gets tool tokens and generates; (wall, ttft per turn)."""
    sessions = [engine.open_conversation() for _ in range(s.w2_sessions)]
    params = SamplingParams(max_new_tokens=s.w2_new_tokens, temperature=1.0, seed=0)
    ttfts = []
    start = time.perf_counter()
    for turn in range(s.w2_turns):
        for i, session in enumerate(sessions):
            session.append(random_ids(s.w2_tool_tokens, model.config.vocab_size, 1000 * i + turn))
        outputs = engine.generate([x.request(params) for x in sessions])
        for x, out in zip(sessions, outputs, strict=True):
            x.record(out)
        ttfts.append(sum(o.metrics["ttft_s"] for o in outputs) / len(outputs))
    return time.perf_counter() - start, ttfts


def w2_multi_turn(model: Any, s: BenchSizes) -> dict[str, Any]:
    result: dict[str, Any] = {}
    context = s.w2_turns * (s.w2_tool_tokens + s.w2_new_tokens)
    for name, make in engines(model, NativeEngineConfig(block_size=BLOCK_SIZE)).items():
        engine = make()
        wall, ttfts = run_sessions(engine, model, s)
        stats = engine.stats()
        generated = s.w2_sessions * s.w2_turns * s.w2_new_tokens
        peak = stats["peak_kv_mb"] if name == "native" else kv_mb(model, context)
        result[name] = {"wall_s": wall, "tokens_per_s": generated / wall, "ttft_turn1_s": ttfts[0],
                        "ttft_turn2_s": ttfts[min(1, len(ttfts) - 1)], "ttft_last_turn_s": ttfts[-1],
                        "ttft_last_over_first": ttfts[-1] / ttfts[0],
                        "ttft_last_over_second": ttfts[-1] / ttfts[min(1, len(ttfts) - 1)],
                        "computed_tokens": stats["computed_tokens"], "cached_tokens": stats["cached_tokens"],
                        "kv_peak_mb": peak, "decode_stage_peak_mb": stats.get("peak_decode_stage_mb", 0.0)}
    add_ratios(result)
    return result


def w3_shared_system_prompt(model: Any, s: BenchSizes) -> dict[str, Any]:
    vocab = model.config.vocab_size
    shared = random_ids(s.w3_shared_tokens, vocab, 7)
    params = SamplingParams(max_new_tokens=s.w3_new_tokens, temperature=1.0, seed=0)
    requests = [GenerationRequest(prompt_ids=shared + random_ids(s.w3_unique_tokens, vocab, 100 + i),
                                  params=params) for i in range(s.w3_requests)]
    result: dict[str, Any] = {}
    for name, make in engines(model, NativeEngineConfig(block_size=BLOCK_SIZE)).items():
        engine = make()
        wall, outputs = timed(engine, requests)
        peak = engine.stats().get("peak_kv_mb", kv_mb(model, s.w3_shared_tokens + s.w3_unique_tokens))
        result[name] = summary(engine, wall, outputs, peak)
        if isinstance(engine, NativeEngine):
            computed = engine.stats()["computed_prompt_tokens"]
            result[name]["computed_prompt_tokens"] = computed
            result["recomputed_beyond_shared"] = computed - s.w3_shared_tokens
            result["unique_tokens"] = s.w3_requests * s.w3_unique_tokens
    add_ratios(result)
    return result


def w4_tiered(model: Any, s: BenchSizes) -> dict[str, Any]:
    working_set = s.w2_sessions * s.w2_turns * (s.w2_tool_tokens + s.w2_new_tokens)
    device_tokens = int(working_set * s.w4_device_fraction)
    result: dict[str, Any] = {"working_set_tokens": working_set, "device_kv_tokens": device_tokens}
    with tempfile.TemporaryDirectory(prefix="bench-kv-") as disk:
        variants = {
            "recompute": NativeEngineConfig(block_size=BLOCK_SIZE, kv_cache_tokens=device_tokens),
            "host_offload": NativeEngineConfig(block_size=BLOCK_SIZE, kv_cache_tokens=device_tokens,
                                               host_kv_tokens=4 * working_set),
            "disk_offload": NativeEngineConfig(block_size=BLOCK_SIZE, kv_cache_tokens=device_tokens,
                                               disk_kv_dir=disk),
        }
        for name, config in variants.items():
            engine = NativeEngine(model, config)
            wall, ttfts = run_sessions(engine, model, s)
            stats = engine.stats()
            keys = ("computed_prompt_tokens", "cached_tokens", "offloaded_tokens", "reloaded_tokens",
                    "spilled_to_disk_tokens", "read_from_disk_tokens", "preemptions", "peak_kv_mb")
            result[name] = {"wall_s": wall, "ttft_last_turn_s": ttfts[-1], **{k: stats.get(k, 0) for k in keys}}
    for name in ("host_offload", "disk_offload"):
        result[f"{name}_speedup_vs_recompute"] = result["recompute"]["wall_s"] / result[name]["wall_s"]
    return result


def _packed_product(weights: list[torch.Tensor], biases: list[torch.Tensor | None], linear: Any, i: int,
                    x: torch.Tensor) -> torch.Tensor:  # fmt: skip
    return linear(x, weights[i], biases[i])  # type: ignore[no-any-return]


def projections(model: Any, s: BenchSizes) -> dict[str, Any]:
    """The engine's CPU projections against `F.linear` over all of the model's linear layers, per
    number of input rows: `project` (the transposed product the unpacked path uses) and each prepacked
    form `packed.linear` applies (oneDNN's layout, and `cpu_kernels`'s panels where it builds). The best
    of several alternating rounds, in milliseconds per pass over every layer, and the ratios."""
    from posttrain.rollout.engine import cpu_kernels
    from posttrain.rollout.engine.model import project
    from posttrain.rollout.engine.packed import ONEDNN, linear, prepack

    layers = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    forms: dict[str, Callable[[int, torch.Tensor], torch.Tensor]] = {
        "linear": lambda i, x: torch.nn.functional.linear(x, layers[i].weight, layers[i].bias),
        "project": lambda i, x: project(layers[i], x)}
    packed_forms = [*(["onednn"] if ONEDNN else []), *(["panels"] if cpu_kernels.available() else [])]
    for form in packed_forms:
        with torch.no_grad():
            weights = [prepack(m.weight, form) for m in layers]  # type: ignore[arg-type]
        forms[form] = functools.partial(_packed_product, weights, [m.bias for m in layers], linear)
    result: dict[str, Any] = {}
    for rows in (1, 2, 4, 8, 16, 32, 64, 128, 256):
        inputs = [torch.randn(rows, m.in_features) for m in layers]
        best = dict.fromkeys(forms, float("inf"))
        passes = max(2, 32 // rows)
        with torch.no_grad():
            for _ in range(7):
                for name, fn in forms.items():
                    start = time.perf_counter()
                    for _ in range(passes):
                        for i, x in enumerate(inputs):
                            fn(i, x)
                    best[name] = min(best[name], (time.perf_counter() - start) / passes * 1e3)
        entry = {f"{name}_ms": ms for name, ms in best.items()}
        entry["speedup"] = best["linear"] / best["project"]
        if "panels" in best and "onednn" in best:
            entry["panels_vs_onednn"] = best["onednn"] / best["panels"]
        result[f"rows_{rows}"] = entry
    return result
