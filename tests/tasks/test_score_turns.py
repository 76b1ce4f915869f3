"""`posttrain score` with `"turns"` lines: the example KV environment as a plugin family, graded as episodes."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from posttrain.cli import main
from posttrain.envs.base import EPISODE_METRICS, EpisodeLimits, ToolEnv
from posttrain.envs.example import kv_env, kv_gold_turns, make_kv_task
from posttrain.tasks.base import GOLD_TURNS, EnvironmentFamily
from posttrain.types import DomainSpec, Task
from posttrain.verify.configs import EnvironmentConfig, VerifierConfig

KV = "agent/example/kv"
ADD = "math/arithmetic/add@easy"


class KvFamily:
    """One agent domain: the example key-value store, at most `max_turns` assistant messages."""

    def __init__(self, max_turns: int = 16) -> None:
        self.max_turns = max_turns

    def domains(self) -> Sequence[DomainSpec]:
        return [DomainSpec(id=KV, family_kind="plugin", source="plugin", verifier="environment")]

    def task(self, domain: DomainSpec, index: int, seed: int) -> Task:
        task = make_kv_task(index)
        return task.model_copy(update={"metadata": {**task.metadata, GOLD_TURNS: kv_gold_turns(task)}})

    def verifier(self, domain: DomainSpec) -> VerifierConfig:
        return EnvironmentConfig()

    def environment(self, domain: DomainSpec) -> ToolEnv:
        return kv_env(limits=EpisodeLimits(max_turns=self.max_turns))


def make_kv_family(max_turns: int = 16) -> KvFamily:
    return KvFamily(max_turns)


DOMAINS_YAML = """domains:
  - family: {kind: plugin, plugin: 'tests.tasks.test_score_turns:make_kv_family', params: {max_turns: 5}}
  - family: {kind: arithmetic, ops: [add], levels: [easy]}
"""


def test_the_family_is_an_environment_family() -> None:
    assert isinstance(KvFamily(), EnvironmentFamily)


@pytest.fixture
def scored(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> dict:
    domains = tmp_path / "domains.yaml"
    domains.write_text(DOMAINS_YAML)
    tasks = [make_kv_task(i) for i in range(3)]
    gold = [kv_gold_turns(t) for t in tasks]
    lines = [
        {"task_id": tasks[0].id, "turns": gold[0]},  # 1: reward 1
        {"task_id": tasks[1].id, "turns": gold[1][:2]},  # 2: stored only, then out of turns: 1/3
        {"task_id": tasks[2].id, "turns": gold[2][:1] * 6},  # 3: stored, 5 turns then max_turns: 1/3
        {"task_id": tasks[0].id, "turns": "not a list"},  # 4: problem
        {"task_id": tasks[0].id, "turns": [1, 2]},  # 5: problem
        {"task_id": tasks[0].id, "turns": [], "response": "x"},  # 6: problem, both given
        {"task_id": tasks[0].id, "response": gold[0][0]},  # 7: one assistant message: stored only, 1/3
        {"task_id": f"{ADD}#3", "response": "nope"},  # 8: single-turn, wrong
        {"task_id": f"{ADD}#3", "turns": ["nope", "still no"]},  # 9: single-turn, joined, wrong
    ]
    responses = tmp_path / "responses.jsonl"
    responses.write_text("\n".join(json.dumps(line) for line in lines))
    assert main(["score", "--domains", str(domains), "--responses", str(responses), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_turns_are_graded_as_episodes(scored: dict) -> None:
    rows = scored["tasks"]
    assert [r["line"] for r in rows] == [1, 2, 3, 7, 8, 9]
    assert [r["reward"] for r in rows] == pytest.approx([1.0, 1 / 3, 1 / 3, 1 / 3, 0.0, 0.0])
    assert [r.get("end_reason") for r in rows] == [
        "completed",
        "policy_out_of_turns",
        "max_turns",
        "policy_out_of_turns",
        None,
        None,
    ]
    assert rows[0]["turns"] == 5 and rows[0]["tool_calls"] == 3 and rows[0]["completion"] == 1.0
    assert rows[2]["turns"] == 5 and rows[2]["tool_calls"] == 5  # the sixth message was never run
    assert set(EPISODE_METRICS) <= set(rows[3])
    assert not any(key in rows[4] or key in rows[5] for key in EPISODE_METRICS)  # single-turn rows unchanged


def test_bad_turns_are_per_line_problems(scored: dict) -> None:
    problems = {int(p.split(": ")[0].rsplit(":", 1)[1]): p.split(": ", 1)[1] for p in scored["problems"]}
    assert problems == {4: 'expected "turns" to be a list of strings',
                        5: 'expected "turns" to be a list of strings',
                        6: 'expected exactly one of "response" and "turns"'}  # fmt: skip


def test_domain_summary_gains_episode_metrics_for_agent_domains_only(scored: dict) -> None:
    kv, add = scored["domains"]
    assert (kv["domain_id"], add["domain_id"]) == (KV, ADD)
    assert kv["n"] == 4 and kv["pass_rate"] == 0.25
    agent = kv["agent"]
    assert agent["episodes"] == 4 and agent["success_rate"] == 0.25
    assert agent["completion"] == pytest.approx((1 + 1 / 3 + 1 / 3 + 1 / 3) / 4)
    assert agent["tool_call_success"] == 1.0  # 3 + 1 + 5 + 1 calls, none failed
    assert "recovery_rate" not in agent and agent["errored_episodes"] == 0
    assert agent["end_reason/policy_out_of_turns"] == 2 and agent["end_reason/max_turns"] == 1
    assert add == {"domain_id": ADD, "n": 2, "mean_reward": 0.0, "pass_rate": 0.0, "infra_errors": 0}


def test_human_report_shows_the_episode_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    domains = tmp_path / "domains.yaml"
    domains.write_text(DOMAINS_YAML)
    task = make_kv_task(0)
    responses = tmp_path / "responses.jsonl"
    responses.write_text(json.dumps({"task_id": task.id, "turns": kv_gold_turns(task)}))
    assert main(["score", "--domains", str(domains), "--responses", str(responses)]) == 0
    out = capsys.readouterr().out
    assert "agent domains: episodes" in out and "1.000" in out
