"""Agent domains in evaluation, SFT and the RL loop: gold episodes laid out as the runner lays them out,
greedy episodes in `evaluate`, and a training run over an environment domain end to end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from posttrain.envs.base import run_scripted
from posttrain.envs.runner import transcript_tokens
from posttrain.eval.evaluate import evaluate
from posttrain.rollout import NativeEngine, PromptRenderer
from posttrain.tasks.base import GOLD_TURNS
from posttrain.tasks.pool import TaskPool
from posttrain.tasks.registry import DomainEntry, DomainsConfig, PluginFamilyConfig
from posttrain.tasks.validate import validate_domain
from posttrain.train.base_model import gold_transcript, sft_batch
from posttrain.train.config import TrainConfig
from posttrain.train.loop import train
from posttrain.verify import ExecutorConfig

KV = "plugin/example/kv"


def kv_domains(failure_rate: float = 0.3) -> DomainsConfig:
    family = PluginFamilyConfig(plugin="tests.fakes.families:make_kv", params={"failure_rate": failure_rate})
    return DomainsConfig(domains=[DomainEntry(family=family)])


@pytest.fixture(scope="module")
def pool() -> TaskPool:
    return TaskPool.from_config(kv_domains())


def test_an_environment_domain_validates_with_its_gold_turns(pool: TaskPool) -> None:
    assert pool.registry.is_episodic(KV)
    check = validate_domain(pool, KV, num_tasks=4)
    assert check.ok, check.failures


def test_gold_episode_tokens_mask_exactly_the_assistant_messages(pool: TaskPool, tokenizer: Any) -> None:
    renderer = PromptRenderer(tokenizer)
    task = pool.task(KV, 0)
    messages, score = run_scripted(pool.registry.environment(KV), task, task.metadata[GOLD_TURNS])
    assert score.passed
    ids, mask = transcript_tokens(renderer, messages)
    segments, current = [], []
    for token, m in zip(ids, mask, strict=True):
        if m:
            current.append(token)
        elif current:
            segments.append(current)
            current = []
    segments += [current] if current else []
    assistant = [m["content"] for m in messages if m["role"] == "assistant"]
    assert [renderer.decode(s) for s in segments] == assistant
    assert all(s[-1] == renderer.end_of_turn_id for s in segments)
    # The chat template applied to the whole transcript gives the same tokens (ChatML only appends).
    last = max(i for i, m in enumerate(messages) if m["role"] == "assistant")
    assert ids == renderer.messages_ids(messages[: last + 1])[: len(ids)]


def test_sft_rows_of_agent_tasks_train_every_assistant_turn(pool: TaskPool, tokenizer: Any) -> None:
    renderer = PromptRenderer(tokenizer)
    tasks = [pool.task(KV, i) for i in range(3)]
    transcript = gold_transcript(pool)
    input_ids, mask, labels = sft_batch(renderer, tasks, transcript)
    for row, task in enumerate(tasks):
        ids, loss_mask = transcript_tokens(renderer, transcript(task) or [])
        assert input_ids[row, : len(ids)].tolist() == ids
        assert (labels[row] != -100).sum().item() == sum(loss_mask)
    cut = sft_batch(renderer, tasks, transcript, max_tokens=40)[0]
    assert cut.shape[1] == 40


def test_evaluate_plays_agent_domains_as_greedy_episodes(pool: TaskPool, tokenizer: Any, model: Any) -> None:
    grader = pool.registry.grader(ExecutorConfig(num_workers=0))
    result = evaluate(NativeEngine(model), PromptRenderer(tokenizer), pool, [KV], grader.grade, num_tasks=4,
                      max_new_tokens=8, max_total_tokens=2000)  # fmt: skip
    domain = result[KV]
    assert domain.num_tasks == 4 and domain.infra_errors == 0
    assert 0 < domain.mean_response_tokens <= 16 * 8  # policy tokens over every turn of the episode
    assert 0.0 <= domain.mean_reward <= 1.0


def test_rl_loop_trains_on_agent_episodes(tmp_path: Path, tokenizer: Any, model: Any) -> None:
    model_dir = tmp_path / "model"
    model.config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    config = TrainConfig.model_validate({
        "steps": 2, "tasks_per_step": 2, "threads": 1, "model": {"path": str(model_dir)},
        "domains": kv_domains().model_dump(), "mixture": {"kind": "uniform"},
        "rollout": {"engine": {"kind": "native"}, "group_size": 3, "max_new_tokens": 8,
                    "episode": {"max_total_tokens": 2000}},
        "reward": {"workers": 0}, "filter": {"enabled": False},
        "policy": {"lr": 1e-3, "micro_batch_size": 8}, "eval": {"tasks_per_domain": 2, "max_new_tokens": 8},
    })  # fmt: skip
    train(config, tmp_path / "run", log=lambda _: None)
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 2
    assert all(row["logprob_mismatch"] < 1e-3 for row in rows)
    assert all(row["episode/turns"] >= 1 for row in rows)
