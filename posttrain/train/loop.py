"""The RL loop: sample -> reward -> filter -> update -> sync -> reweight, for `steps` steps.

Read top to bottom, `train` is the learner's side of the algorithm and `produce` its data side; the
components are built in `posttrain.train.components`, the run's setup, checkpoints and outputs live in
`posttrain.train.run`, the stages in `posttrain.train.stages`. Synchronous and asynchronous training
(`dist.mode`) differ only in where `produce`'s result is awaited: `run.collect` calls it now, or returns
what the producer thread made while the learner updated on the step before (docs/async.md).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from posttrain.train.config import TrainConfig
from posttrain.train.run import Run, StepData


def train(config: TrainConfig, run_dir: Path, resume: bool = False, log: Callable[[str], None] = print) -> Any:
    """Run RL post-training; returns the summary written to `run_dir/summary.json`."""
    with Run.create(config, run_dir, log) as run:
        start = run.resume() if resume else 0
        base_eval = run.evaluate("base") if start == 0 else run.saved_eval("base")
        for step in range(start, config.steps):
            data = run.collect(step, produce)                   # sync: made now; async: made ahead
            batch, stale = run.make_batch(data.kept, step)      # advantages + loss weights (+ staleness)
            metrics = run.update(batch)                         # GRPO-family update
            run.sync_weights(version=step + 1)                  # weight sync (async: deferred)
            run.log_step(step, metrics, data, stale)
            run.maybe_eval_and_checkpoint(step)
        final_eval = run.evaluate("final")
        return run.write_summary(base_eval, final_eval)


def produce(run: Run, step: int, version: int) -> StepData:
    """The data of `step`, sampled with weights `version`; in async mode this runs in the producer
    thread, which then alone draws tasks, generates, grades and updates the mixture."""
    weights = run.mixture.weights()                                  # per-domain sampling weights
    tasks = run.draw_tasks(run.config.tasks_per_step)                # batch composition by weight
    groups = run.sample_and_score(tasks, version)                    # G samples per task, graded
    kept, graded, report = run.filter_groups(groups, step, version)  # drop zero-signal groups, refill
    stats = run.domain_stats(graded)                                 # every graded group, kept or not
    run.mixture.update(stats, step=step)                             # weak domains get more samples
    metrics = run.step_metrics(graded)
    return StepData(weights, kept, graded, report, stats, metrics, run.reward.num_infra_failures)
