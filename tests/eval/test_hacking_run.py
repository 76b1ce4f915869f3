"""`check_run` over a run directory: the run's files read back, and a code run whose programs are fitted to
the visible tests caught end to end by re-grading in the sandbox."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from posttrain.eval.hacking_run import (
    HackingConfig,
    check_run,
    read_eval_rewards,
    read_reward_series,
    write_report,
)
from posttrain.eval.sample_log import LoggedSample
from posttrain.tasks.families.code import CodeConfig
from posttrain.tasks.pool import TaskPool
from posttrain.tasks.registry import DomainEntry, DomainsConfig
from posttrain.train.config import TrainConfig
from tests.fakes.hacking_runs import lookup_table_response
from tests.verify.code_fixtures import requires_bwrap


def test_metrics_and_evaluations_are_read_back(tmp_path: Path) -> None:
    rows = [{"step": 1, "reward": 0.1, "domain/a/b/c/reward": 0.25, "domain/a/b/c/weight": 1.0},
            {"step": 2, "domain/a/b/c/reward": 0.5, "domain/d/e/f/reward": 1}]  # fmt: skip
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert read_reward_series(tmp_path) == {"a/b/c": [(0, 0.25), (1, 0.5)], "d/e/f": [(1, 1.0)]}
    (tmp_path / "eval_base.json").write_text(json.dumps({"a/b/c": {"task_ids": ["t1", "t2"], "rewards": [0.0, 1.0]}}))
    (tmp_path / "eval_base_sampled.json").write_text(json.dumps({"a/b/c": {"task_ids": ["t1"], "fractions": [1.0]}}))
    assert [(e.label, e.task_id, e.reward) for e in read_eval_rewards(tmp_path)] == [("base", "t1", 0.0),
                                                                                     ("base", "t2", 1.0)]  # fmt: skip
    document = check_run(tmp_path, HackingConfig())
    assert document["samples"] == 0 and document["notes"] and write_report(tmp_path, document).is_file()


@requires_bwrap
def test_a_code_run_fitted_to_its_tests_and_a_paid_canary_are_caught(tmp_path: Path) -> None:
    domains = DomainsConfig(domains=[DomainEntry(family=CodeConfig(families=["integers"], levels=["easy"],
                                                                   humaneval=False))])  # fmt: skip
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(TrainConfig(domains=domains).model_dump(mode="json")))
    pool = TaskPool.from_config(domains)
    samples = []
    for i in range(24):
        task = pool.task("code/function/integers@easy", i)
        response = task.answer if i % 2 else lookup_table_response(task)  # both pass the task's own tests
        samples.append(LoggedSample(i // 4, task.domain_id, task.id, 0, i // 4, response or "", 30, 1.0, True, "none",
                                    {"status": "ok", "tests_passed": 6}, verifier="code_tests",
                                    response_chars=len(response or "")))  # fmt: skip
    canary = pool.task("code/canary/impossible", 0)
    samples.append(LoggedSample(5, canary.domain_id, canary.id, 0, 5, "```python\ndef f(x): ...\n```", 9, 1.0, True,
                                "none", verifier="code_tests", canary=True))  # fmt: skip
    (tmp_path / "samples.jsonl").write_text("".join(json.dumps(s.to_dict()) + "\n" for s in samples))
    document = check_run(tmp_path, HackingConfig(regrade_fraction=1.0))
    fired = {(a["detector"], a["domain_id"]): a for a in document["alarms"] if a["fired"]}
    assert set(fired) == {("verifier_disagreement", "code/function/integers@easy"),
                          ("canary_reward", "code/canary/impossible")}  # fmt: skip
    disagreement = fired[("verifier_disagreement", "code/function/integers@easy")]
    assert disagreement["stats"]["n"] == 24 and disagreement["stats"]["primary_only"] == 12
    assert all("_T = " in e["response"] for e in disagreement["examples"])
