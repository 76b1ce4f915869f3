"""A discrete-event simulation of the training pipeline: rollout engines, verification workers, one learner.

What it is: `simulate(scenario)` plays `scenario.steps` training steps over the seeded workload of
`posttrain.sched.sim_model` and returns a `SimResult`: samples/s, utilisation per pool, the staleness of
the samples learned from and a step time breakdown, measured over the steps after the warm-up.

The model:
  * a step's tasks are split into generate calls (`rollout.tasks_per_call`, else evenly over the
    engines); an idle engine takes the oldest waiting call. A call for step t may start only once the
    learner has published weights of version >= t - k, with k = 0 in sync mode and `max_staleness` in
    async mode; the call uses the newest published weights, so its samples are t - version <= k stale;
  * sync mode: a step's samples go to verification together when its last call ends; the weight sync
    (`sync_s`) is one pause shared by the learner and the engines. Each step is therefore generate →
    verify → learn → sync, one after another;
  * async mode: each call's samples go to verification when the call ends, the learner publishes in
    `sync_s` and an engine spends `sync_s` loading new weights before its next call;
  * verification: `verify.num_workers` workers, one item each at a time, served oldest step first and,
    with `fair_share`, the step's domains in turn (so a slow domain does not hold the others back);
  * the learner updates on step t once all of step t's items are verified and step t - 1 is published;
  * with `rollout.grades_own_calls`, an engine takes its next call only once its last call is graded
    (one producer that generates, then grades: the local async loop).
Guarantees: deterministic (same scenario, same result); every sample learned from is at most
`max_staleness` versions old (0 in sync mode). Not modelled: dynamic-sampling refills, failures and
retries, preemption, engines of different speeds, network time other than the weight sync.
"""

from __future__ import annotations

import bisect
import functools
import heapq
import itertools
import math
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from posttrain.sched.sim_model import PipelineScenario, Workload, generation_s, learn_s


@dataclass(frozen=True)
class SimResult:
    """What a simulation measured over its window (the steps after the warm-up)."""

    scenario: str
    mode: str
    samples_per_s: float
    """Samples learned from per second."""
    step_s: float
    """Mean time between two published versions."""
    utilisation: dict[str, float]
    """Share of worker time spent serving, per pool: rollout (generating), verify, learner (updating)."""
    staleness_mean: float
    """Mean over samples of (learner step - weights version that generated it)."""
    staleness_max: int
    staleness_shares: dict[int, float]
    """Share of samples per staleness."""
    breakdown_s: dict[str, float]
    """Per-step means: generate and verify spans (first start to last end; they overlap in async
    mode), learn, sync, and the learner's wait for the step's data."""
    verify_latency_s: dict[str, dict[str, float]]
    """Per domain class: p50 and p95 of an item's time from hand-over to graded (queue + service)."""
    verify_service_mean_s: float
    """Mean verification time of the window's items."""
    num_events: int

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["staleness_shares"] = {str(k): v for k, v in self.staleness_shares.items()}
        return out


@dataclass
class _StepLog:
    """One step's timestamps and counts as the run goes."""

    num_calls: int = 0
    calls_done: int = 0
    items_left: int = 0
    gen_start: float = math.inf
    gen_end: float = 0.0
    verify_start: float = math.inf
    verify_end: float = 0.0
    learn_start: float = 0.0
    learn_end: float = 0.0
    published: float = 0.0
    wait_s: float = 0.0
    held: tuple[np.ndarray, ...] = ()
    staleness: dict[int, int] | None = None
    latency: np.ndarray | None = None


class _VerifyQueue:
    """Waiting items as (step, item index): oldest step first; fair share serves its domains in turn."""

    def __init__(self, fair_share: bool) -> None:
        self.fair_share = fair_share
        self._steps: list[int] = []
        self._by_step: dict[int, OrderedDict[int, deque[int]]] = {}
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def push(self, step: int, items: np.ndarray, domains: np.ndarray) -> None:
        if step not in self._by_step:
            bisect.insort(self._steps, step)
            self._by_step[step] = OrderedDict()
        queues = self._by_step[step]
        keys = domains if self.fair_share else np.zeros_like(domains)
        for item, key in zip(items.tolist(), keys.tolist(), strict=True):
            queues.setdefault(key, deque()).append(item)
        self._size += len(items)

    def pop(self) -> tuple[int, int]:
        step = self._steps[0]
        queues = self._by_step[step]
        key, queue = next(iter(queues.items()))
        item = queue.popleft()
        if queue:
            queues.move_to_end(key)
        else:
            del queues[key]
        if not queues:
            del self._by_step[step]
            self._steps.pop(0)
        self._size -= 1
        return step, item


class _Simulation:
    """The event loop and the state of the three pools."""

    def __init__(self, scenario: PipelineScenario) -> None:
        self.sc = scenario
        self.work = Workload(scenario)
        self.is_async = scenario.mode == "async"
        self.max_ahead = scenario.max_staleness if self.is_async else 0
        self.now = 0.0
        self.events: list[tuple[float, int, Callable[[], None]]] = []
        self.counter = itertools.count()
        self.num_events = 0
        # Async runs keep generating past the last measured step, so the window ends on a full pipeline.
        self.num_steps = scenario.steps + (self.max_ahead + 1 if self.is_async else 0)
        self.logs = [_StepLog() for _ in range(self.num_steps)]
        self.calls: deque[tuple[int, int, int]] = deque()  # (step, first task, end task)
        self.call_tasks = scenario.rollout.tasks_per_call or math.ceil(scenario.tasks_per_step
                                                                       / scenario.rollout.num_workers)
        self.grading: dict[tuple[int, int], list[int]] = {}
        """(step, first task) -> [engine, items left] of calls whose engine waits for their grading."""
        self.next_step_to_split = 0
        self.idle_engines = list(range(scenario.rollout.num_workers))
        self.engine_version = [0] * scenario.rollout.num_workers
        self.published = 0
        self.free_verifiers = scenario.verify.num_workers
        self.queue = _VerifyQueue(scenario.verify.order == "fair_share")
        self.learner_next = 0
        self.learner_busy = False
        self.learner_free_since = 0.0
        self.busy: dict[str, list[tuple[float, float]]] = {"rollout": [], "verify": [], "learner": []}

    def at(self, time: float, action: Callable[[], None]) -> None:
        heapq.heappush(self.events, (time, next(self.counter), action))

    def run(self) -> SimResult:
        self.dispatch_rollout()
        while self.events and self.published < self.sc.steps:
            self.now, _, action = heapq.heappop(self.events)
            self.num_events += 1
            action()
        return _result(self)

    # -- rollout ----------------------------------------------------------------------------------

    def split_next_step(self) -> None:
        step, sc, size = self.next_step_to_split, self.sc, self.call_tasks
        starts = range(0, sc.tasks_per_step, size)
        self.calls.extend((step, start, min(start + size, sc.tasks_per_step)) for start in starts)
        log = self.logs[step]
        log.num_calls, log.items_left = len(starts), sc.samples_per_step
        log.staleness, log.latency = {}, np.zeros(sc.samples_per_step)
        self.next_step_to_split += 1

    def dispatch_rollout(self) -> None:
        while self.idle_engines:
            if not self.calls and self.next_step_to_split < self.num_steps:
                self.split_next_step()
            if not self.calls or self.published < self.calls[0][0] - self.max_ahead:
                return
            step, first, end = self.calls.popleft()
            self.start_call(self.idle_engines.pop(), step, first, end)

    def start_call(self, engine: int, step: int, first: int, end: int) -> None:
        work, log, group = self.work.step(step), self.logs[step], self.sc.group_size
        load_s = self.sc.sync_s if self.is_async and self.engine_version[engine] < self.published else 0.0
        self.engine_version[engine] = version = self.published
        begin = self.now + load_s
        gen_s = generation_s(self.sc.rollout, work.prompt_tokens[first:end],
                             work.response_tokens[first * group:end * group], float(work.rollout_jitter[first]))
        finish = begin + gen_s
        self.busy["rollout"].append((begin, finish))
        log.gen_start = min(log.gen_start, begin)
        assert log.staleness is not None
        log.staleness[step - version] = log.staleness.get(step - version, 0) + (end - first) * group
        self.at(finish, functools.partial(self.end_call, engine, step, first, end))

    def end_call(self, engine: int, step: int, first: int, end: int) -> None:
        log, group = self.logs[step], self.sc.group_size
        log.gen_end = max(log.gen_end, self.now)
        log.calls_done += 1
        items = np.arange(first * group, end * group)
        if self.is_async:
            self.hand_over(step, items)
        else:
            log.held += (items,)
            if log.calls_done == log.num_calls:
                self.hand_over(step, np.concatenate(log.held))
        if self.sc.rollout.grades_own_calls:
            self.grading[(step, first)] = [engine, len(items)]
            return
        self.idle_engines.append(engine)
        self.dispatch_rollout()

    # -- verification -----------------------------------------------------------------------------

    def hand_over(self, step: int, items: np.ndarray) -> None:
        ready = self.now + self.sc.verify.call_s
        log = self.logs[step]
        log.verify_start = min(log.verify_start, self.now)
        assert log.latency is not None
        log.latency[items] -= self.now  # latency = graded - handed over

        def enqueue() -> None:
            self.queue.push(step, items, self.work.step(step).item_domain[items])
            self.dispatch_verify()

        self.at(ready, enqueue)

    def dispatch_verify(self) -> None:
        while self.free_verifiers and self.queue:
            step, item = self.queue.pop()
            self.free_verifiers -= 1
            finish = self.now + float(self.work.step(step).verify_s[item])
            self.busy["verify"].append((self.now, finish))
            self.at(finish, functools.partial(self.end_verify, step, item))

    def end_verify(self, step: int, item: int) -> None:
        self.free_verifiers += 1
        log = self.logs[step]
        assert log.latency is not None
        log.latency[item] += self.now
        log.items_left -= 1
        if log.items_left == 0:
            log.verify_end = self.now
            self.try_learn()
        if self.sc.rollout.grades_own_calls:
            self.graded_one(step, item)
        self.dispatch_verify()

    def graded_one(self, step: int, item: int) -> None:
        """An engine that grades its own calls is free once the last sample of its call is graded."""
        key = (step, item // self.sc.group_size // self.call_tasks * self.call_tasks)
        call = self.grading[key]
        call[1] -= 1
        if call[1] == 0:
            del self.grading[key]
            self.idle_engines.append(call[0])
            self.dispatch_rollout()

    # -- the learner ------------------------------------------------------------------------------

    def try_learn(self) -> None:
        step = self.learner_next
        if self.learner_busy or step >= self.num_steps or self.logs[step].items_left or not self.logs[step].num_calls:
            return
        log, work = self.logs[step], self.work.step(step)
        self.learner_busy = True
        log.wait_s = self.now - self.learner_free_since
        rows = work.learn_rows(self.sc.learner.micro_batch_size)
        log.learn_start, log.learn_end = self.now, self.now + learn_s(self.sc.learner, rows, work.learn_jitter)
        self.busy["learner"].append((log.learn_start, log.learn_end))
        self.at(log.learn_end + self.sc.sync_s, functools.partial(self.publish, step))

    def publish(self, step: int) -> None:
        self.logs[step].published = self.now
        self.published = step + 1
        self.learner_busy = False
        self.learner_free_since = self.now
        self.learner_next = step + 1
        self.try_learn()
        self.dispatch_rollout()


def _overlap_s(intervals: list[tuple[float, float]], start: float, end: float) -> float:
    if not intervals:
        return 0.0
    spans = np.asarray(intervals)
    return float(np.clip(np.minimum(spans[:, 1], end) - np.maximum(spans[:, 0], start), 0, None).sum())


def _staleness(window: list[_StepLog]) -> dict[int, int]:
    """Samples per staleness over the window's steps."""
    stale: dict[int, int] = {}
    for log in window:
        for age, count in (log.staleness or {}).items():
            stale[age] = stale.get(age, 0) + count
    return stale


def _latency_by_class(sim: _Simulation, steps: range) -> dict[str, dict[str, float]]:
    latency = np.concatenate([sim.logs[t].latency for t in steps if sim.logs[t].latency is not None])
    classes = np.concatenate([sim.work.step(t).item_class for t in steps])
    return {
        cls.name: {"p50": float(np.percentile(latency[classes == i], 50)),
                   "p95": float(np.percentile(latency[classes == i], 95))}
        for i, cls in enumerate(sim.sc.domains) if (classes == i).any()
    }  # fmt: skip


def _result(sim: _Simulation) -> SimResult:
    sc, logs = sim.sc, sim.logs
    window = logs[sc.warmup_steps:sc.steps]
    start = logs[sc.warmup_steps - 1].published if sc.warmup_steps else 0.0
    span = max(window[-1].published - start, 1e-12)
    workers = {"rollout": sc.rollout.num_workers, "verify": sc.verify.num_workers, "learner": 1}
    utilisation = {pool: _overlap_s(sim.busy[pool], start, start + span) / (workers[pool] * span) for pool in workers}
    stale = _staleness(window)
    total = sum(stale.values())
    breakdown = {
        "generate_s": float(np.mean([s.gen_end - s.gen_start for s in window])),
        "verify_s": float(np.mean([s.verify_end - s.verify_start for s in window])),
        "learn_s": float(np.mean([s.learn_end - s.learn_start for s in window])),
        "sync_s": sc.sync_s,
        "learner_wait_s": float(np.mean([s.wait_s for s in window])),
    }
    steps = range(sc.warmup_steps, sc.steps)
    return SimResult(
        scenario=sc.name,
        mode=sc.mode,
        samples_per_s=len(window) * sc.samples_per_step / span,
        step_s=span / len(window),
        utilisation=utilisation,
        staleness_mean=sum(age * n for age, n in stale.items()) / max(total, 1),
        staleness_max=max(stale, default=0),
        staleness_shares={age: stale[age] / total for age in sorted(stale)},
        breakdown_s=breakdown,
        verify_latency_s=_latency_by_class(sim, steps),
        verify_service_mean_s=float(np.mean(np.concatenate([sim.work.step(t).verify_s for t in steps]))),
        num_events=sim.num_events,
    )


def simulate(scenario: PipelineScenario) -> SimResult:
    """Play the scenario's steps; deterministic for a given scenario (its seed included)."""
    return _Simulation(scenario).run()
