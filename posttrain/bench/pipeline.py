"""`posttrain bench pipeline`: the RL loop's samples/s against TRL's `GRPOTrainer`, in one run.

Usage: `posttrain bench pipeline [--model tiny|smollm2] [--quick] [--json] [--out DIR] [--steps N] [--rounds R]
[--threads T] [--tasks-per-step N]`.
Both sides train the same model (`--model tiny`: a randomly initialised Qwen2 saved once to a temporary
directory, with a BPE tokenizer fitted on rendered arithmetic prompts; `--model smollm2`:
SmolLM2-135M-Instruct from the directory `load_model` converts the packaged GGUF into, with LoRA adapters
and a fixed system prompt) on prompts from the same task pool and split, with the same group size,
completion budget, temperature, prompts per step, reward (the numeric verifier), loss clip range,
learning rate, micro-batch size, LoRA settings and torch threads; no KL term, one optimisation epoch.
The posttrain side is the real loop (`posttrain.train.loop.train`) with filtering off and evaluation cut
to the minimum; its rate and stage times come from `metrics.jsonl` (`time/*_s`), its weight-sync times
from a clock around the engine's `update_weights`. The TRL side (`posttrain.bench.pipeline_trl`) times
optimiser steps with a callback and its stages by wrapping the trainer's methods. Both report samples/s,
completion tokens/s and the median seconds per step in generate, verify, learn, sync and the rest. On both sides the first step is a warm-up and is not timed, and
model loading and evaluation are outside the timed span. Each round runs both sides, which one goes
first alternating; the report gives per-round rates, their medians and the ratio of the medians, plus
the load average before and after (the figures are only comparable within one run). Writes `DIR/pipeline.json`.
Not measured: learning progress (a random model earns almost no reward), GPU behaviour, or memory.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from posttrain.bench.report import emit_report
from posttrain.config import StrictModel


class PipelineSettings(StrictModel):
    """What both sides share; recorded in the report."""

    ops: list[str] = Field(default_factory=lambda: ["add", "sub", "mul", "multistep"])
    """Arithmetic operations (one domain each) the prompts come from."""
    level: str = "easy"
    """Arithmetic difficulty level."""
    group_size: int = 8
    """Completions per prompt (GRPO group)."""
    tasks_per_step: int = 16
    """Prompts per optimisation step."""
    max_new_tokens: int = 16
    """Completion budget in tokens."""
    temperature: float = 1.0
    """Sampling temperature."""
    lr: float = 1e-5
    """AdamW learning rate."""
    micro_batch_size: int = 64
    """Completions per forward/backward pass."""
    threads: int = 2
    """torch CPU threads."""
    warmup_steps: int = 1
    """Untimed steps at the start of each side's run."""
    steps: int = 16
    """Timed steps per side and round."""
    rounds: int = 5
    """posttrain/TRL alternations; the medians over rounds are reported."""
    vocab_size: int = 384
    """Tokenizer (and model) vocabulary."""
    hidden_size: int = 128
    """Model width."""
    num_layers: int = 4
    """Decoder layers."""
    intermediate_size: int = 384
    """MLP width."""
    seed: int = 0
    """Seed for the model, the prompts and sampling."""
    model: Literal["tiny", "smollm2"] = "tiny"
    """tiny: the random Qwen2 above, built per run; smollm2: SmolLM2-135M-Instruct from the packaged GGUF."""
    system_prompt: str | None = None
    """System message before every prompt (None: none, or the chat template's default)."""
    lora_rank: int | None = None
    """LoRA rank on every linear layer but the head, on both sides; None trains all weights."""
    lora_alpha: int = 32
    """LoRA scaling numerator (the update is scaled by alpha / rank)."""

    @property
    def samples_per_step(self) -> int:
        return self.group_size * self.tasks_per_step


SYSTEM_PROMPT = (
    "You are a careful maths tutor who helps students check their homework. For every question, first "
    "restate the numbers involved and the operation that is asked for. Then work through the calculation "
    "one step at a time, writing down each intermediate result on its own line, carrying digits "
    "explicitly where needed. When the question has several operations, follow the usual order of "
    "operations and say which one you are doing. Finally, double-check the result by estimating it, and "
    "end with a line of the form 'Answer: <number>'."
)
"""The smollm2 runs' fixed system message: realistic instructions that bring a chat-templated arithmetic
prompt to about 128 SmolLM2 tokens and ask for worked answers, so completions run long."""


def default_settings(model: str, quick: bool) -> PipelineSettings:
    """The defaults for `model` (`--quick`: 2 timed steps, 1 round)."""
    if model == "tiny":
        return PipelineSettings(steps=2, rounds=1) if quick else PipelineSettings()
    return PipelineSettings(
        model="smollm2", system_prompt=SYSTEM_PROMPT, lora_rank=16, lora_alpha=32, lr=1e-4,
        tasks_per_step=4, max_new_tokens=128, micro_batch_size=8, steps=2 if quick else 3, rounds=1 if quick else 2,
    )


def domains_config(settings: PipelineSettings) -> Any:
    from posttrain.tasks.families.arithmetic import ArithmeticConfig
    from posttrain.tasks.registry import DomainEntry, DomainsConfig

    family = ArithmeticConfig(ops=settings.ops, levels=[settings.level])  # type: ignore[arg-type]
    return DomainsConfig(seed=settings.seed, domains=[DomainEntry(family=family)])


def build_model_dir(settings: PipelineSettings, pool: Any, out_dir: Path) -> Path:
    """The model directory both sides load: SmolLM2's converted HF directory (cached by `load_model`), or a
    tiny random Qwen2 and a tokenizer fitted on rendered train prompts, saved to `out_dir`."""
    import random

    if settings.model == "smollm2":
        from posttrain.train.models import smollm2_hf_dir

        return smollm2_hf_dir()

    from posttrain.train.base_model import train_tokenizer
    from posttrain.train.models import TinyModelConfig, tiny_random

    rng = random.Random(settings.seed)
    texts = [f"Q: {t.prompt_text()}\nA: {t.answer}" for d in pool.registry.ids()
             for t in pool.sample(d, 500, "train", rng)]
    tokenizer = train_tokenizer(texts, settings.vocab_size)
    model = tiny_random(TinyModelConfig(
        vocab_size=len(tokenizer), hidden_size=settings.hidden_size, num_layers=settings.num_layers,
        num_heads=4, num_kv_heads=2, intermediate_size=settings.intermediate_size, max_positions=512,
        seed=settings.seed,
    ))
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return out_dir


def rate_from_step_times(ends_s: Sequence[float], samples_per_step: int, warmup_steps: int) -> dict[str, Any]:
    """Samples/s over the steps after the warm-up, from each step's end time (seconds, monotonic)."""
    timed = list(ends_s[warmup_steps - 1:]) if warmup_steps else [0.0, *ends_s]
    span_s = timed[-1] - timed[0]
    num_steps = len(timed) - 1
    step_s = [b - a for a, b in zip(timed, timed[1:], strict=False)]
    return {
        "samples_per_s": num_steps * samples_per_step / span_s,
        "timed_steps": num_steps,
        "median_step_s": statistics.median(step_s),
    }


def run_posttrain(settings: PipelineSettings, model_dir: Path, run_dir: Path) -> dict[str, Any]:
    """One run of the real loop: step end times, stage times and completion tokens from its `metrics.jsonl`;
    weight-sync times from a clock around the engine's `update_weights`."""
    from posttrain.rollout.engine.engine import NativeEngine
    from posttrain.train.config import TrainConfig
    from posttrain.train.loop import train

    lora = {"r": settings.lora_rank, "alpha": settings.lora_alpha} if settings.lora_rank else None
    config = TrainConfig.model_validate({
        "seed": settings.seed,
        "steps": settings.warmup_steps + settings.steps,
        "tasks_per_step": settings.tasks_per_step,
        "threads": settings.threads,
        "model": {"path": str(model_dir)},
        "domains": domains_config(settings).model_dump(),
        "rollout": {"group_size": settings.group_size, "max_new_tokens": settings.max_new_tokens,
                    "temperature": settings.temperature, "system_prompt": settings.system_prompt},
        "filter": {"enabled": False},
        "policy": {"lr": settings.lr, "micro_batch_size": settings.micro_batch_size,
                   "temperature": settings.temperature, "epochs": 1, "lora": lora,
                   "loss": {"clip_low": 0.2, "clip_high": 0.28, "kl_beta": 0.0}},
        "eval": {"tasks_per_domain": 1, "max_new_tokens": 1},
    })
    sync_s: list[float] = []
    original = NativeEngine.update_weights

    def timed_sync(engine: NativeEngine, *args: Any, **kwargs: Any) -> None:
        start = time.perf_counter()
        original(engine, *args, **kwargs)
        sync_s.append(time.perf_counter() - start)

    NativeEngine.update_weights = timed_sync  # type: ignore[method-assign,assignment]
    try:
        train(config, run_dir, log=lambda message: print(message, file=sys.stderr))
    finally:
        NativeEngine.update_weights = original  # type: ignore[method-assign]
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line]
    samples = [_domain_sum(row, "samples") for row in rows]
    if any(n != settings.samples_per_step for n in samples):
        raise RuntimeError(f"posttrain steps graded {samples} samples, expected {settings.samples_per_step} each")
    stages = [{
        "step_s": row["time/step_s"], "generate_s": row["time/generate_s"], "verify_s": row["time/verify_s"],
        "learn_s": row["time/learn_s"], "sync_s": sync,
        "other_s": row["time/other_s"] - sync, "completion_tokens": _domain_sum(row, "response_tokens", "samples"),
    } for row, sync in zip(rows, sync_s, strict=True)][settings.warmup_steps:]
    return {"ends_s": [row["elapsed_s"] for row in rows], "stages": stages}


def _domain_sum(row: dict[str, Any], metric: str, times: str | None = None) -> float:
    """Sum over domains of `domain/<id>/<metric>` (times `domain/<id>/<times>` when given)."""
    out = 0.0
    for key, value in row.items():
        if key.startswith("domain/") and key.endswith(f"/{metric}"):
            out += value * (row[key.removesuffix(metric) + times] if times else 1.0)
    return out


def side_result(settings: PipelineSettings, raw: dict[str, Any]) -> dict[str, Any]:
    """Samples/s and completion tokens/s over the timed steps, and the median of each stage's seconds."""
    stages = raw["stages"]
    result = rate_from_step_times(raw["ends_s"], settings.samples_per_step, settings.warmup_steps)
    tokens = sum(row["completion_tokens"] for row in stages)
    span_s = result["timed_steps"] * settings.samples_per_step / result["samples_per_s"]
    result["completion_tokens_per_s"] = tokens / span_s
    result["mean_completion_tokens"] = tokens / (len(stages) * settings.samples_per_step)
    keys = ("step_s", "generate_s", "verify_s", "learn_s", "sync_s", "other_s")
    result["median_stage_s"] = {key: statistics.median(row[key] for row in stages) for key in keys}
    result["steps"] = stages
    if raw.get("prompt_tokens"):
        result["mean_prompt_tokens"] = statistics.mean(raw["prompt_tokens"])
    return result


def run_side(name: str, settings: PipelineSettings, model_dir: Path, pool: Any, run_dir: Path) -> dict[str, Any]:
    from posttrain.bench.pipeline_trl import run_trl

    if name == "posttrain":
        return side_result(settings, run_posttrain(settings, model_dir, run_dir))
    return side_result(settings, run_trl(settings, model_dir, pool, run_dir))


def run_rounds(settings: PipelineSettings, work_dir: Path) -> dict[str, Any]:
    """Alternate the two sides `rounds` times on one saved model; per-round rates and medians."""
    import torch

    from posttrain.tasks.pool import TaskPool

    torch.set_num_threads(settings.threads)
    pool = TaskPool.from_config(domains_config(settings))
    model_dir = build_model_dir(settings, pool, work_dir / "model")
    rounds: list[dict[str, Any]] = []
    for index in range(settings.rounds):
        print(f"[bench pipeline] round {index + 1}/{settings.rounds}", file=sys.stderr, flush=True)
        # Alternate which side goes first so a slow drift in machine load biases neither side.
        order = ["posttrain", "trl"] if index % 2 == 0 else ["trl", "posttrain"]
        results = {name: run_side(name, settings, model_dir, pool, work_dir / f"{name}_{index}") for name in order}
        posttrain, trl = results["posttrain"], results["trl"]
        rounds.append({"first": order[0], "posttrain": posttrain, "trl": trl,
                       "ratio": posttrain["samples_per_s"] / trl["samples_per_s"]})
    ours = statistics.median(r["posttrain"]["samples_per_s"] for r in rounds)
    theirs = statistics.median(r["trl"]["samples_per_s"] for r in rounds)
    tokens = {name: statistics.median(r[name]["completion_tokens_per_s"] for r in rounds) for name in ("posttrain", "trl")}
    return {
        "posttrain_samples_per_s": ours,
        "trl_samples_per_s": theirs,
        "ratio_posttrain_over_trl": ours / theirs,
        "posttrain_completion_tokens_per_s": tokens["posttrain"],
        "trl_completion_tokens_per_s": tokens["trl"],
        "token_ratio_posttrain_over_trl": tokens["posttrain"] / tokens["trl"],
        "median_stage_s": {name: _median_stages([r[name]["median_stage_s"] for r in rounds])
                           for name in ("posttrain", "trl")},
        "target": {"name": "posttrain >= 2x TRL samples/s", "met": ours / theirs >= 2.0},
        "rounds": rounds,
        "model_parameters": _num_parameters(model_dir),
    }


def _median_stages(per_round: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(stages[key] for stages in per_round) for key in per_round[0]}


def _num_parameters(model_dir: Path) -> int:
    import math

    from safetensors import safe_open

    with safe_open(str(model_dir / "model.safetensors"), framework="pt") as weights:
        return sum(math.prod(weights.get_slice(name).get_shape()) for name in weights.keys())  # noqa: SIM118


def versions() -> dict[str, str]:
    import importlib.metadata as metadata

    packages = ("posttrain", "torch", "transformers", "trl", "datasets")
    return {name: metadata.version(name) for name in packages} | {"python": platform.python_version()}


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="posttrain bench pipeline", description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON instead of a summary")
    parser.add_argument("--out", default="bench/results", help="directory for pipeline.json")
    parser.add_argument("--quick", action="store_true", help="2 timed steps, 1 round (a smoke run)")
    parser.add_argument("--steps", type=int, default=None, help="timed steps per side and round")
    parser.add_argument("--rounds", type=int, default=None, help="posttrain/TRL alternations")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default 2)")
    parser.add_argument("--tasks-per-step", type=int, default=None, help="prompts per step (x group size 8)")
    parser.add_argument("--model", choices=("tiny", "smollm2"), default="tiny",
                        help="tiny random Qwen2 (default) or SmolLM2-135M-Instruct with LoRA")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    settings = default_settings(args.model, args.quick)
    flags = {"steps": args.steps, "rounds": args.rounds, "threads": args.threads, "tasks_per_step": args.tasks_per_step}
    updates = {k: v for k, v in flags.items() if v is not None}
    settings = PipelineSettings.model_validate({**settings.model_dump(), **updates})
    report: dict[str, Any] = {
        "command": " ".join(["posttrain bench pipeline", *argv]), "quick": args.quick,
        "settings": settings.model_dump(), "versions": versions(), "machine": platform.machine(),
        "cpus": os.cpu_count(), "load_avg_start": os.getloadavg(),
    }
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="posttrain-bench-pipeline-") as tmp, \
            contextlib.redirect_stdout(sys.stderr):  # progress bars and logs stay off the JSON
        report.update(run_rounds(settings, Path(tmp)))
    report["load_avg_end"] = os.getloadavg()
    report["total_wall_s"] = time.perf_counter() - start
    emit_report(report, args.out, "pipeline.json", args.json, _print_summary)
    return 0


def _print_summary(report: dict[str, Any]) -> None:
    for index, result in enumerate(report["rounds"]):
        print(f"round {index + 1}: posttrain {result['posttrain']['samples_per_s']:.1f} samples/s, "
              f"TRL {result['trl']['samples_per_s']:.1f} samples/s, ratio {result['ratio']:.2f}")
    print(f"median: posttrain {report['posttrain_samples_per_s']:.1f}, TRL {report['trl_samples_per_s']:.1f}, "
          f"ratio {report['ratio_posttrain_over_trl']:.2f} (target >= 2: met={report['target']['met']})")
    print(f"completion tokens/s: posttrain {report['posttrain_completion_tokens_per_s']:.1f}, "
          f"TRL {report['trl_completion_tokens_per_s']:.1f}, ratio {report['token_ratio_posttrain_over_trl']:.2f}")
    for name, stages in report["median_stage_s"].items():
        print(f"{name} median seconds per step: " + ", ".join(f"{k.removesuffix('_s')} {v:.2f}" for k, v in stages.items()))
    print(f"load average {report['load_avg_start'][0]:.2f} -> {report['load_avg_end'][0]:.2f}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
