"""The RL loop: sample -> reward -> filter -> update -> sync -> reweight, for `steps` steps.

Read top to bottom, `train` is the whole algorithm; the components are built in `posttrain.train.components`,
the run's setup, checkpoints and outputs live in `posttrain.train.run`, the stages in
`posttrain.train.stages`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from posttrain.train.config import TrainConfig
from posttrain.train.run import Run


def train(config: TrainConfig, run_dir: Path, resume: bool = False, log: Callable[[str], None] = print) -> Any:
    """Run RL post-training; returns the summary written to `run_dir/summary.json`."""
    with Run.create(config, run_dir, log) as run:
        start = run.resume() if resume else 0
        base_eval = run.evaluate("base") if start == 0 else run.saved_eval("base")
        for step in range(start, config.steps):
            weights = run.mixture.weights()                         # per-domain sampling weights
            tasks = run.draw_tasks(config.tasks_per_step)           # batch composition by weight
            groups = run.sample_and_score(tasks, version=step)      # G samples per task, graded
            kept, graded, report = run.filter_groups(groups, step)  # drop zero-signal groups, refill
            batch = run.make_batch(kept)                            # advantages + per-domain loss weights
            metrics = run.learner.step(batch)                       # GRPO-family update
            run.engine.update_weights(run.learner.policy_state(), version=step + 1)  # weight sync
            stats = run.domain_stats(graded)                        # every graded group, kept or not
            run.mixture.update(stats, step=step)                    # weak domains get more samples
            run.log_step(step, metrics | run.step_metrics(graded), stats, weights, report)
            run.maybe_eval_and_checkpoint(step)
        final_eval = run.evaluate("final")
        return run.write_summary(base_eval, final_eval)
