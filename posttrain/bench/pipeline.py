"""`posttrain bench pipeline`: the RL loop's samples/s against TRL's `GRPOTrainer`, in one run.

Usage: `posttrain bench pipeline [--quick] [--json] [--out DIR] [--steps N] [--rounds R]`.
Both sides train the same tiny randomly initialised Qwen2 (saved once to a temporary directory, with a
BPE tokenizer fitted on rendered arithmetic prompts) on prompts from the same task pool and split, with
the same group size, completion budget, temperature, prompts per step, reward (the numeric verifier),
loss clip range, learning rate, micro-batch size and torch threads; no KL term, one optimisation epoch.
The posttrain side is the real loop (`posttrain.train.loop.train`) with filtering off and evaluation cut
to the minimum; its rate comes from the per-step wall times in `metrics.jsonl`. The TRL side times
optimiser steps with a callback. On both sides the first step is a warm-up and is not timed, and
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
from typing import Any

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

    @property
    def samples_per_step(self) -> int:
        return self.group_size * self.tasks_per_step


def domains_config(settings: PipelineSettings) -> Any:
    from posttrain.tasks.families.arithmetic import ArithmeticConfig
    from posttrain.tasks.registry import DomainEntry, DomainsConfig

    family = ArithmeticConfig(ops=settings.ops, levels=[settings.level])  # type: ignore[arg-type]
    return DomainsConfig(seed=settings.seed, domains=[DomainEntry(family=family)])


def build_model_dir(settings: PipelineSettings, pool: Any, out_dir: Path) -> Path:
    """Save a tiny random Qwen2 and a tokenizer fitted on rendered train prompts to `out_dir`."""
    import random

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
    """One run of the real loop; the rate comes from the step rows of its `metrics.jsonl`."""
    from posttrain.train.config import TrainConfig
    from posttrain.train.loop import train

    config = TrainConfig.model_validate({
        "seed": settings.seed,
        "steps": settings.warmup_steps + settings.steps,
        "tasks_per_step": settings.tasks_per_step,
        "threads": settings.threads,
        "model": {"path": str(model_dir)},
        "domains": domains_config(settings).model_dump(),
        "rollout": {"group_size": settings.group_size, "max_new_tokens": settings.max_new_tokens,
                    "temperature": settings.temperature},
        "filter": {"enabled": False},
        "policy": {"lr": settings.lr, "micro_batch_size": settings.micro_batch_size,
                   "temperature": settings.temperature, "epochs": 1,
                   "loss": {"clip_low": 0.2, "clip_high": 0.28, "kl_beta": 0.0}},
        "eval": {"tasks_per_domain": 1, "max_new_tokens": 1},
    })
    train(config, run_dir, log=lambda message: print(message, file=sys.stderr))
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line]
    samples = [sum(v for k, v in row.items() if k.startswith("domain/") and k.endswith("/samples")) for row in rows]
    if any(n != settings.samples_per_step for n in samples):
        raise RuntimeError(f"posttrain steps graded {samples} samples, expected {settings.samples_per_step} each")
    return rate_from_step_times([row["elapsed_s"] for row in rows], settings.samples_per_step, settings.warmup_steps)


def trl_dataset(settings: PipelineSettings, pool: Any, num_prompts: int) -> tuple[Any, list[Any]]:
    """A conversational dataset of train-split prompts (domains in turn) and the tasks behind its rows."""
    import random

    from datasets import Dataset

    from posttrain.rollout.prompting import chat_messages

    rng = random.Random(settings.seed + 1)
    domain_ids = pool.registry.ids()
    tasks = [pool.sample(domain_ids[i % len(domain_ids)], 1, "train", rng)[0] for i in range(num_prompts)]
    rows = {"prompt": [chat_messages(t) for t in tasks], "task_index": list(range(num_prompts))}
    return Dataset.from_dict(rows), tasks


def verifier_reward(pool: Any, tasks: list[Any]) -> Any:
    """TRL reward function: the domains' verifiers on each completion's text, inline (in-process)."""
    from posttrain.verify import ExecutorConfig

    grader = pool.registry.grader(ExecutorConfig(num_workers=0))

    def reward(prompts: list[Any], completions: list[Any], task_index: list[int], **_: Any) -> list[float]:
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
        pairs = [(tasks[i], text) for i, text in zip(task_index, texts, strict=True)]
        return [score.reward for score in grader.grade(pairs)]

    reward.__name__ = "verifier"
    return reward


def run_trl(settings: PipelineSettings, model_dir: Path, pool: Any, out_dir: Path) -> dict[str, Any]:
    """One `GRPOTrainer.train()`; optimiser-step end times are taken by a callback."""
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    num_steps = settings.warmup_steps + settings.steps
    dataset, tasks = trl_dataset(settings, pool, num_steps * settings.tasks_per_step)
    ends_s: list[float] = []

    class StepClock(TrainerCallback):  # type: ignore[misc]
        def on_step_end(self, *args: Any, **kwargs: Any) -> None:
            ends_s.append(time.perf_counter())

    args = GRPOConfig(
        output_dir=str(out_dir), use_cpu=True, report_to="none", save_strategy="no", logging_strategy="no",
        disable_tqdm=True, seed=settings.seed, max_steps=num_steps, learning_rate=settings.lr,
        lr_scheduler_type="constant", warmup_steps=0, weight_decay=0.0, max_grad_norm=1.0,
        per_device_train_batch_size=settings.micro_batch_size,
        gradient_accumulation_steps=settings.samples_per_step // settings.micro_batch_size,
        num_generations=settings.group_size, max_completion_length=settings.max_new_tokens,
        temperature=settings.temperature, beta=0.0, num_iterations=1, epsilon=0.2, epsilon_high=0.28,
        loss_type="dapo", dataloader_num_workers=0,
    )
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), local_files_only=True)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(model_dir), local_files_only=True)
    trainer = GRPOTrainer(model=model, reward_funcs=verifier_reward(pool, tasks), args=args,
                          train_dataset=dataset, processing_class=tokenizer, callbacks=[StepClock()])
    trainer.train()
    if len(ends_s) != num_steps:
        raise RuntimeError(f"TRL ran {len(ends_s)} optimiser steps, expected {num_steps}")
    return rate_from_step_times(ends_s, settings.samples_per_step, settings.warmup_steps)


def run_side(name: str, settings: PipelineSettings, model_dir: Path, pool: Any, run_dir: Path) -> dict[str, Any]:
    if name == "posttrain":
        return run_posttrain(settings, model_dir, run_dir)
    return run_trl(settings, model_dir, pool, run_dir)


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
    return {
        "posttrain_samples_per_s": ours,
        "trl_samples_per_s": theirs,
        "ratio_posttrain_over_trl": ours / theirs,
        "target": {"name": "posttrain >= 2x TRL samples/s", "met": ours / theirs >= 2.0},
        "rounds": rounds,
        "model_parameters": sum(p.numel() for p in _load_params(model_dir)),
    }


def _load_params(model_dir: Path) -> list[Any]:
    from safetensors.torch import load_file

    return list(load_file(str(model_dir / "model.safetensors")).values())


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
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    settings = PipelineSettings(steps=2, rounds=1) if args.quick else PipelineSettings()
    flags = {"steps": args.steps, "rounds": args.rounds, "threads": args.threads}
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
    print(f"load average {report['load_avg_start'][0]:.2f} -> {report['load_avg_end'][0]:.2f}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
