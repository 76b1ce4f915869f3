"""Service times of the local pipeline, measured on a real `Run` and fitted to the simulator's cost models.

The calibration run is one `posttrain.train.run.Run`, built from a calibration config like any training
run, whose stages are driven one by one at several batch sizes and response budgets: a training run
always uses one size, and one size cannot separate a call's fixed cost from its per-token cost (on the
tiny CPU model, 16 samples take about 0.15 s and 512 take 1.5 s: far from proportional). Per point:
  * generate (the run's `RolloutStage` with that budget): seconds against decode steps, generated tokens,
    their contexts and prompt tokens -> `RolloutPool.call_s`, `decode_step_s`, `token_s`, `kv_token_s`,
    `prefill_token_s`;
  * grade the batch (`run.reward.score`), one domain class at a time: seconds against the item count ->
    `VerifyPool.call_s` and an effective per-item time per class; the shape of each class's time
    distribution comes from items graded one at a time, rescaled to that effective mean (the local
    reward stage is modelled as one server: its sandbox pool's concurrency on this machine's cores is in
    the effective time);
  * the learner side (`make_batch`, `update`, domain stats, mixture update, the metrics row) ->
    `LearnerModel.step_s + token_s * tokens + attention_s * sum(row length ** 2)`, rows counted as the
    update pads them (each as long as the longest row of its micro-batch);
  * the weight sync (`sync_weights`) -> `sync_s`.
Each stage is fitted on every repeat of every grid point by non-negative least squares on relative
errors (on a shared machine the repeats see different loads; the fit takes their typical cost). Not here: running or comparing the validation runs (`sim_validate`).
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from posttrain.sched.sim_model import EmpiricalTime, LearnerModel, RolloutPool

ClassOf = Callable[[str], str]
"""Domain id -> the name of its domain class."""


def nonnegative_lstsq(columns: np.ndarray, target: np.ndarray, relative: bool = False) -> np.ndarray:
    """argmin ||columns @ x - target|| subject to x >= 0, by trying every subset of columns (few columns);
    `relative` minimises the relative errors instead (each row divided by its target)."""
    if relative:
        columns, target = columns / target[:, None], np.ones_like(target)
    num = columns.shape[1]
    best, best_residual = np.zeros(num), float(np.sum(target**2))
    for size in range(1, num + 1):
        for subset in itertools.combinations(range(num), size):
            coef, *_ = np.linalg.lstsq(columns[:, subset], target, rcond=None)
            if (coef < 0).any():
                continue
            residual = float(np.sum((columns[:, subset] @ coef - target) ** 2))
            if residual < best_residual - 1e-15:
                best, best_residual = np.zeros(num), residual
                best[list(subset)] = coef
    return best


@dataclass
class Point:
    """One calibration step: sizes and the seconds each stage took."""

    num_tasks: int
    max_new_tokens: int
    decode_steps: int
    response_tokens: int
    context_tokens: float
    """Sum over generated tokens of their context length (prompt + half the response, per sequence)."""
    prompt_tokens: int
    learn_tokens: int
    """Padded tokens of the update's micro-batches."""
    learn_pairs: int
    """Sum over the update's rows of their padded length squared."""
    items_per_class: dict[str, int]
    length_fraction_sum: dict[str, float]
    """Per class: the sum over its items of response length / budget."""
    generate_s: float
    verify_s: dict[str, float]
    """Per class: seconds to grade the point's items of that class in one call."""
    learn_s: float
    sync_s: float


@dataclass
class Calibration:
    """The fitted coefficients, with the points and per-class measurements they came from."""

    rollout: RolloutPool
    learner: LearnerModel
    verify_call_s: float
    verify_item_s: dict[str, float]
    """Effective per-item time of each class in the local reward stage."""
    verify_shape: dict[str, EmpiricalTime]
    """Per class: items graded one at a time, rescaled to the effective mean."""
    serial_s: dict[str, list[float]]
    """Per class: the raw one-at-a-time grading times."""
    sync_s: float
    prompt_tokens: dict[str, float]
    """Median (geometric mean) prompt length of a task, per class."""
    prompt_sigma: dict[str, float]
    """Log-space spread of prompt lengths, per class."""
    response_fraction: dict[str, float]
    """Mean response length over the budget, per class."""
    points: list[Point] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        serial = {c: _summary(v) for c, v in self.serial_s.items()}
        return {
            "rollout": self.rollout.model_dump(), "learner": self.learner.model_dump(),
            "verify_call_s": self.verify_call_s, "verify_item_s": self.verify_item_s,
            "verify_one_at_a_time_s": serial, "sync_s": self.sync_s, "prompt_tokens": self.prompt_tokens,
            "prompt_sigma": self.prompt_sigma,
            "response_fraction": self.response_fraction, "points": [asdict(p) for p in self.points],
        }  # fmt: skip


def _summary(values: Sequence[float]) -> dict[str, float]:
    data = np.asarray(values)
    logs = np.log(data)
    return {"n": float(data.size), "mean": float(data.mean()), "p50": float(np.median(data)),
            "p95": float(np.percentile(data, 95)), "max": float(data.max()),
            "lognormal_median": float(np.exp(logs.mean())), "lognormal_sigma": float(logs.std())}  # fmt: skip


def calibrate(run: Any, sizes: Sequence[int], budgets: Sequence[int], class_of: ClassOf, repeats: int = 2,
              serial_items: int = 24) -> Calibration:  # fmt: skip
    """Drive `run` (a `posttrain.train.run.Run`) through every (tasks, budget, domain class) of the grid
    `repeats` times (the whole grid, then again) after a warm-up. A step's tasks come from one class's
    domains in turn: classes differ in prompt length, which separates per-token from per-context costs."""
    from posttrain.train.stages import RolloutStage

    stages = {m: RolloutStage(run.engine, run.components.renderer,
                              run.config.rollout.model_copy(update={"max_new_tokens": m}), run.config.seed)
              for m in budgets}  # fmt: skip
    by_class: dict[str, list[str]] = {}
    for domain_id in run.pool.registry.ids():
        by_class.setdefault(class_of(domain_id), []).append(domain_id)
    for domains in by_class.values():  # warm-up: the sandbox pool starts here
        _measure(run, stages[budgets[0]], _tasks(run, domains, sizes[0]), class_of, 0)
    points, groups = [], []
    grid = list(itertools.product(sizes, budgets, sorted(by_class))) * repeats
    for index, (num_tasks, budget, name) in enumerate(grid, start=1):
        point, graded = _measure(run, stages[budget], _tasks(run, by_class[name], num_tasks), class_of, index)
        points.append(point)
        groups.extend(graded)
    return _fit(run, points, groups, class_of, serial_items)


def _tasks(run: Any, domains: list[str], num_tasks: int) -> list[Any]:
    """`num_tasks` train tasks from `domains` in turn."""
    return [run.pool.sample(domains[i % len(domains)], 1, "train", run.rng)[0] for i in range(num_tasks)]


def _measure(run: Any, stage: Any, tasks: list[Any], class_of: ClassOf, index: int) -> tuple[Point, list[Any]]:
    from posttrain.train.run import StepData

    start = time.perf_counter()
    groups = stage.generate(tasks, version=index)
    generated = time.perf_counter()
    graded, verify_s = _grade_by_class(run, groups, class_of)
    verified = time.perf_counter()
    weights = run.mixture.weights()
    batch, stale = run.make_batch(graded, index)
    metrics = run.update(batch)
    stats = run.domain_stats(graded)
    run.mixture.update(stats, step=index)
    run.log_step(index, metrics, StepData(weights, graded, graded, {}, stats, {}, run.reward.num_infra_failures),
                 stale)  # fmt: skip
    learned = time.perf_counter()
    run.sync_weights(version=index + 1)
    synced = time.perf_counter()
    trajectories = [t for g in graded for t in g.trajectories]
    lengths = [t.num_policy_tokens for t in trajectories]
    items: dict[str, int] = {}
    fractions: dict[str, float] = {}
    for t in trajectories:
        name = class_of(t.task.domain_id)
        items[name] = items.get(name, 0) + 1
        fractions[name] = fractions.get(name, 0.0) + t.num_policy_tokens / stage.config.max_new_tokens
    max_seqs = getattr(run.config.rollout.engine, "max_num_seqs", 256)
    rows = padded_rows([len(t.token_ids) for t in trajectories], run.config.policy.micro_batch_size)
    point = Point(
        num_tasks=len(tasks), max_new_tokens=stage.config.max_new_tokens,
        decode_steps=max(max(lengths), math.ceil(sum(lengths) / max_seqs)), response_tokens=sum(lengths),
        context_tokens=sum(t.num_policy_tokens * (t.prompt_length + t.num_policy_tokens / 2) for t in trajectories),
        prompt_tokens=sum(g.trajectories[0].prompt_length for g in groups),
        learn_tokens=sum(rows), learn_pairs=sum(r * r for r in rows),
        items_per_class=items, length_fraction_sum=fractions,
        generate_s=generated - start, verify_s=verify_s, learn_s=learned - verified,
        sync_s=synced - learned,
    )  # fmt: skip
    return point, graded


def _fit(run: Any, points: list[Point], groups: list[Any], class_of: ClassOf, serial_items: int) -> Calibration:
    gen_x = np.asarray([[1.0, p.decode_steps, p.response_tokens, p.context_tokens, p.prompt_tokens] for p in points])
    call_s, step_s, token_s, kv_s, prefill_s = nonnegative_lstsq(gen_x, np.asarray([p.generate_s for p in points]),
                                                                 relative=True)
    classes = sorted({c for p in points for c in p.items_per_class})
    # One row per (point, class): a call grading only that class's items.
    ver_x = np.asarray([[1.0] + [p.items_per_class[c] * (c == d) for d in classes] for p in points for c in p.verify_s])
    ver_fit = nonnegative_lstsq(ver_x, np.asarray([s for p in points for s in p.verify_s.values()]), relative=True)
    learn_x = np.asarray([[1.0, p.learn_tokens, p.learn_pairs] for p in points])
    learn_fixed_s, learn_token_s, attention_s = nonnegative_lstsq(learn_x, np.asarray([p.learn_s for p in points]),
                                                                  relative=True)
    max_seqs = getattr(run.config.rollout.engine, "max_num_seqs", 256)
    log_prompts = _per_class(groups, class_of, lambda g: [math.log(g.trajectories[0].prompt_length)])
    item_s = {c: float(ver_fit[1 + i]) for i, c in enumerate(classes)}
    serial = _serial_times(run, groups, class_of, classes, serial_items)
    shape = {c: EmpiricalTime(samples_s=tuple(float(v) for v in np.asarray(serial[c]) * item_s[c] / np.mean(serial[c])))
             for c in classes if item_s[c] > 0}  # fmt: skip
    return Calibration(
        rollout=RolloutPool(call_s=call_s, decode_step_s=step_s, token_s=token_s, kv_token_s=kv_s,
                            prefill_token_s=prefill_s, max_batch_seqs=max_seqs),
        learner=LearnerModel(step_s=learn_fixed_s, token_s=learn_token_s, attention_s=attention_s,
                             micro_batch_size=run.config.policy.micro_batch_size),
        verify_call_s=float(ver_fit[0]), verify_item_s=item_s, verify_shape=shape, serial_s=serial,
        sync_s=float(np.median([p.sync_s for p in points])),
        prompt_tokens={c: float(np.exp(np.mean(v))) for c, v in log_prompts.items()},
        prompt_sigma={c: float(np.std(v)) for c, v in log_prompts.items()},
        response_fraction={c: sum(p.length_fraction_sum.get(c, 0.0) for p in points)
                           / sum(p.items_per_class.get(c, 0) for p in points) for c in classes},
        points=points,
    )  # fmt: skip


def _grade_by_class(run: Any, groups: list[Any], class_of: ClassOf) -> tuple[list[Any], dict[str, float]]:
    """The groups graded one class at a time (so each class's cost can be told apart), in their order."""
    names = [class_of(g.task.domain_id) for g in groups]
    graded: dict[int, Any] = {}
    seconds: dict[str, float] = {}
    for name in sorted(set(names)):
        positions = [i for i, n in enumerate(names) if n == name]
        start = time.perf_counter()
        scored = run.reward.score([groups[i] for i in positions])
        seconds[name] = time.perf_counter() - start
        graded.update(zip(positions, scored, strict=True))
    return [graded[i] for i in range(len(groups))], seconds


def padded_rows(lengths: list[int], micro_batch_size: int) -> list[int]:
    """Each row's length in the update's padded micro-batches: the longest row of its micro-batch."""
    chunks = [lengths[i:i + micro_batch_size] for i in range(0, len(lengths), micro_batch_size)]
    return [max(chunk) for chunk in chunks for _ in chunk]


def _per_class(groups: list[Any], class_of: ClassOf, values: Callable[[Any], list[float]]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for group in groups:
        if group.trajectories:  # every sample of a group can be dropped as an infra failure
            out.setdefault(class_of(group.task.domain_id), []).extend(values(group))
    return out


def _serial_times(run: Any, groups: list[Any], class_of: ClassOf, classes: list[str], limit: int) -> dict[str, list[float]]:
    """Items of each class graded one at a time (the shape of its time distribution)."""
    out: dict[str, list[float]] = {c: [] for c in classes}
    for group in groups:
        name = class_of(group.task.domain_id)
        for trajectory in group.trajectories:
            if len(out[name]) >= limit:
                break
            single = group.model_copy(update={"trajectories": (trajectory,), "scores": ()})
            start = time.perf_counter()
            run.reward.score([single])
            out[name].append(time.perf_counter() - start)
    return out
