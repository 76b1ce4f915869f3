"""`posttrain bench rollout`: native engine vs HF baselines on workloads W1-W7, in one run.

Usage: `posttrain bench rollout [--quick] [--json] [--out DIR] [--models small,medium] [--workloads W1,W3]`.
Random-weight Qwen2 models (about 6M and 30M parameters, float32, 2 threads) are built from configs;
`smollm2` is SmolLM2-135M-Instruct from the packaged GGUF (`posttrain.train.models.load_model`, its
default workload W7: a GRPO step on real text). Nothing is downloaded. Every figure is reported next
to its baseline measured in the same run, and as a ratio; wall times are only comparable within one run. `--quick` scales the sizes down (recorded in the
JSON) so a run takes a few minutes on two cores. Writes `DIR/rollout.json` (default bench/results).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Callable
from typing import Any

from posttrain.bench.report import emit_report

MODELS: dict[str, dict[str, Any]] = {
    "small": {"vocab_size": 8192, "hidden_size": 256, "intermediate_size": 688, "num_hidden_layers": 5,
              "num_attention_heads": 4, "num_key_value_heads": 2},
    "medium": {"vocab_size": 16384, "hidden_size": 512, "intermediate_size": 1376, "num_hidden_layers": 8,
               "num_attention_heads": 8, "num_key_value_heads": 2},
    # Two layers shaped like Qwen2.5-0.5B's (hidden 896, 14 query / 2 KV heads, MLP 4864). Not in the
    # default run: it shows how the per-layer balance of attention against the linear layers, which
    # sets the W2 TTFT ratio and does not depend on depth, looks at a real model's width.
    "wide": {"vocab_size": 8192, "hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 2,
             "num_attention_heads": 14, "num_key_value_heads": 2},
    # SmolLM2-135M-Instruct (hidden 576, 30 layers, 9 query / 3 KV heads, vocab 49,152), loaded, not built.
    "smollm2": {},
}
PRETRAINED = {"smollm2": "smollm2-135m"}
"""Models loaded through `posttrain.train.models.load_model` (a preset name) instead of built at random."""
DEFAULT_WORKLOADS = "W1,W2,W3,W4,W5,W6,W7,proj"
PRETRAINED_WORKLOADS = "W7"
"""What runs on a pretrained model unless `--workloads` says otherwise (W1-W6 at full size take long)."""


def build_model(name: str) -> Any:
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    if name in PRETRAINED:
        from posttrain.train.models import ModelConfig, load_model

        return load_model(ModelConfig(preset=PRETRAINED[name]))[0]
    torch.manual_seed(0)
    config = Qwen2Config(**MODELS[name], max_position_embeddings=65536, tie_word_embeddings=True)
    return Qwen2ForCausalLM(config).eval()


def _workloads() -> dict[str, Callable[[Any, Any], dict[str, Any]]]:
    from posttrain.bench import rollout_long as long
    from posttrain.bench import rollout_text as text
    from posttrain.bench import rollout_workloads as w

    return {"W1": w.w1_grpo_group, "W2": w.w2_multi_turn, "W3": w.w3_shared_system_prompt,
            "W4": w.w4_tiered, "W5": long.w5_chunked_prefill, "W6": long.w6_long_context,
            "W7": text.w7_text_group, "proj": w.projections}


def targets(results: dict[str, Any]) -> dict[str, Any]:
    """The issue's targets, checked against one model's results (None where not measured)."""
    def get(*keys: str) -> Any:
        node: Any = results
        for key in keys:
            if not isinstance(node, dict) or key not in node:
                return None
            node = node[key]
        return node

    def check(value: Any, ok: Callable[[Any], bool]) -> dict[str, Any]:
        return {"value": value, "met": None if value is None else bool(ok(value))}

    chunk_small, chunk_inf = get("W5", "chunk_256", "max_itl_s"), get("W5", "chunk_inf", "max_itl_s")
    reload_ratio = get("W4", "host_offload_speedup_vs_recompute")
    return {
        "W1 >= 4x B0": check(get("W1", "speedup_vs_B0"), lambda v: v >= 4),
        "W1 >= 1.5x B1": check(get("W1", "speedup_vs_B1"), lambda v: v >= 1.5),
        "W2 >= 3x B0": check(get("W2", "speedup_vs_B0"), lambda v: v >= 3),
        "W2 TTFT turn last <= 1.5x turn 1": check(get("W2", "native", "ttft_last_over_first"), lambda v: v <= 1.5),
        "W3 recomputed == unique": check(get("W3", "recomputed_beyond_shared"),
                                         lambda v: v == get("W3", "unique_tokens")),
        "W4 reload faster than recompute": check(reload_ratio, lambda v: v > 1),
        "W5 chunked ITL below unchunked": check(
            None if chunk_small is None or chunk_inf is None else chunk_inf / chunk_small, lambda v: v > 1),
        "KV waste < 1 block per sequence": check(get("W1", "max_waste_slots"), lambda v: v < 16),
        "W7 >= 4x B0": check(get("W7", "speedup_vs_B0"), lambda v: v >= 4),
        "W7 >= 4x generate": check(get("W7", "speedup_vs_generate"), lambda v: v >= 4),
    }


def _shape(model: Any) -> dict[str, Any]:
    c = model.config
    keys = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
            "num_key_value_heads")
    return {k: getattr(c, k) for k in keys}


def _print_table(report: dict[str, Any]) -> None:
    for model_name, per_model in report["results"].items():
        print(f"== model {model_name} ({report['models'][model_name]['parameters'] / 1e6:.1f}M params)")
        for workload, result in per_model.items():
            print(f"-- {workload}")
            for key, value in result.items():
                if isinstance(value, dict):
                    cells = ", ".join(f"{k}={_fmt(v)}" for k, v in value.items())
                    print(f"   {key:<14} {cells}")
                else:
                    print(f"   {key:<14} {_fmt(value)}")
        print("-- targets")
        for name, verdict in report["targets"][model_name].items():
            print(f"   {name:<36} {_fmt(verdict['value']):>10}  met={verdict['met']}")


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="posttrain bench rollout", description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--out", default="bench/results", help="directory for rollout.json")
    parser.add_argument("--quick", action="store_true", help="scaled-down sizes (a few minutes on 2 cores)")
    parser.add_argument("--models", default=None, help="comma list of small,medium,wide,smollm2 (default"
                        " small,medium; quick: small)")
    parser.add_argument("--workloads", default=None,
                        help=f"comma list of W1..W7 and proj (projection micro-benchmark); default {DEFAULT_WORKLOADS}"
                        f", {PRETRAINED_WORKLOADS} on smollm2")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    from posttrain.bench.rollout_workloads import BenchSizes

    torch.set_num_threads(args.threads)
    sizes = BenchSizes.quick() if args.quick else BenchSizes()
    model_names = (args.models or ("small" if args.quick else "small,medium")).split(",")
    table = _workloads()
    report: dict[str, Any] = {
        "command": "posttrain bench rollout " + " ".join(argv), "quick": args.quick,
        "sizes": sizes.model_dump(), "threads": args.threads, "torch": torch.__version__,
        "machine": platform.machine(), "cpus": os.cpu_count(), "models": {}, "results": {}, "targets": {},
    }
    start = time.perf_counter()
    for name in model_names:
        model = build_model(name)
        report["models"][name] = {**_shape(model), "parameters": sum(p.numel() for p in model.parameters())}
        default = PRETRAINED_WORKLOADS if name in PRETRAINED else DEFAULT_WORKLOADS
        chosen = [w.strip() for w in (args.workloads or default).split(",")]
        results: dict[str, Any] = {}
        for workload in chosen:
            print(f"[bench rollout] {name} {workload}", file=sys.stderr, flush=True)
            results[workload] = table[workload](model, sizes)
        report["results"][name] = results
        report["targets"][name] = targets(results)
    report["total_wall_s"] = time.perf_counter() - start
    emit_report(report, args.out, "rollout.json", args.json, _print_table)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
