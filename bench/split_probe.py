"""Greedy pass rate of the base model and a trained checkpoint on train-split and eval-split tasks.

`python bench/split_probe.py RUN_DIR [--config quickstart] [--tasks 64]`: the config's components are
built as training builds them; RUN_DIR's latest checkpoint holds the trained weights. A gain on the
train split with none on the eval split means the update sharpens answers to tasks the base model was
fine-tuned on rather than a skill that transfers (docs/training.md, "Why held-out reward does not move").
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path
from typing import Any

from posttrain.cli.train import resolve_config_path
from posttrain.eval.evaluate import evaluate
from posttrain.rollout import NativeEngine
from posttrain.train.checkpoint import latest_checkpoint, load_checkpoint
from posttrain.train.components import Components
from posttrain.train.config import load_train_config


class TrainSplit:
    """A pool view whose `eval_tasks` are a fixed sample of the train split."""

    def __init__(self, pool: Any, num_tasks: int, seed: int) -> None:
        rng = random.Random(seed)
        self.registry = pool.registry
        self.tasks = {d: pool.sample(d, num_tasks, "train", rng) for d in pool.registry.ids()}

    def eval_tasks(self, domain_id: str, n: int) -> list[Any]:
        return self.tasks[domain_id][:n]


def pass_rates(parts: Components, pools: dict[str, Any], num_tasks: int, max_new_tokens: int) -> dict[str, Any]:
    engine = NativeEngine(parts.model)
    ids = parts.pool.registry.ids()
    return {split: evaluate(engine, parts.renderer, pool, ids, parts.grader.grade, num_tasks, max_new_tokens)
            for split, pool in pools.items()}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--config", default="quickstart")
    parser.add_argument("--tasks", type=int, default=64, help="tasks per domain and split")
    args = parser.parse_args(argv)
    config = load_train_config(resolve_config_path(args.config))
    if config.policy.lora is not None:
        raise SystemExit("LoRA checkpoints hold adapters only; this probe loads full weights")
    parts = Components.build(config, lambda _: None)
    pools = {"train": TrainSplit(parts.pool, args.tasks, seed=123), "eval": parts.pool}
    budget = config.eval.max_new_tokens
    try:
        base = pass_rates(parts, pools, args.tasks, budget)
        checkpoint = latest_checkpoint(args.run_dir)
        if checkpoint is None:
            raise SystemExit(f"no checkpoint in {args.run_dir}")
        parts.model.load_state_dict(load_checkpoint(checkpoint).state["model"])
        trained = pass_rates(parts, pools, args.tasks, budget)
    finally:
        parts.close()
    print(f"{'domain':34s} {'train split: base -> trained':>30s} {'eval split: base -> trained':>30s}")
    for d in parts.pool.registry.ids():
        row = [f"{base[s][d].pass_rate:.3f} -> {trained[s][d].pass_rate:.3f}" for s in ("train", "eval")]
        print(f"{d:34s} {row[0]:>30s} {row[1]:>30s}")
    means = {(s, w): sum(r.pass_rate for r in res[s].values()) / len(res[s])
             for s in ("train", "eval") for w, res in (("base", base), ("trained", trained))}
    print(f"{'mean':34s} {means['train', 'base']:>20.3f} -> {means['train', 'trained']:.3f} "
          f"{means['eval', 'base']:>20.3f} -> {means['eval', 'trained']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
