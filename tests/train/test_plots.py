"""A run directory's plots: drawn from the files the run's own writers leave, smoothing by hand."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from posttrain.curriculum import DomainStats
from posttrain.eval.agent_metrics import episode_metrics
from posttrain.eval.evaluate import DomainEval
from posttrain.eval.stats import bootstrap_ci
from posttrain.train.config import TrainConfig
from posttrain.train.outputs import Outputs
from posttrain.train.plots import (
    agent_domains,
    read_evals,
    read_metrics,
    smooth,
    smoothing_half_width,
    write_plots,
)
from posttrain.types import Score

DOMAINS = ["math/arithmetic/add@easy", "text/strings/reverse@easy", "data/lists/sum@easy"]


def _eval(domain: str, rewards: list[float]) -> DomainEval:
    low, high = bootstrap_ci(rewards)
    mean = sum(rewards) / len(rewards)
    return DomainEval(domain, len(rewards), mean, mean, 0, 1.0, ci_low=low, ci_high=high,
                      task_ids=tuple(f"t{i}" for i in range(len(rewards))), rewards=tuple(rewards))


def _evals(num_passed: int) -> dict[str, DomainEval]:
    return {d: _eval(d, [1.0] * num_passed + [0.0] * (10 - num_passed)) for d in DOMAINS}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run dir written by `Outputs` (plots included): base, a periodic eval at step 3 and final evals,
    a sampled eval file that is not to be drawn; the last domain is not sampled on odd steps (its weight
    is still logged)."""
    run_dir, steps = tmp_path_factory.mktemp("run"), 6
    outputs = Outputs(run_dir, TrainConfig(seed=3, steps=steps), DOMAINS)
    base = _evals(2)
    outputs.write_eval("base", base)
    for step in range(steps):
        weights = {DOMAINS[0]: 0.5 - 0.05 * step, DOMAINS[1]: 0.3, DOMAINS[2]: 0.2 + 0.05 * step}
        sampled = DOMAINS if step % 2 == 0 else DOMAINS[:2]
        stats = {d: DomainStats(n=8, mean_reward=step / steps, pass_rate=step / steps) for d in sampled}
        outputs.log_step(step, {"loss": 0.1}, stats, weights, {"filtered_fraction": 0.0}, infra_failures=0)
        if step + 1 == 3:
            outputs.write_eval("step3", _evals(4))
    final = _evals(8)
    outputs.write_eval("final", final)
    (run_dir / "eval_final_sampled.json").write_text("{}")
    summary = outputs.write_summary(base, final, steps=steps)  # writes the plots too
    outputs.close()
    assert summary["domains_improved_significantly"] == 3
    return run_dir


def test_plots_of_a_written_run_dir_have_content(run_dir: Path) -> None:
    import matplotlib.image

    assert sorted(p.name for p in (run_dir / "plots").iterdir()) == ["mixture.png", "reward.png"]
    for path in (run_dir / "plots").iterdir():
        pixels = matplotlib.image.imread(path)  # [H, W, 4] in [0, 1]
        assert pixels.shape[0] > 300 and pixels.shape[1] > 600
        drawn = (pixels[..., :3] < 0.9).any(axis=-1).mean()  # share of pixels that are not (near) white
        assert drawn > 0.02, path.name


def test_evals_are_placed_at_their_steps(run_dir: Path) -> None:
    evals = read_evals(run_dir, last_step=6)  # the sampled eval file is not among them
    assert list(evals) == [0, 3, 6]
    assert evals[3][DOMAINS[1]]["mean_reward"] == 0.4
    assert evals[6][DOMAINS[1]]["ci_low"] <= 0.8 <= evals[6][DOMAINS[1]]["ci_high"]


def test_run_without_steps_has_no_plots(tmp_path: Path) -> None:
    (tmp_path / "metrics.jsonl").write_text("")
    assert write_plots(tmp_path) == []
    assert not (tmp_path / "plots").exists()


def test_smooth_pools_the_samples_of_a_centred_window() -> None:
    steps, values, counts = [1, 2, 3, 5], [0.0, 1.0, 0.5, 1.0], [1, 1, 2, 4]
    # half width 1; step 4 was not sampled, so step 5's window holds itself only:
    #   step 1: steps 1, 2     -> (0*1 + 1*1) / 2         = 0.5
    #   step 2: steps 1, 2, 3  -> (0*1 + 1*1 + 0.5*2) / 4 = 0.5
    #   step 3: steps 2, 3     -> (1*1 + 0.5*2) / 3       = 2/3
    #   step 5: step 5         -> 1*4 / 4                 = 1.0
    assert smooth(steps, values, counts, half_width=1) == pytest.approx([0.5, 0.5, 2 / 3, 1.0])
    # half width 0 is the raw values; a window without samples has no value
    assert smooth(steps, values, counts, half_width=0) == pytest.approx(values)
    assert math.isnan(smooth([1], [0.5], [0], half_width=3)[0])


def test_smoothing_window_scales_with_the_run() -> None:
    assert smoothing_half_width(200) == 10  # a 21-step window
    assert smoothing_half_width(6) == 2


def test_metrics_rows_of_a_repeated_step_keep_the_last(tmp_path: Path) -> None:
    rows = [{"step": 1, "reward": 0.1}, {"step": 2, "reward": 0.2}, {"step": 2, "reward": 0.3}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert read_metrics(tmp_path / "metrics.jsonl") == [rows[0], rows[2]]


EVAL_KEYS = {"domain_id", "num_tasks", "mean_reward", "pass_rate", "infra_errors", "mean_response_tokens",
             "ci_low", "ci_high", "task_ids", "rewards"}  # fmt: skip
"""An eval file entry of a single-turn domain, exactly as before agent metrics existed."""


def test_single_turn_eval_files_and_plots_have_no_agent_part(run_dir: Path) -> None:
    for label in ("base", "step3", "final"):
        doc = json.loads((run_dir / f"eval_{label}.json").read_text())
        assert all(set(entry) == EVAL_KEYS for entry in doc.values())
    assert write_plots(run_dir) == [run_dir / "plots" / "reward.png", run_dir / "plots" / "mixture.png"]
    assert not (run_dir / "plots" / "agent.png").exists()


def _episodes(num_passed: int, num_errored: int) -> dict[str, float]:
    """Ten KV-like episodes: the first `num_passed` pass, the first `num_errored` hit a tool error."""
    scores = [Score(reward=float(i < num_passed), passed=i < num_passed,
                    details={"turns": 3, "tool_calls": 2, "tool_calls_ok": 2 - (i < num_errored),
                             "tool_errors": int(i < num_errored), "malformed_calls": 0, "recovered": False,
                             "end_reason": "completed", "completion": 0.5 + 0.5 * (i < num_passed)})
              for i in range(10)]  # fmt: skip
    return episode_metrics(scores)


def _write_run(run_dir: Path, agent: bool) -> None:
    """Two domains, three evals; the first domain is an agent domain when `agent`."""
    outputs = Outputs(run_dir, TrainConfig(seed=3, steps=4), DOMAINS[:2])
    for step in range(4):
        stats = {d: DomainStats(n=8, mean_reward=step / 4, pass_rate=step / 4) for d in DOMAINS[:2]}
        outputs.log_step(step, {}, stats, dict.fromkeys(DOMAINS[:2], 0.5), {}, infra_failures=0)
    evals = {}
    for label, passed in (("base", 2), ("step2", 5), ("final", 8)):
        result = {d: _eval(d, [1.0] * passed + [0.0] * (10 - passed)) for d in DOMAINS[:2]}
        if agent:
            result[DOMAINS[0]] = replace(result[DOMAINS[0]], agent=_episodes(passed, 4))
        outputs.write_eval(label, result)
        evals[label] = result
    outputs.write_summary(evals["base"], evals["final"], steps=4)
    outputs.close()


def test_agent_domains_get_their_own_figure_and_leave_the_others_alone(tmp_path: Path) -> None:
    import matplotlib.image

    plain, agent = tmp_path / "plain", tmp_path / "agent"
    _write_run(plain, agent=False)
    _write_run(agent, agent=True)
    assert agent_domains(read_evals(plain, 4)) == []
    assert agent_domains(read_evals(agent, 4)) == [DOMAINS[0]]
    assert read_evals(agent, 4)[2][DOMAINS[0]]["agent"]["success_rate"] == 0.5
    assert sorted(p.name for p in (agent / "plots").iterdir()) == ["agent.png", "mixture.png", "reward.png"]
    for name in ("reward.png", "mixture.png"):  # the agent part changes no pixel of the other plots
        before = matplotlib.image.imread(plain / "plots" / name)
        after = matplotlib.image.imread(agent / "plots" / name)
        assert before.shape == after.shape and (before == after).all(), name
    pixels = matplotlib.image.imread(agent / "plots" / "agent.png")
    assert (pixels[..., :3] < 0.9).any(axis=-1).mean() > 0.02
