"""The episode runner: many environment episodes in flight over one rollout engine, token in, token out.

`EpisodeRunner.run(jobs)` plays each job's episode (task + fresh `Environment`) to the end and returns
one `EpisodeResult` per job, in order. It is driven by asyncio: every episode is a coroutine that asks
for the next assistant turn, waits for it, hands the decoded text to `env.step` in a worker thread (tools
may sleep, hang until their timeout or run a sandbox) and appends what follows. Over the native engine a
driver coroutine keeps stepping the engine's continuous batch while any turn is pending, so episodes
waiting on tools never stall the others; other engines (HF, vLLM) get the pending turns batched into
`generate` calls in a worker thread (slower, same results contract).

Token in, token out: the opening messages are rendered once (`PromptRenderer.messages_ids`); after a turn
the sampled tokens are appended as they are (loss mask 1, their sampling logprobs) and the messages that
follow are appended as a template delta (`PromptRenderer.delta_ids`, mask 0). So each turn's prompt is an
exact extension of the previous turn's tokens (a radix cache reuses all of it), and the trajectory is
exactly what the engine sampled. Limits: the environment's own (`EpisodeLimits`) and `max_total_tokens`
over the whole token sequence; each ends the episode cleanly with its reason.

Failures: an environment that raises in `reset`, `step` or `grade` is an infrastructure failure; the
episode is replayed with a fresh environment up to `infra_retries` times, then graded `Score.infra` (never
trained on). Not here: grouping into GRPO groups and training (`posttrain.train.stages`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from posttrain.envs.base import Environment, Message
from posttrain.envs.tools import clean_text, exception_text
from posttrain.rollout.api import FinishReason, GenerationRequest, RolloutEngine, SampleOutput, SamplingParams
from posttrain.rollout.prompting import PromptRenderer
from posttrain.types import Score, Task, Trajectory

MAX_TOKENS = "max_tokens"
"""End reason: the episode's token sequence reached `max_total_tokens`."""


@dataclass(frozen=True)
class EpisodeJob:
    """One episode to play: the task, a fresh environment for it, its place in the task's group and seed."""

    task: Task
    env: Environment
    group_index: int = 0
    seed: int | None = None
    """Seed of the episode's sampling (turn k uses seed + 7919 * k); None: torch's global RNG."""
    make_env: Callable[[], Environment] | None = None
    """Builds a replacement environment when this one fails (infra retry); None: no retry."""


@dataclass
class TurnRecord:
    """Token accounting of one assistant turn."""

    prompt_tokens: int
    """Tokens of the history the turn was generated from."""
    new_prompt_tokens: int
    """Of those, the ones added since the previous turn (the only ones a prefix cache must compute)."""
    generated: int
    finish_reason: str
    start: int
    """Position of the turn's first sampled token in the trajectory."""


@dataclass
class EpisodeResult:
    """A played episode: its trajectory (policy tokens masked 1), grade, transcript and per-turn records."""

    trajectory: Trajectory
    score: Score
    messages: list[Message]
    turns: list[TurnRecord] = field(default_factory=list)
    attempts: int = 1


class _Episode:
    """The growing token sequence of one episode."""

    def __init__(self, prompt_ids: Sequence[int]) -> None:
        self.token_ids = [int(t) for t in prompt_ids]
        self.loss_mask = [0] * len(self.token_ids)
        self.logprobs = [0.0] * len(self.token_ids)
        self.turns: list[TurnRecord] = []
        self.last_prompt = 0

    def add_policy(self, sample: SampleOutput) -> None:
        self.token_ids += sample.token_ids
        self.loss_mask += [1] * len(sample.token_ids)
        self.logprobs += [float(x) for x in sample.logprobs]

    def add_context(self, ids: Sequence[int]) -> None:
        self.token_ids += ids
        self.loss_mask += [0] * len(ids)
        self.logprobs += [0.0] * len(ids)


class EpisodeRunner:
    """Plays episodes concurrently over one engine (see module docstring)."""

    def __init__(self, engine: RolloutEngine, renderer: PromptRenderer, params: SamplingParams,
                 max_total_tokens: int = 4096, infra_retries: int = 1, tool_threads: int = 64) -> None:  # fmt: skip
        self.engine = engine
        self.renderer = renderer
        self.params = params.model_copy(update={"n": 1, "stop_token_ids": tuple(params.stop_token_ids
                                                                                 or renderer.stop_ids)})
        self.max_total_tokens = max_total_tokens
        self.infra_retries = infra_retries
        self.tool_threads = tool_threads
        self.counters: dict[str, float] = {"episodes": 0, "turns": 0, "infra_retries": 0,
                                           "prompt_tokens": 0, "new_prompt_tokens": 0, "generated_tokens": 0}

    def run(self, jobs: Sequence[EpisodeJob], version: int = 0) -> list[EpisodeResult]:
        """Play every job's episode; one result per job, in order."""
        return asyncio.run(self.arun(jobs, version))

    async def arun(self, jobs: Sequence[EpisodeJob], version: int = 0) -> list[EpisodeResult]:
        loop = asyncio.get_running_loop()
        with ThreadPoolExecutor(max_workers=max(1, min(self.tool_threads, len(jobs))),
                                thread_name_prefix="episode") as pool:  # fmt: skip
            driver = _driver_for(self.engine)
            drive = asyncio.create_task(driver.drive())
            try:
                results = await asyncio.gather(*(self._play(job, driver, pool, loop, version) for job in jobs))
            finally:
                driver.stop()
                await drive
        for result in results:
            self._count(result)
        return list(results)

    def _count(self, result: EpisodeResult) -> None:
        self.counters["episodes"] += 1
        self.counters["turns"] += len(result.turns)
        self.counters["infra_retries"] += result.attempts - 1
        for turn in result.turns:
            self.counters["prompt_tokens"] += turn.prompt_tokens
            self.counters["new_prompt_tokens"] += turn.new_prompt_tokens
            self.counters["generated_tokens"] += turn.generated

    async def _play(self, job: EpisodeJob, driver: _Driver, pool: ThreadPoolExecutor,
                    loop: asyncio.AbstractEventLoop, version: int) -> EpisodeResult:  # fmt: skip
        env, attempts = job.env, 1
        while True:
            try:
                return await self._episode(job, env, driver, pool, loop, version, attempts)
            except _EnvFailed as failure:
                if job.make_env is None or attempts > self.infra_retries:
                    return self._failed(job, failure, version, attempts)
                env, attempts = job.make_env(), attempts + 1

    async def _episode(self, job: EpisodeJob, env: Environment, driver: _Driver, pool: ThreadPoolExecutor,
                       loop: asyncio.AbstractEventLoop, version: int, attempts: int) -> EpisodeResult:  # fmt: skip
        async def call(fn: Callable[..., Any], *args: Any) -> Any:
            try:
                return await loop.run_in_executor(pool, fn, *args)
            except Exception as exc:  # the environment's failure, not the policy's
                raise _EnvFailed(f"{getattr(fn, '__name__', 'env')} failed: {exception_text(exc)}") from exc

        observation = await call(env.reset, job.task)
        messages: list[Message] = [dict(m) for m in observation.messages]
        episode = _Episode(self.renderer.messages_ids(messages))
        last_text = ""
        while True:
            budget = self.max_total_tokens - len(episode.token_ids)
            if budget <= 0:
                await call(env.end, MAX_TOKENS)
                break
            turn = len(episode.turns)
            params = self.params.model_copy(update={
                "max_new_tokens": min(self.params.max_new_tokens, budget),
                "seed": None if job.seed is None else (job.seed + 7919 * turn) % 2**31})  # fmt: skip
            start = len(episode.token_ids)
            sample = await driver.generate(GenerationRequest(prompt_ids=tuple(episode.token_ids), params=params))
            record = TurnRecord(prompt_tokens=start, new_prompt_tokens=start - episode.last_prompt,
                                generated=len(sample.token_ids), finish_reason=sample.finish_reason, start=start)  # fmt: skip
            episode.turns.append(record)
            episode.last_prompt = start + len(sample.token_ids)
            episode.add_policy(sample)
            last_text = clean_text(self.renderer.decode(sample.token_ids))
            result = await call(env.step, last_text)
            messages += [{"role": "assistant", "content": last_text}, *[dict(m) for m in result.messages]]
            if result.done:
                break
            delta = self.renderer.delta_ids(result.messages, closed=sample.finish_reason == "stop")
            if len(episode.token_ids) + len(delta) >= self.max_total_tokens:
                await call(env.end, MAX_TOKENS)
                break
            episode.add_context(delta)
        score: Score = await call(env.grade)
        return EpisodeResult(self._trajectory(job, episode, last_text, version), score, messages,
                             episode.turns, attempts)  # fmt: skip

    def _trajectory(self, job: EpisodeJob, episode: _Episode, response: str, version: int) -> Trajectory:
        turns = [{"start": t.start, "generated": t.generated, "prompt_tokens": t.prompt_tokens,
                  "new_prompt_tokens": t.new_prompt_tokens, "finish_reason": t.finish_reason}
                 for t in episode.turns]  # fmt: skip
        return Trajectory(task=job.task, token_ids=tuple(episode.token_ids), loss_mask=tuple(episode.loss_mask),
                          logprobs=tuple(episode.logprobs), response=response, policy_version=version,
                          group_index=job.group_index,
                          finish_reason=episode.turns[-1].finish_reason if episode.turns else None,
                          metadata={"turns": turns, "episode": True})  # fmt: skip

    def _failed(self, job: EpisodeJob, failure: _EnvFailed, version: int, attempts: int) -> EpisodeResult:
        score = Score.infra(str(failure))
        empty = Trajectory(task=job.task, token_ids=(), loss_mask=(), logprobs=(), response="",
                           policy_version=version, group_index=job.group_index, metadata={"episode": True})  # fmt: skip
        return EpisodeResult(empty, score, [], [], attempts)


class _EnvFailed(Exception):
    """The environment raised: an infrastructure failure of this episode."""


class _Driver(Protocol):
    """Turns single-sample generation requests into awaitables over one engine."""

    async def generate(self, request: GenerationRequest) -> SampleOutput: ...

    async def drive(self) -> None: ...

    def stop(self) -> None: ...


class _Pending:
    """What both drivers share: (key, future) pairs waiting for a sample, and the wake-up between them."""

    def __init__(self) -> None:
        self.pending: list[tuple[Any, asyncio.Future[SampleOutput]]] = []
        self.wake = asyncio.Event()
        self.stopped = False

    async def _enqueue(self, key: Any) -> SampleOutput:
        future: asyncio.Future[SampleOutput] = asyncio.get_running_loop().create_future()
        self.pending.append((key, future))
        self.wake.set()
        return await future

    async def _has_work(self) -> bool:
        """Wait until something is pending (True) or the driver is stopped (False)."""
        while not self.pending and not self.stopped:
            self.wake.clear()
            await self.wake.wait()
        return not self.stopped

    def stop(self) -> None:
        self.stopped = True
        self.wake.set()


class _NativeDriver(_Pending):
    """Submits each request to the native engine's continuous batch and steps the engine while any is
    pending; a finished sequence resolves its future at once, whatever the others are doing."""

    def __init__(self, engine: Any) -> None:
        super().__init__()
        self.engine = engine

    async def generate(self, request: GenerationRequest) -> SampleOutput:
        (seqs,) = self.engine.submit([request])
        return await self._enqueue(seqs[0])

    async def drive(self) -> None:
        while await self._has_work():
            try:
                self.engine.step()
            except Exception as exc:  # an engine failure fails every pending turn, and stops nothing else
                for _, future in self.pending:
                    future.set_exception(exc)
                self.pending = []
                continue
            still = []
            for seq, future in self.pending:
                if seq.is_done:
                    reason: FinishReason = "stop" if seq.finish_reason == "stop" else "length"
                    future.set_result(SampleOutput(list(seq.generated_ids), list(seq.logprobs), reason))
                else:
                    still.append((seq, future))
            self.pending = still
            await asyncio.sleep(0)  # let finished episodes hand their turns to the environments


class _BatchDriver(_Pending):
    """Collects the pending requests and runs them as one `generate` call in a worker thread."""

    def __init__(self, engine: RolloutEngine) -> None:
        super().__init__()
        self.engine = engine

    async def generate(self, request: GenerationRequest) -> SampleOutput:
        return await self._enqueue(request)

    async def drive(self) -> None:
        while await self._has_work():
            await asyncio.sleep(0.001)  # let turns that finish together join one batch
            batch, self.pending = self.pending, []
            try:
                outputs = await asyncio.to_thread(self.engine.generate, [r for r, _ in batch])
            except Exception as exc:
                for _, future in batch:
                    future.set_exception(exc)
                continue
            for (_, future), output in zip(batch, outputs, strict=True):
                future.set_result(output.samples[0])


def _driver_for(engine: RolloutEngine) -> _Driver:
    if all(hasattr(engine, name) for name in ("submit", "step", "scheduler")):
        return _NativeDriver(engine)
    return _BatchDriver(engine)


def transcript_tokens(renderer: PromptRenderer, messages: Sequence[Message]) -> tuple[list[int], list[int]]:
    """(token ids, loss mask) of a transcript laid out as the runner lays out an episode: the opening
    messages rendered once, each assistant message as its text's tokens plus the end-of-turn token (mask 1),
    the messages after it as a template delta (mask 0). Messages after the last assistant message are
    left out (the runner stops there). For SFT on scripted episodes, and to check the runner's layout."""
    first = next((i for i, m in enumerate(messages) if m["role"] == "assistant"), len(messages))
    ids = renderer.messages_ids(messages[:first])
    mask = [0] * len(ids)
    position = first
    while position < len(messages):
        reply = renderer.encode_text(messages[position]["content"]) + [renderer.end_of_turn_id]
        ids, mask = ids + reply, mask + [1] * len(reply)
        following = position + 1
        while following < len(messages) and messages[following]["role"] != "assistant":
            following += 1
        if following < len(messages) and following > position + 1:
            delta = renderer.delta_ids(messages[position + 1 : following])
            ids, mask = ids + delta, mask + [0] * len(delta)
        position = following
    return ids, mask
