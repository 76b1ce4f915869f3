"""The RL loop end to end on a tiny random model: reward rises, resume is exact, bad configs fail clearly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from posttrain.cli import main
from posttrain.tasks.families.arithmetic import ArithmeticConfig
from posttrain.tasks.registry import DomainEntry, DomainsConfig
from posttrain.train.config import TrainConfig
from posttrain.train.loop import train
from posttrain.verify.configs import PluginVerifierConfig


@pytest.fixture
def model_dir(tiny_model_dir: Path) -> Path:
    """The session's tiny random model (tests/train/conftest.py)."""
    return tiny_model_dir


def make_config(model_dir: Path, **overrides: Any) -> TrainConfig:
    digit_reward = PluginVerifierConfig(plugin="tests.fakes.families:make_starts_with_digit")
    domains = DomainsConfig(
        domains=[DomainEntry(family=ArithmeticConfig(ops=["add"], levels=["easy"]), verifier=digit_reward)]
    )
    base: dict[str, Any] = {
        "steps": 14,
        "tasks_per_step": 8,
        "threads": 2,
        "model": {"path": str(model_dir)},
        "domains": domains.model_dump(),
        "mixture": {"kind": "uniform"},
        "rollout": {"engine": {"kind": "native"}, "group_size": 8, "max_new_tokens": 3},
        "reward": {"workers": 0},
        "filter": {"enabled": False},
        "policy": {"lr": 1e-2, "micro_batch_size": 64},
        "eval": {"tasks_per_domain": 4, "max_new_tokens": 3},
    }
    base.update(overrides)
    return TrainConfig.model_validate(base)


def rewards(run_dir: Path) -> list[float]:
    return [json.loads(line)["reward"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_reward_rises_on_a_trivially_learnable_domain(model_dir: Path, tmp_path: Path) -> None:
    train(make_config(model_dir), tmp_path, log=lambda _: None)
    history = rewards(tmp_path)
    # A random 300-token model rarely starts with one of the 10 digit tokens; RL must make it routine.
    assert sum(history[-3:]) / 3 > sum(history[:3]) / 3 + 0.2


def test_learnable_domain_improves_on_held_out_tasks_with_interval_clear_of_zero(
    model_dir: Path, tmp_path: Path
) -> None:
    digit_reward = PluginVerifierConfig(plugin="tests.fakes.families:make_starts_with_digit")
    domains = DomainsConfig(  # 40% of the 100 one-digit sums are held out
        eval_fraction=0.4,
        domains=[DomainEntry(family=ArithmeticConfig(ops=["add"], levels=["easy"]), verifier=digit_reward)],
    )
    config = make_config(model_dir, steps=14, domains=domains.model_dump(),
                         eval={"tasks_per_domain": 64, "max_new_tokens": 3})
    summary = train(config, tmp_path, log=lambda _: None)
    domain = summary["domains"]["math/arithmetic/add@easy"]
    assert domain["num_paired"] >= 30
    assert domain["delta_ci"][0] > 0 and domain["p_value"] < 0.05 and domain["verdict"] == "improved"


def test_untrained_domains_are_evaluated_but_never_sampled(model_dir: Path, tmp_path: Path) -> None:
    digit_reward = PluginVerifierConfig(plugin="tests.fakes.families:make_starts_with_digit")
    domains = DomainsConfig(
        domains=[DomainEntry(family=ArithmeticConfig(ops=["add", "sub"], levels=["easy"]), verifier=digit_reward)],
        untrained=["*/sub@*"],
    )
    summary = train(make_config(model_dir, steps=3, domains=domains.model_dump()), tmp_path, log=lambda _: None)
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert all("domain/math/arithmetic/sub@easy/samples" not in row for row in rows)
    assert all(row["domain/math/arithmetic/add@easy/samples"] > 0 for row in rows)
    assert summary["domains"]["math/arithmetic/sub@easy"]["trained"] is False
    assert summary["num_domains"] == 1 and summary["untrained"]["num_domains"] == 1


def test_untrained_pattern_must_match_and_leave_something_to_train() -> None:
    from posttrain.errors import ConfigError

    with pytest.raises(ConfigError, match="matches no domain"):
        DomainsConfig(untrained=["nope/*"]).untrained_ids(["math/arithmetic/add@easy"])
    assert DomainsConfig(untrained=["math/*"]).untrained_ids(["math/a/b@easy", "text/c/d@easy"]) == ["math/a/b@easy"]


def test_run_dir_has_summary_metrics_and_plots(model_dir: Path, tmp_path: Path) -> None:
    summary = train(make_config(model_dir, steps=2), tmp_path, log=lambda _: None)
    assert json.loads((tmp_path / "summary.json").read_text()) == summary
    assert set(summary["domains"]) == {"math/arithmetic/add@easy"}
    assert all((tmp_path / "plots" / name).stat().st_size > 0 for name in ("reward.png", "mixture.png"))
    assert "/1 trained domains improved significantly" in summary["headline"]
    assert (tmp_path / "config.yaml").is_file()


@pytest.mark.parametrize("mode", ["verifier", "random"])  # random: the control's coin continues too
def test_resumed_run_matches_uninterrupted_run(model_dir: Path, tmp_path: Path, mode: str) -> None:
    quiet = lambda _: None  # noqa: E731
    reward = {"workers": 0, "mode": mode}
    train(make_config(model_dir, steps=4, reward=reward), tmp_path / "full", log=quiet)
    train(make_config(model_dir, steps=2, reward=reward), tmp_path / "split", log=quiet)
    train(make_config(model_dir, steps=4, reward=reward), tmp_path / "split", resume=True, log=quiet)
    rows = {run: [json.loads(x) for x in (tmp_path / run / "metrics.jsonl").read_text().splitlines()]
            for run in ("full", "split")}  # fmt: skip
    assert [r["loss"] for r in rows["split"]] == [r["loss"] for r in rows["full"]]
    assert [r["reward"] for r in rows["split"]] == [r["reward"] for r in rows["full"]]


def test_bad_config_fails_with_one_clear_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("steps: 3\nrollout: {group_sise: 4}\n")
    assert main(["train", str(path)]) == 2
    err = capsys.readouterr().err
    assert "rollout.group_sise: unknown key" in err and "Traceback" not in err


def test_unknown_preset_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", "no-such-preset"]) == 2
    assert "no preset of that name" in capsys.readouterr().err


@pytest.mark.parametrize("rollout", [{"temperature": 0.5}, {"temperature": 0.5, "top_k": 5}])
def test_sampled_logprobs_agree_with_the_update_at_any_temperature(
    model_dir: Path, tmp_path: Path, rollout: dict[str, Any]
) -> None:
    # kl_old compares the batch's old logprobs with the trainer's own forward before its first step:
    # it is ~0 only if both use the sampling temperature (with top-k the trainer recomputes them).
    settings = {"engine": {"kind": "native"}, "group_size": 8, "max_new_tokens": 3, **rollout}
    train(make_config(model_dir, steps=1, rollout=settings), tmp_path, log=lambda _: None)
    row = json.loads((tmp_path / "metrics.jsonl").read_text().splitlines()[0])
    assert abs(row["kl_old"]) < 1e-5


@pytest.mark.parametrize("backend", ["native", "hf"])
def test_eval_command_builds_through_the_composition_root(
    model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], backend: str
) -> None:
    import yaml

    config = tmp_path / "eval.yaml"
    config.write_text(yaml.safe_dump(make_config(model_dir).model_dump(mode="json")))
    argv = ["eval", "--model", str(model_dir), "--domains", str(config), "--tasks-per-domain", "3",
            "--max-new-tokens", "2", "--backend", backend, "--json"]
    assert main(argv) == 0
    rows = json.loads(capsys.readouterr().out)["domains"]
    assert [(r["domain_id"], r["num_tasks"], r["infra_errors"]) for r in rows] == [("math/arithmetic/add@easy", 3, 0)]



def test_sampled_evaluation_is_paired_in_the_summary(model_dir: Path, tmp_path: Path) -> None:
    config = make_config(model_dir, steps=1, eval={"tasks_per_domain": 4, "max_new_tokens": 3, "samples_per_task": 3})
    summary = train(config, tmp_path, log=lambda _: None)
    sampled = summary["domains"]["math/arithmetic/add@easy"]["sampled"]
    assert sampled["k"] == 3 and sampled["verdict"] in ("improved", "no significant change", "regressed")
    assert 0.0 <= sampled["base_pass_at_1"] <= sampled["base_pass_at_k"] <= 1.0
    assert (tmp_path / "eval_base_sampled.json").is_file() and (tmp_path / "eval_final_sampled.json").is_file()
    again = train(config, tmp_path / "again", log=lambda _: None)  # seeded: the same numbers
    assert again["domains"]["math/arithmetic/add@easy"]["sampled"] == sampled
