"""The pipeline stages the loop composes: sample (rollout) and reward (grade).

Each stage has a narrow interface and returns new records, never changing its inputs: tasks in,
ungraded `Group`s of `Trajectory`s out; groups in, graded groups out. That is what lets a stage move
to its own worker pool or process. Infra failures are re-graded up to `infra_retries` times; samples
still failing are dropped from their group and never reach the policy update.

Agent domains (their family gives an `Environment`) are played by the `EpisodeRunner` instead: a group
is G episodes of the task, each graded by its environment when it ends, so the rollout stage returns
those groups already graded (an environment that kept failing is dropped there, after its replays);
the reward stage passes them through (or flips its coin for them in the control run). Single-turn
domains keep the batched path: one `generate` call, graded in batch through the `Grader`.
"""

from __future__ import annotations

import functools
import random
import time
from collections.abc import Callable, Sequence

from posttrain.envs.base import Environment
from posttrain.envs.runner import EpisodeJob, EpisodeResult, EpisodeRunner
from posttrain.rollout.api import GenerationRequest, RolloutEngine, SamplingParams
from posttrain.rollout.prompting import PromptRenderer
from posttrain.train.config import RewardConfig, RolloutConfig
from posttrain.types import Group, Score, Task, Trajectory
from posttrain.verify import Grader

EnvironmentLookup = Callable[[str], Environment | None]
"""Domain id -> a fresh environment for one episode, or None for single-turn domains."""


class RolloutStage:
    """Tasks -> groups of trajectories, through any RolloutEngine."""

    def __init__(self, engine: RolloutEngine, renderer: PromptRenderer, config: RolloutConfig, seed: int,
                 environment: EnvironmentLookup = lambda _domain_id: None,
                 is_episodic: Callable[[str], bool] | None = None) -> None:  # fmt: skip
        self.engine = engine
        self.renderer = renderer
        self.config = config
        self.seed = seed
        self.environment = environment
        self.is_episodic = is_episodic or (lambda domain_id: environment(domain_id) is not None)
        self.num_calls = 0
        self.busy_s = 0.0
        """Wall time spent in `generate` so far (the run reports it per step as `time/generate_s`)."""
        episode = config.episode
        self.runner = EpisodeRunner(engine, renderer, self._params(0).model_copy(update={"n": 1}),
                                    episode.max_total_tokens, episode.infra_retries, episode.tool_threads)  # fmt: skip

    def generate(self, tasks: Sequence[Task], version: int) -> list[Group]:
        """One group per task, in order: single-turn groups ungraded, episode groups graded."""
        start = time.perf_counter()
        self.num_calls += 1
        episodic = [self.is_episodic(t.domain_id) for t in tasks]
        single = iter(self._single_turn([t for t, e in zip(tasks, episodic, strict=True) if not e], version))
        played = iter(self._episodes([(i, t) for i, (t, e) in enumerate(zip(tasks, episodic, strict=True)) if e],
                                     version))  # fmt: skip
        groups = [next(played) if e else next(single) for e in episodic]
        self.busy_s += time.perf_counter() - start
        return groups

    def _episodes(self, tasks: Sequence[tuple[int, Task]], version: int) -> list[Group]:
        if not tasks:
            return []
        jobs = []
        for index, task in tasks:
            seed = self._params(index).seed or 0
            for j in range(self.config.group_size):
                env = self.environment(task.domain_id)
                assert env is not None
                jobs.append(EpisodeJob(task, env, j, seed + j, make_env=functools.partial(self._env, task.domain_id)))
        results = self.runner.run(jobs, version)
        size = self.config.group_size
        return [_episode_group(task, results[k * size : (k + 1) * size]) for k, (_, task) in enumerate(tasks)]

    def _env(self, domain_id: str) -> Environment:
        env = self.environment(domain_id)
        assert env is not None
        return env

    def _single_turn(self, tasks: Sequence[Task], version: int) -> list[Group]:
        if not tasks:
            return []
        prompts = [self.renderer.prompt_ids(t) for t in tasks]
        requests = [
            GenerationRequest(prompt_ids=tuple(ids), params=self._params(i)) for i, ids in enumerate(prompts)
        ]
        outputs = self.engine.generate(requests)
        groups = []
        for task, ids, out in zip(tasks, prompts, outputs, strict=True):
            trajectories = tuple(
                Trajectory.single_turn(
                    task, ids, s.token_ids, s.logprobs, self.renderer.decode(s.token_ids),
                    policy_version=version, group_index=j, finish_reason=s.finish_reason,
                )
                for j, s in enumerate(out.samples)
            )
            groups.append(Group(task=task, trajectories=trajectories))
        return groups

    def _params(self, index: int) -> SamplingParams:
        cfg = self.config
        # Distinct, reproducible seeds per (run seed, call, request): reruns sample the same tokens.
        seed = (self.seed * 1_000_003 + self.num_calls * 10_007 + index * 101) % 2**31
        return SamplingParams(
            n=cfg.group_size,
            max_new_tokens=cfg.max_new_tokens,
            temperature=cfg.temperature,
            top_p=cfg.top_p,
            top_k=cfg.top_k,
            seed=seed,
            stop_token_ids=self.renderer.stop_ids,
            # log_softmax(logits / T): what the update computes for the same weights (see `exact_old_logprobs`).
            logprobs_mode="processed",
        )

    @property
    def exact_old_logprobs(self) -> bool:
        """Whether sampled logprobs equal the update's: not under top-k/top-p truncation, which the
        update does not apply (the trainer then recomputes them before its first epoch)."""
        return self.config.top_p == 1.0 and self.config.top_k == 0


class RewardStage:
    """Grades groups through the `Grader` (or the control run's coin), retrying infra failures."""

    def __init__(self, grader: Grader, config: RewardConfig, seed: int) -> None:
        self.grader = grader
        self.config = config
        self.rng = random.Random(seed)
        self.num_infra_failures = 0
        self.busy_s = 0.0
        """Wall time spent in `score` so far (the run reports it per step as `time/verify_s`)."""

    def score(self, groups: Sequence[Group]) -> list[Group]:
        """The groups graded, infra failures dropped after their retries (new records); groups graded by
        their environments pass through (the control run flips its coin for them too)."""
        start = time.perf_counter()
        graded = self._score(groups)
        self.busy_s += time.perf_counter() - start
        return graded

    def _score(self, groups: Sequence[Group]) -> list[Group]:
        if any(g.scores for g in groups):
            ready = iter(self._pass_through([g for g in groups if g.scores]))
            rest = iter(self._score([g for g in groups if not g.scores]))
            return [next(ready) if g.scores else next(rest) for g in groups]
        trajectories = [t for g in groups for t in g.trajectories]
        scores = self._grade(trajectories)
        for _ in range(self.config.infra_retries):
            retry = [i for i, s in enumerate(scores) if s.is_infra_failure]
            if not retry:
                break
            for i, score in zip(retry, self._grade([trajectories[i] for i in retry]), strict=True):
                scores[i] = score
        graded, position = [], 0
        for group in groups:
            size = len(group.trajectories)
            graded.append(group.graded(scores[position : position + size]))
            position += size
            self.num_infra_failures += size - len(graded[-1].trajectories)
        return graded

    def _pass_through(self, groups: Sequence[Group]) -> list[Group]:
        if self.config.mode != "random":
            return list(groups)
        return [g.model_copy(update={"scores": tuple(_coin(self.rng) for _ in g.trajectories)}) for g in groups]

    def _grade(self, trajectories: Sequence[Trajectory]) -> list[Score]:
        if self.config.mode == "random":
            return [_coin(self.rng) for _ in trajectories]
        return self.grader.grade([(t.task, t.response) for t in trajectories])


def _episode_group(task: Task, results: Sequence[EpisodeResult]) -> Group:
    """G played episodes as a graded group (episodes whose environment kept failing dropped)."""
    group = Group(task=task, trajectories=tuple(r.trajectory for r in results))
    return group.graded([r.score for r in results])


def _coin(rng: random.Random) -> Score:
    """The control run's reward: independent of the response, so there is nothing to learn."""
    return Score.correct(control="random") if rng.random() < 0.5 else Score.wrong(message="random control")
