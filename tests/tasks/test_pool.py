"""Task pool: splits by content, sampling, lookup, counts."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from posttrain.errors import ConfigError
from posttrain.tasks.families.arithmetic import ArithmeticConfig
from posttrain.tasks.families.jsonl import JsonlConfig
from posttrain.tasks.pool import TaskPool
from posttrain.tasks.registry import DomainEntry, DomainRegistry, PluginFamilyConfig

JSONL_PATH = Path(__file__).parent / "data" / "tiny_gsm8k.jsonl"


@pytest.fixture
def pool() -> TaskPool:
    entries = [
        DomainEntry(family=ArithmeticConfig(ops=["add"])),
        DomainEntry(family=JsonlConfig(path=JSONL_PATH, format="gsm8k", name="tiny")),
    ]
    return TaskPool(DomainRegistry(entries), seed=0, eval_fraction=0.25)


def test_sample_returns_only_the_requested_split(pool: TaskPool) -> None:
    for split in ("train", "eval"):
        tasks = pool.sample("math/arithmetic/add@medium", 50, split, random.Random(1))
        assert {pool.split_of(t) for t in tasks} == {split}


def test_finite_dataset_split_is_stable_and_disjoint(pool: TaskPool) -> None:
    train = {t.id for t in pool.iter_split("math/jsonl/tiny", "train")}
    evals = {t.id for t in pool.iter_split("math/jsonl/tiny", "eval")}
    assert train and evals and not train & evals and len(train | evals) == 40


def test_eval_fraction_is_roughly_respected(pool: TaskPool) -> None:
    tasks = [pool.task("math/arithmetic/add@hard", i) for i in range(4000)]
    share = sum(pool.split_of(t) == "eval" for t in tasks) / len(tasks)
    assert 0.2 < share < 0.3  # eval_fraction=0.25, 4000 mostly-distinct 4-digit sums


def test_eval_tasks_are_fixed_and_distinct(pool: TaskPool) -> None:
    first = pool.eval_tasks("math/arithmetic/add@medium", 20)
    assert first == pool.eval_tasks("math/arithmetic/add@medium", 20)
    assert len({t.content_hash for t in first}) == 20


def test_get_finds_generated_and_dataset_tasks(pool: TaskPool) -> None:
    task = pool.task("math/arithmetic/add@easy", 17)
    assert pool.get(task.id) == task
    assert pool.get("math/jsonl/tiny#3").gold == pool.task("math/jsonl/tiny", 3).gold


def test_unknown_domain_suggests_close_ids(pool: TaskPool) -> None:
    with pytest.raises(ConfigError, match="did you mean math/arithmetic/add@easy"):
        pool.sample("math/arithmetic/add@eazy", 1)


def test_unknown_task_id_is_a_clear_error(pool: TaskPool) -> None:
    with pytest.raises(ConfigError, match="unknown task id"):
        pool.get("math/jsonl/tiny#nope")


def test_counts_report_sizes(pool: TaskPool) -> None:
    counts = pool.counts()
    assert counts["math/jsonl/tiny"] == 40 and counts["math/arithmetic/add@easy"] is None


@pytest.mark.parametrize("size", [None, 64])
def test_tasks_sharing_a_context_are_drawn_together_and_split_together(size: int | None) -> None:
    family = PluginFamilyConfig(plugin="tests.fakes.families:make_documents", params={"size": size})
    docs = TaskPool(DomainRegistry([DomainEntry(family=family)]), seed=1, eval_fraction=0.3)
    tasks = docs.sample("plugin/docs/lookup", 8, "train", random.Random(0))
    documents = [t.metadata["document"] for t in tasks]
    assert len(tasks) == 8 and len(set(documents)) == 2  # two whole documents of four questions
    assert all(documents.count(d) == 4 for d in set(documents))
    assert len({t.id for t in tasks}) == 8
    by_document: dict[int, set[str]] = {}
    for index in range(64):
        task = docs.task("plugin/docs/lookup", index)
        by_document.setdefault(task.metadata["document"], set()).add(docs.split_of(task))
    assert all(len(splits) == 1 for splits in by_document.values())
    assert {s for splits in by_document.values() for s in splits} == {"train", "eval"}
    evals = docs.sample("plugin/docs/lookup", 5, "eval", random.Random(0))
    assert all(docs.split_of(t) == "eval" for t in evals)
