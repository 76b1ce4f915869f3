"""The TRL side of `posttrain bench pipeline`: one `GRPOTrainer.train()` with a per-step stage clock.

`run_trl` trains the model in a saved directory with TRL's `GRPOTrainer` under the settings the
posttrain side uses (`PipelineSettings`), and times each optimiser step and, inside it, generation
(the trainer's `_generate`), reward (`_calculate_rewards`, the domains' verifiers inline) and the rest of
the batch preparation, by wrapping those bound methods on this one trainer instance; the update is the
step's time less its batch preparation. TRL's policy generates with its own module, so there is no
weight sync to time. Guarantees: nothing in TRL is patched beyond the instance the run builds; the
trainer runs in float32 without gradient checkpointing (TRL's defaults turn both on), as posttrain
does. Not here: the settings, the posttrain side, or the rounds (`posttrain.bench.pipeline`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

STAGES = ("generate", "verify", "prepare")
"""Timed methods per step: generation, reward, and the whole batch preparation around both."""


def trl_dataset(settings: Any, pool: Any, num_prompts: int) -> tuple[Any, list[Any]]:
    """A conversational dataset of train-split prompts (domains in turn) and the tasks behind its rows."""
    import random

    from datasets import Dataset

    from posttrain.rollout.prompting import chat_messages

    rng = random.Random(settings.seed + 1)
    domain_ids = pool.registry.ids()
    tasks = [pool.sample(domain_ids[i % len(domain_ids)], 1, "train", rng)[0] for i in range(num_prompts)]
    rows = {"prompt": [chat_messages(t, settings.system_prompt) for t in tasks], "task_index": list(range(num_prompts))}
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


class StageClock:
    """Seconds per stage since the last `lap` (and completion tokens generated), and every sample's
    prompt and completion length."""

    def __init__(self) -> None:
        self.busy_s = dict.fromkeys((*STAGES, "completion_tokens"), 0.0)
        self.prompt_tokens: list[int] = []
        self.completion_tokens: list[int] = []
        self.laps: list[dict[str, float]] = []
        self.ends_s: list[float] = []

    def wrap(self, stage: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            result = method(*args, **kwargs)
            self.busy_s[stage] += time.perf_counter() - start
            if stage == "generate":  # (prompt_ids, completion_ids, ...) per sample
                self.prompt_tokens.extend(len(ids) for ids in result[0])
                self.completion_tokens.extend(len(ids) for ids in result[1])
                self.busy_s["completion_tokens"] += sum(len(ids) for ids in result[1])
            return result

        return timed

    def lap(self) -> None:
        """Close an optimiser step: record its end time and its stage times."""
        self.ends_s.append(time.perf_counter())
        self.laps.append(dict(self.busy_s))
        self.busy_s = dict.fromkeys((*STAGES, "completion_tokens"), 0.0)


def step_breakdown(clock: StageClock, warmup_steps: int) -> list[dict[str, float]]:
    """Per timed step: generate, verify, learn (step less batch preparation), other preparation, sync (0)."""
    rows = []
    for index in range(max(warmup_steps, 1), len(clock.ends_s)):
        lap, step_s = clock.laps[index], clock.ends_s[index] - clock.ends_s[index - 1]
        rows.append({
            "step_s": step_s, "generate_s": lap["generate"], "verify_s": lap["verify"],
            "learn_s": step_s - lap["prepare"], "sync_s": 0.0,
            "other_s": lap["prepare"] - lap["generate"] - lap["verify"],
            "completion_tokens": lap["completion_tokens"],
        })
    return rows


def run_trl(settings: Any, model_dir: Path, pool: Any, out_dir: Path) -> dict[str, Any]:
    """One `GRPOTrainer.train()`: optimiser-step end times, per-step stage times and token counts."""
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from posttrain.train.config import ModelConfig
    from posttrain.train.models import load_model

    num_steps = settings.warmup_steps + settings.steps
    dataset, tasks = trl_dataset(settings, pool, num_steps * settings.tasks_per_step)
    clock = StageClock()

    class StepClock(TrainerCallback):  # type: ignore[misc]
        def on_step_end(self, *args: Any, **kwargs: Any) -> None:
            clock.lap()

    args = GRPOConfig(
        output_dir=str(out_dir), use_cpu=True, report_to="none", save_strategy="no", logging_strategy="no",
        disable_tqdm=True, seed=settings.seed, max_steps=num_steps, learning_rate=settings.lr,
        lr_scheduler_type="constant", warmup_steps=0, weight_decay=0.0, max_grad_norm=1.0,
        per_device_train_batch_size=settings.micro_batch_size,
        gradient_accumulation_steps=settings.samples_per_step // settings.micro_batch_size,
        num_generations=settings.group_size, max_completion_length=settings.max_new_tokens,
        temperature=settings.temperature, beta=0.0, num_iterations=1, epsilon=0.2, epsilon_high=0.28,
        loss_type="dapo", dataloader_num_workers=0, bf16=False, gradient_checkpointing=False,
    )
    model, tokenizer = load_model(ModelConfig(path=str(model_dir)))
    trainer = GRPOTrainer(model=model, reward_funcs=verifier_reward(pool, tasks), args=args,
                          train_dataset=dataset, processing_class=tokenizer, callbacks=[StepClock()],
                          peft_config=_peft_config(settings))  # fmt: skip
    for stage, name in zip(STAGES, ("_generate", "_calculate_rewards", "_generate_and_score_completions"), strict=True):
        setattr(trainer, name, clock.wrap(stage, getattr(trainer, name)))
    trainer.train()
    if len(clock.ends_s) != num_steps:
        raise RuntimeError(f"TRL ran {len(clock.ends_s)} optimiser steps, expected {num_steps}")
    return {"ends_s": clock.ends_s, "stages": step_breakdown(clock, settings.warmup_steps),
            "completion_tokens": clock.completion_tokens, "prompt_tokens": clock.prompt_tokens}


def _peft_config(settings: Any) -> Any:
    if settings.lora_rank is None:
        return None
    from peft import LoraConfig

    return LoraConfig(r=settings.lora_rank, lora_alpha=settings.lora_alpha, lora_dropout=0.0,
                      target_modules="all-linear", task_type="CAUSAL_LM")  # fmt: skip
