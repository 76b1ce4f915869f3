"""The pipeline simulator against hand-worked cases, and the properties every run must keep."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from posttrain.sched.sim import simulate
from posttrain.sched.sim_model import (
    ConstantTime,
    DomainClass,
    LearnerModel,
    LognormalTime,
    ParetoTime,
    PipelineScenario,
    RolloutPool,
    StepWork,
    VerifyPool,
    Workload,
    generation_s,
    learn_s,
)


def one_item_scenario(mode: str = "sync", max_staleness: int = 1, sync_s: float = 0.0) -> PipelineScenario:
    """One task, one sample per step: generating takes 2 s, verifying 1 s, learning 1 s."""
    return PipelineScenario(
        steps=6, warmup_steps=1, tasks_per_step=1, group_size=1, max_new_tokens=1,
        domains=(DomainClass(name="a", verify=ConstantTime(value_s=1.0)),),
        rollout=RolloutPool(call_s=2.0), learner=LearnerModel(step_s=1.0),
        mode=mode, max_staleness=max_staleness, sync_s=sync_s,  # type: ignore[arg-type]
    )  # fmt: skip


def heavy_scenario(**updates: object) -> PipelineScenario:
    """Three domain classes, heavy-tailed verification, noisy generation and updates."""
    base = PipelineScenario(
        steps=12, warmup_steps=2, tasks_per_step=24, group_size=4, max_new_tokens=64,
        domains=(
            DomainClass(name="fast", num_domains=6, batch_share=2, prompt_tokens=20, response_tokens=20,
                        response_sigma=0.5, verify=LognormalTime(median_s=0.01, sigma=0.5)),
            DomainClass(name="code", num_domains=3, batch_share=1, prompt_tokens=40, response_tokens=40,
                        response_sigma=0.5, verify=LognormalTime(median_s=0.3, sigma=1.0), domain_spread=2.0),
            DomainClass(name="agent", num_domains=2, batch_share=1, prompt_tokens=60, response_tokens=50,
                        verify=ParetoTime(scale_s=0.5, alpha=1.5)),
        ),
        rollout=RolloutPool(num_workers=3, call_s=0.05, decode_step_s=0.01, token_s=0.001, jitter_sigma=0.2),
        verify=VerifyPool(num_workers=8, timeout_s=5.0),
        learner=LearnerModel(step_s=0.5, token_s=0.0005, jitter_sigma=0.1),
        sync_s=0.2,
    )  # fmt: skip
    return base.model_copy(update=updates)


# -- hand-worked cases ------------------------------------------------------------------------------


def test_sync_step_is_the_sum_of_its_stages() -> None:
    # generate 2 + verify 1 + learn 1 = 4 s per step; the engine works 2 of them, verifier and learner 1.
    result = simulate(one_item_scenario("sync"))
    assert result.step_s == pytest.approx(4.0)
    assert result.samples_per_s == pytest.approx(0.25)
    assert result.utilisation == pytest.approx({"rollout": 0.5, "verify": 0.25, "learner": 0.25})
    assert result.breakdown_s["learner_wait_s"] == pytest.approx(3.0)  # generate + verify
    assert result.staleness_shares == {0: 1.0}


def test_sync_step_includes_the_weight_sync() -> None:
    assert simulate(one_item_scenario("sync", sync_s=0.5)).step_s == pytest.approx(4.5)


def test_async_step_is_bound_by_the_slowest_stage() -> None:
    # Generation of step t+1 overlaps verification and learning of step t: max(2, 1, 1) = 2 s per step,
    # the engine never idles, every sample is one version old.
    result = simulate(one_item_scenario("async", max_staleness=1))
    assert result.step_s == pytest.approx(2.0)
    assert result.utilisation == pytest.approx({"rollout": 1.0, "verify": 0.5, "learner": 0.5})
    assert result.staleness_shares == {1: 1.0}


def test_async_engines_pay_for_loading_weights() -> None:
    # The engine loads each new version (0.5 s) before its next call: 2.5 s per step on the engine;
    # the learner's own path (learn 1 + publish 0.5) is shorter.
    assert simulate(one_item_scenario("async", sync_s=0.5)).step_s == pytest.approx(2.5)


def test_a_producer_that_grades_its_own_calls_overlaps_only_learning() -> None:
    # Generate 2 s, then grade 1 s before the next call: 3 s per step on the producer, learning (1 s)
    # hidden behind it; sync mode is unchanged (2 + 1 + 1).
    producer = RolloutPool(call_s=2.0, grades_own_calls=True)
    async_run = one_item_scenario("async").model_copy(update={"rollout": producer})
    assert simulate(async_run).step_s == pytest.approx(3.0)
    assert simulate(async_run.model_copy(update={"mode": "sync"})).step_s == pytest.approx(4.0)
    # Two engines, one task each per step: each waits for its own call's grading only.
    pair = async_run.model_copy(update={"tasks_per_step": 2, "rollout": producer.model_copy(update={"num_workers": 2}),
                                        "verify": VerifyPool(num_workers=2)})  # fmt: skip
    assert simulate(pair).step_s == pytest.approx(3.0)


def test_async_without_staleness_cannot_overlap_generation_and_learning() -> None:
    assert simulate(one_item_scenario("async", max_staleness=0)).step_s == pytest.approx(4.0)


@pytest.mark.parametrize(("num_workers", "verify_s"), [(1, 4.0), (2, 2.0), (3, 2.0), (4, 1.0), (8, 1.0)])
def test_verification_spreads_over_the_pool(num_workers: int, verify_s: float) -> None:
    # Four items of 1 s each: ceil(4 / V) rounds.
    scenario = one_item_scenario().model_copy(update={"group_size": 4, "verify": VerifyPool(num_workers=num_workers)})
    assert simulate(scenario).breakdown_s["verify_s"] == pytest.approx(verify_s)


def test_generation_cost_model() -> None:
    pool = RolloutPool(call_s=1.0, decode_step_s=0.1, token_s=0.01, prefill_token_s=0.001, max_batch_seqs=2)
    lengths = np.array([10.0, 20.0, 30.0])
    # 60 tokens; decode steps = max(longest 30, ceil(60 / 2) = 30) = 30; prefill 100 tokens.
    assert generation_s(pool, np.array([100.0]), lengths, 1.0) == pytest.approx(1.0 + 3.0 + 0.6 + 0.1)
    # One sequence at a time: 60 decode steps; noise multiplies the whole call.
    single = pool.model_copy(update={"max_batch_seqs": 1})
    assert generation_s(single, np.array([100.0]), lengths, 2.0) == pytest.approx(2 * (1.0 + 6.0 + 0.6 + 0.1))
    # Attention over the context: two tasks (prompts 4 and 0) of one sequence each, 2 and 6 tokens long:
    # 2 * (4 + 1) + 6 * (0 + 3) = 28 token-contexts.
    attention = RolloutPool(kv_token_s=0.5)
    assert generation_s(attention, np.array([4.0, 0.0]), np.array([2.0, 6.0]), 1.0) == pytest.approx(14.0)


# -- properties -------------------------------------------------------------------------------------


@pytest.mark.parametrize("max_staleness", [0, 1, 2, 3])
def test_staleness_never_exceeds_the_bound(max_staleness: int) -> None:
    result = simulate(heavy_scenario(mode="async", max_staleness=max_staleness))
    assert result.staleness_max <= max_staleness
    assert sum(result.staleness_shares.values()) == pytest.approx(1.0)
    assert simulate(heavy_scenario(mode="sync")).staleness_max == 0


def test_same_seed_same_result_other_seed_other_result() -> None:
    first = simulate(heavy_scenario(mode="async")).to_dict()
    assert simulate(heavy_scenario(mode="async")).to_dict() == first
    assert simulate(heavy_scenario(mode="async", seed=1)).to_dict() != first


def test_more_workers_never_slower_with_equal_service_times() -> None:
    # Equal item times and equal calls: list scheduling cannot suffer Graham's anomalies here.
    base = one_item_scenario("sync").model_copy(update={"tasks_per_step": 12, "group_size": 4})
    rates = [simulate(base.model_copy(update={"verify": VerifyPool(num_workers=v)})).samples_per_s
             for v in (1, 2, 3, 5, 8, 48, 100)]  # fmt: skip
    assert rates == sorted(rates) and rates[-1] > rates[0]
    wide = base.model_copy(update={"verify": VerifyPool(num_workers=48)})
    engines = [simulate(wide.model_copy(update={"rollout": RolloutPool(num_workers=r, token_s=1.0)})).samples_per_s
               for r in (1, 2, 3, 4, 5, 6, 12)]  # fmt: skip
    assert engines == sorted(engines) and engines[-1] > engines[0]


def test_littles_law_in_the_verification_pool() -> None:
    # Busy verifiers on average = arrival rate x mean service time (one item per sample).
    scenario = heavy_scenario(mode="async", steps=40, warmup_steps=4)
    result = simulate(scenario)
    busy = result.utilisation["verify"] * scenario.verify.num_workers
    assert busy == pytest.approx(result.samples_per_s * result.verify_service_mean_s, rel=0.1)


def test_async_is_faster_than_sync_when_stages_can_overlap() -> None:
    assert simulate(heavy_scenario(mode="async")).samples_per_s > simulate(heavy_scenario(mode="sync")).samples_per_s


def test_fair_share_keeps_fast_domains_off_the_slow_queue() -> None:
    slow_and_fast = (DomainClass(name="slow", verify=ConstantTime(value_s=1.0)),
                     DomainClass(name="fast", verify=ConstantTime(value_s=0.01)))  # fmt: skip
    base = one_item_scenario().model_copy(update={"tasks_per_step": 40, "domains": slow_and_fast})
    fair = simulate(base.model_copy(update={"verify": VerifyPool(num_workers=2, order="fair_share")}))
    fifo = simulate(base.model_copy(update={"verify": VerifyPool(num_workers=2, order="fifo")}))
    assert fair.verify_latency_s["fast"]["p50"] < fifo.verify_latency_s["fast"]["p50"]
    assert fair.breakdown_s["verify_s"] == pytest.approx(fifo.breakdown_s["verify_s"], rel=0.1)


def test_workload_is_the_same_whatever_the_mode_and_pools() -> None:
    sync = heavy_scenario()
    other = heavy_scenario(mode="async", verify=VerifyPool(num_workers=99, timeout_s=5.0),
                           rollout=RolloutPool(num_workers=1, jitter_sigma=0.2))
    for step in (0, 5):
        a, b = Workload(sync).step(step), Workload(other).step(step)
        assert np.array_equal(a.verify_s, b.verify_s) and np.array_equal(a.response_tokens, b.response_tokens)


def test_workload_shares_lengths_and_timeout() -> None:
    scenario = heavy_scenario(tasks_per_step=400)
    work = Workload(scenario).step(0)
    shares = np.bincount(Workload(scenario).domain_class[work.task_domain], minlength=3) / 400
    assert shares == pytest.approx([0.5, 0.25, 0.25], abs=0.06)
    assert work.verify_s.max() <= 5.0 and work.response_tokens.max() <= 64 and work.response_tokens.min() >= 1
    assert work.item_domain.tolist() == np.repeat(work.task_domain, 4).tolist()


def test_service_time_draws() -> None:
    rng = np.random.default_rng(0)
    pareto = ParetoTime(scale_s=2.0, alpha=3.0)
    draws = pareto.draw(rng, 200_000)
    assert draws.min() >= 2.0 and draws.mean() == pytest.approx(pareto.mean_s, rel=0.02)  # 3 * 2 / 2 = 3
    lognormal = LognormalTime(median_s=1.0, sigma=0.5)
    assert np.median(lognormal.draw(rng, 200_000)) == pytest.approx(1.0, rel=0.02)
    assert ParetoTime(scale_s=1.0, alpha=1.0).mean_s == float("inf")


def test_a_window_needs_measured_steps() -> None:
    with pytest.raises(ValidationError):
        PipelineScenario.model_validate({**one_item_scenario().model_dump(), "warmup_steps": 6})


def test_learn_rows_packed_or_padded_per_micro_batch() -> None:
    # Two tasks of two samples: prompts 10 and 2, responses [1, 3] and [5, 5]; the second task's domain
    # sorts first. Packed rows: 11, 13, 7, 7. Micro-batches of 3 rows in domain order: [7, 7, 11] all count
    # 11, then [13].
    work = StepWork(
        task_domain=np.array([1, 0]), item_domain=np.array([1, 1, 0, 0]), item_class=np.zeros(4, dtype=int),
        prompt_tokens=np.array([10.0, 2.0]), response_tokens=np.array([1.0, 3.0, 5.0, 5.0]),
        verify_s=np.zeros(4), rollout_jitter=np.ones(2), learn_jitter=1.0,
    )  # fmt: skip
    assert sorted(work.learn_rows(None).tolist()) == [7, 7, 11, 13]
    assert work.learn_rows(3).tolist() == [11, 11, 11, 13]
    assert sorted(work.learn_rows(1).tolist()) == [7, 7, 11, 13]
    # 1 + 0.5 * (3 * 11 + 13) + 0.01 * (3 * 121 + 169) = 1 + 23 + 5.32
    learner = LearnerModel(step_s=1.0, token_s=0.5, attention_s=0.01)
    assert learn_s(learner, work.learn_rows(3), 1.0) == pytest.approx(29.32)
