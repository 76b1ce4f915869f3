"""The episode runner: token in/token out, loss masks, concurrency, prefix reuse, limits, failures, training."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

import pytest
import torch

from posttrain.envs.base import Observation, SingleTurnEnv, StepResult
from posttrain.envs.runner import MAX_TOKENS, EpisodeJob, EpisodeResult, EpisodeRunner
from posttrain.rollout import NativeEngine, PromptRenderer, SamplingParams
from posttrain.rollout.api import GenerationRequest, RequestOutput
from posttrain.rollout.config import NativeEngineConfig
from posttrain.train._policy_config import PolicyConfig
from posttrain.train.config import RewardConfig, RolloutConfig
from posttrain.train.policy import PolicyTrainer, TrainBatch
from posttrain.train.stages import RewardStage, RolloutStage
from posttrain.types import Score, Task
from posttrain.verify import Grader
from posttrain.verify.configs import ExactConfig

torch.set_num_threads(1)
TASK = Task(id="agent/test/echo#0", domain_id="agent/test/echo", prompt="hello world")


class CountingEnv:
    """Every assistant message gets a tool message after `sleep_s`; done after `turns` messages."""

    def __init__(self, turns: int = 4, sleep_s: float = 0.0, fail_on: str | None = None) -> None:
        self.turns, self.sleep_s, self.fail_on = turns, sleep_s, fail_on
        self.count, self.ended, self.intervals = 0, None, []
        self.received: list[str] = []

    def reset(self, task: Task) -> Observation:
        if self.fail_on == "reset":
            raise RuntimeError("reset broke")
        self.count, self.ended = 0, None
        return Observation([{"role": "system", "content": "use tools"}, {"role": "user", "content": "hello world"}])

    def step(self, message: str) -> StepResult:
        if self.fail_on == "step":
            raise RuntimeError("step broke")
        start = time.perf_counter()
        time.sleep(self.sleep_s)
        self.intervals.append((start, time.perf_counter()))
        self.received.append(message)
        self.count += 1
        done = self.count >= self.turns
        if done:
            self.ended = "completed"
        return StepResult([{"role": "tool", "content": f"result {self.count}"}], done, self.ended)

    def end(self, reason: str) -> None:
        self.ended = self.ended or reason

    def grade(self) -> Score:
        if self.fail_on == "grade":
            raise RuntimeError("grade broke")
        return Score(reward=self.count / self.turns, passed=self.count == self.turns,
                     details={"turns": self.count, "end_reason": self.ended})


class RecordingEngine:
    """A native engine that records every submitted prompt."""

    def __init__(self, engine: NativeEngine) -> None:
        self.engine, self.prompts = engine, []
        self.scheduler = engine.scheduler

    def submit(self, requests: Sequence[GenerationRequest]) -> Any:
        self.prompts.extend(list(r.prompt_ids) for r in requests)
        return self.engine.submit(requests)

    def step(self) -> None:
        self.engine.step()

    def generate(self, requests: Sequence[GenerationRequest]) -> list[RequestOutput]:
        return self.engine.generate(requests)

    def stats(self) -> dict[str, float]:
        return self.engine.stats()


class BatchOnly:
    """Hides the native engine's submit/step, so the runner batches through `generate` (the HF/vLLM path)."""

    def __init__(self, engine: NativeEngine) -> None:
        self.engine = engine
        self.calls = 0

    def generate(self, requests: Sequence[GenerationRequest]) -> list[RequestOutput]:
        self.calls += 1
        return self.engine.generate(requests)


def engine(model: Any) -> NativeEngine:
    return NativeEngine(model, NativeEngineConfig(kv_cache_tokens=32768))


def runner(eng: Any, tokenizer: Any, max_total_tokens: int = 1024, temperature: float = 1.0,
           max_new_tokens: int = 12) -> EpisodeRunner:  # fmt: skip
    params = SamplingParams(max_new_tokens=max_new_tokens, temperature=temperature)
    return EpisodeRunner(eng, PromptRenderer(tokenizer), params, max_total_tokens=max_total_tokens)


def play(run: EpisodeRunner, envs: Sequence[Any]) -> list[EpisodeResult]:
    return run.run([EpisodeJob(TASK, env, i, seed=100 + i) for i, env in enumerate(envs)])


def test_each_turn_prompt_extends_the_previous_turn_exactly(model: Any, tokenizer: Any) -> None:
    recording = RecordingEngine(engine(model))
    (result,) = play(runner(recording, tokenizer), [CountingEnv(turns=4)])
    prompts = recording.prompts
    assert len(prompts) == len(result.turns) == 4
    tokens = list(result.trajectory.token_ids)
    for turn, prompt in zip(result.turns, prompts, strict=True):
        assert prompt == tokens[: turn.start]  # the history is never re-tokenized
    for earlier, later in zip(prompts, prompts[1:], strict=False):
        assert later[: len(earlier)] == earlier


def test_loss_mask_covers_exactly_the_sampled_tokens(model: Any, tokenizer: Any) -> None:
    (result,) = play(runner(engine(model), tokenizer), [CountingEnv(turns=3)])
    trajectory = result.trajectory
    policy_positions = {p for t in result.turns for p in range(t.start, t.start + t.generated)}
    assert [i for i, m in enumerate(trajectory.loss_mask) if m] == sorted(policy_positions)
    assert trajectory.num_policy_tokens == sum(t.generated for t in result.turns)
    span = max(policy_positions) - min(policy_positions) + 1
    assert trajectory.num_policy_tokens < span  # tool tokens between turns are masked out
    assert all(lp == 0.0 for lp, m in zip(trajectory.logprobs, trajectory.loss_mask, strict=True) if not m)
    text = tokenizer.decode(list(trajectory.token_ids))
    assert "<|im_start|>tool\nresult 1<|im_end|>" in text and "result 2" in text


def test_sampling_logprobs_equal_the_learner_forward(model: Any, tokenizer: Any) -> None:
    results = play(runner(engine(model), tokenizer), [CountingEnv(turns=3), CountingEnv(turns=2)])
    for result in results:
        ids = torch.tensor([list(result.trajectory.token_ids)])
        with torch.no_grad():
            logprobs = torch.log_softmax(model(ids).logits[0].float(), -1)
        mask = result.trajectory.loss_mask
        for position in (p for p, m in enumerate(mask) if m):
            learner = float(logprobs[position - 1, result.trajectory.token_ids[position]])
            assert learner == pytest.approx(result.trajectory.logprobs[position], abs=1e-4)


def test_native_and_batched_drivers_give_the_same_episodes(model: Any, tokenizer: Any) -> None:
    native = play(runner(engine(model), tokenizer), [CountingEnv(turns=3) for _ in range(4)])
    batch_engine = BatchOnly(engine(model))
    batched = play(runner(batch_engine, tokenizer), [CountingEnv(turns=3) for _ in range(4)])
    assert [r.trajectory.token_ids for r in native] == [r.trajectory.token_ids for r in batched]
    assert batch_engine.calls < 4 * 3  # turns that finish together share a generate call


def test_tools_run_while_other_episodes_decode_and_prefixes_are_reused(model: Any, tokenizer: Any) -> None:
    eng = engine(model)
    envs = [CountingEnv(turns=4, sleep_s=0.05) for _ in range(8)]
    run = runner(eng, tokenizer)
    results = play(run, envs)
    intervals = sorted(i for env in envs for i in env.intervals)
    overlapping = max(sum(1 for s, e in intervals if s <= start < e) for start, _ in intervals)
    assert overlapping >= 4  # tools of different episodes sleep at the same time
    assert all(r.score.passed for r in results)
    assert run.counters["new_prompt_tokens"] < run.counters["prompt_tokens"] / 2
    assert eng.stats()["cached_tokens"] > 0


def test_token_budget_ends_the_episode_with_its_reason(model: Any, tokenizer: Any) -> None:
    env = CountingEnv(turns=100)
    (result,) = play(runner(engine(model), tokenizer, max_total_tokens=120), [env])
    assert env.ended == MAX_TOKENS and result.score.details["end_reason"] == MAX_TOKENS
    assert len(result.trajectory.token_ids) <= 120


@pytest.mark.parametrize("where", ["reset", "step", "grade"])
def test_a_failing_environment_is_replayed_then_an_infra_failure(model: Any, tokenizer: Any, where: str) -> None:
    run = runner(engine(model), tokenizer)
    healed = run.run([EpisodeJob(TASK, CountingEnv(2, fail_on=where), 0, 1, make_env=lambda: CountingEnv(2))])[0]
    assert healed.attempts == 2 and healed.score.passed and not healed.score.is_infra_failure
    broken = run.run([EpisodeJob(TASK, CountingEnv(2, fail_on=where), 0, 1,
                                 make_env=lambda: CountingEnv(2, fail_on=where))])[0]  # fmt: skip
    assert broken.score.is_infra_failure and where in broken.score.message
    assert broken.attempts == run.infra_retries + 1


def test_policy_messages_reach_the_environment_decoded(model: Any, tokenizer: Any) -> None:
    env = CountingEnv(turns=2)
    (result,) = play(runner(engine(model), tokenizer), [env])
    renderer = PromptRenderer(tokenizer)
    for turn, message in zip(result.turns, env.received, strict=True):
        sampled = result.trajectory.token_ids[turn.start : turn.start + turn.generated]
        assert message == renderer.decode(sampled)
    assert [m["content"] for m in result.messages if m["role"] == "assistant"] == env.received


def _stage(model: Any, tokenizer: Any, environment: Any) -> RolloutStage:
    config = RolloutConfig(group_size=3, max_new_tokens=8, temperature=1.0)
    return RolloutStage(engine(model), PromptRenderer(tokenizer), config, seed=5, environment=environment)


def test_rollout_stage_plays_groups_of_episodes_graded_by_their_environment(model: Any, tokenizer: Any) -> None:
    single = Task(id="math/x/y#0", domain_id="math/x/y", prompt="hello", gold="world")

    def lookup(domain_id: str) -> Any:
        return CountingEnv(turns=2) if domain_id.startswith("agent/") else None

    groups = _stage(model, tokenizer, lookup).generate([TASK, single], version=7)
    episodes, plain = groups
    assert len(episodes.trajectories) == len(episodes.scores) == 3 and not plain.scores
    assert all(t.policy_version == 7 and t.metadata["episode"] for t in episodes.trajectories)
    assert [t.group_index for t in episodes.trajectories] == [0, 1, 2]
    assert len({t.token_ids for t in episodes.trajectories}) == 3  # different seeds per episode
    grader = Grader(lambda _d: ExactConfig())
    graded = RewardStage(grader, RewardConfig(workers=0), seed=0).score(groups)
    assert graded[0] == episodes and len(graded[1].scores) == 3
    control = RewardStage(grader, RewardConfig(workers=0, mode="random"), seed=0).score(groups)
    assert all(s.details.get("control") == "random" or s.message == "random control" for s in control[0].scores)


def test_single_turn_env_through_the_runner_matches_the_single_turn_path(model: Any, tokenizer: Any) -> None:
    stage = _stage(model, tokenizer, lambda _d: None)
    (plain,) = stage.generate([TASK], version=0)
    seed = stage._params(0).seed
    assert seed is not None
    jobs = [EpisodeJob(TASK, SingleTurnEnv(lambda _t, _r: Score.correct()), j, seed + j) for j in range(3)]
    played = stage.runner.run(jobs)
    assert [r.trajectory.token_ids for r in played] == [t.token_ids for t in plain.trajectories]
    assert [r.trajectory.loss_mask for r in played] == [t.loss_mask for t in plain.trajectories]


def test_learner_trains_every_turn_and_reports_no_logprob_mismatch(model: Any, tokenizer: Any) -> None:
    import copy

    results = play(runner(engine(model), tokenizer), [CountingEnv(turns=3) for _ in range(4)])
    trajectories = [r.trajectory for r in results]
    batch = TrainBatch.from_trajectories(trajectories, [1.0, -1.0, 0.5, -0.5])
    assert batch.loss_masks is not None  # tool tokens between turns are out of the loss
    for masks, result in zip(batch.loss_masks, results, strict=True):
        assert sum(masks) == sum(t.generated for t in result.turns)  # every turn, not only the last
    trainer = PolicyTrainer(copy.deepcopy(model), PolicyConfig(lr=1e-3, micro_batch_size=2))
    metrics = trainer.step(batch)
    assert metrics["logprob_mismatch"] < 1e-4
    assert metrics["logprob_mismatch_max"] < 1e-3


def test_the_learner_flags_retokenized_histories(model: Any, tokenizer: Any) -> None:
    import copy

    (result,) = play(runner(engine(model), tokenizer), [CountingEnv(turns=2)])
    t = result.trajectory
    shifted = t.model_copy(update={"logprobs": tuple(lp - 0.5 if m else lp for lp, m in
                                                     zip(t.logprobs, t.loss_mask, strict=True))})  # fmt: skip
    trainer = PolicyTrainer(copy.deepcopy(model), PolicyConfig(lr=1e-3))
    metrics = trainer.step(TrainBatch.from_trajectories([shifted], [1.0]))
    assert metrics["logprob_mismatch"] == pytest.approx(0.5, abs=1e-3)


def test_delta_tokens_follow_the_template(tokenizer: Any) -> None:
    renderer = PromptRenderer(tokenizer)
    tool = [{"role": "tool", "content": "42"}]
    assert tokenizer.decode(renderer.delta_ids(tool)) == "\n<|im_start|>tool\n42<|im_end|>\n<|im_start|>assistant\n"
    cut = renderer.delta_ids(tool, closed=False)
    assert cut[0] == tokenizer.convert_tokens_to_ids("<|im_end|>") and cut[1:] == renderer.delta_ids(tool)
    user = [{"role": "user", "content": "and now?"}]
    opening = [{"role": "user", "content": "hi"}]
    full = renderer.messages_ids([*opening, {"role": "assistant", "content": "yo"}, *user])
    first = renderer.messages_ids(opening)
    reply = renderer.encode_text("yo") + [renderer.end_of_turn_id]
    assert first + reply + renderer.delta_ids(user) == full


def test_a_template_that_rewrites_history_is_refused(tokenizer: Any) -> None:
    import copy

    odd = copy.deepcopy(tokenizer)
    odd.chat_template = "{% for m in messages %}{{ loop.length }}{{ m['content'] }}<|im_end|>{% endfor %}"
    with pytest.raises(ValueError, match="re-renders"):
        PromptRenderer(odd).delta_ids([{"role": "tool", "content": "x"}])


def test_tiny_template_marks_tool_and_system_messages() -> None:
    from jinja2 import Template

    from posttrain.train.base_model import TINY_CHAT_TEMPLATE

    text = Template(TINY_CHAT_TEMPLATE).render(
        messages=[{"role": "system", "content": "s"}, {"role": "user", "content": "q"},
                  {"role": "assistant", "content": "a"}, {"role": "tool", "content": "t"}],
        eos_token="<eos>", add_generation_prompt=True)  # fmt: skip
    assert text == "S: s\nQ: q\nA: a<eos>T: t\nA: "


def test_concurrent_runs_share_nothing(model: Any, tokenizer: Any) -> None:
    outputs: dict[int, list[EpisodeResult]] = {}

    def work(k: int) -> None:
        outputs[k] = play(runner(engine(model), tokenizer), [CountingEnv(turns=2) for _ in range(2)])

    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [r.trajectory.token_ids for r in outputs[0]] == [r.trajectory.token_ids for r in outputs[1]]


def test_episodes_whose_environment_keeps_failing_never_reach_the_learner(model: Any, tokenizer: Any) -> None:
    stage = _stage(model, tokenizer, lambda _d: CountingEnv(turns=2, fail_on="step"))
    (group,) = stage.generate([TASK], version=0)
    assert group.trajectories == () and group.scores == ()
    assert RewardStage(Grader(lambda _d: ExactConfig()), RewardConfig(workers=0), 0).score([group]) == [group]


def test_the_hf_engine_plays_episodes_through_the_same_runner(model: Any, tokenizer: Any) -> None:
    from posttrain.rollout import HFEngine

    results = play(runner(HFEngine(model), tokenizer), [CountingEnv(turns=3) for _ in range(3)])
    for result in results:
        assert result.score.passed and len(result.turns) == 3
        assert result.trajectory.num_policy_tokens == sum(t.generated for t in result.turns) > 0


@pytest.mark.slow
def test_smollm2_chat_template_takes_turns_token_exactly() -> None:
    from posttrain.train.models import ModelConfig, load_model

    model, tok = load_model(ModelConfig(preset="smollm2-135m"))
    renderer = PromptRenderer(tok)
    opening = [{"role": "system", "content": "You can call tools."}, {"role": "user", "content": "hi"}]
    tool = [{"role": "tool", "content": "42"}]
    whole = renderer.messages_ids([*opening, {"role": "assistant", "content": "ok"}, *tool])
    assert renderer.messages_ids(opening) + renderer.encode_text("ok") + [renderer.end_of_turn_id] + \
        renderer.delta_ids(tool) == whole
    run = EpisodeRunner(NativeEngine(model, NativeEngineConfig(kv_cache_tokens=8192)), renderer,
                        SamplingParams(max_new_tokens=8, temperature=1.0), max_total_tokens=2048)  # fmt: skip
    (result,) = run.run([EpisodeJob(TASK, CountingEnv(turns=3), 0, seed=1)])
    assert len(result.turns) == 3 and result.trajectory.num_policy_tokens == sum(t.generated for t in result.turns)
