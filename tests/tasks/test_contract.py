"""Contract tests run over every registered family kind.

For each family: the gold answer scores 1.0, empty and garbage score 0.0 without raising, generation is
deterministic under a seed, and no task content lands in both splits over 10,000 samples.
"""

from __future__ import annotations

import json
import random
import typing
from pathlib import Path

import pytest

from posttrain.tasks.families.arithmetic import ArithmeticConfig
from posttrain.tasks.families.bfcl import BfclConfig
from posttrain.tasks.families.bfcl_multi import BfclMultiConfig
from posttrain.tasks.families.cad import CadConfig
from posttrain.tasks.families.code import CodeConfig
from posttrain.tasks.families.gamedev import GameDevConfig
from posttrain.tasks.families.jsonl import JsonlConfig
from posttrain.tasks.families.knowledge import KnowledgeConfig
from posttrain.tasks.families.lists import ListsConfig
from posttrain.tasks.families.reasoning_gym import ReasoningGymFamilyConfig
from posttrain.tasks.families.strings import StringsConfig
from posttrain.tasks.families.tool_use import ToolUseConfig
from posttrain.tasks.pool import TaskPool
from posttrain.tasks.registry import DomainEntry, DomainRegistry, FamilyConfig, PluginFamilyConfig
from posttrain.tasks.terminal.family import TerminalConfig, TerminalSource
from posttrain.tasks.validate import validate_domain

JSONL_PATH = Path(__file__).parent / "data" / "tiny_gsm8k.jsonl"

FAMILIES: dict[str, object] = {
    "arithmetic": ArithmeticConfig(),
    "strings": StringsConfig(),
    "lists": ListsConfig(),
    "jsonl": JsonlConfig(path=JSONL_PATH, format="gsm8k"),
    "reasoning_gym": ReasoningGymFamilyConfig(datasets=["basic_arithmetic", "countdown", "word_sorting"]),
    # Irrelevance categories are left out: any reply without a call passes there, garbage included.
    "bfcl": BfclConfig(categories=["simple_python", "parallel_multiple", "live_multiple"]),
    "tools": ToolUseConfig(),
    "bfcl_multi": BfclMultiConfig(isolation="process"),
    "code": CodeConfig(),
    "gamedev": GameDevConfig(),
    # Easy levels only: rendering the harder references takes CGAL seconds (all levels: test_cad_families.py).
    "cad": CadConfig(levels=["easy"]),
    "terminal": TerminalConfig(sources=[TerminalSource(path=Path(__file__).parent / "data" / "terminal")]),
    "knowledge": KnowledgeConfig(),
    "plugin": PluginFamilyConfig(plugin="tests.fakes.families:make_echo", params={"alphabet": "xyz"}),
}


def test_every_family_kind_has_a_contract_case() -> None:
    union = typing.get_args(typing.get_args(FamilyConfig)[0])
    kinds = {cls.model_fields["kind"].default for cls in union}
    assert kinds == set(FAMILIES)


def pool_for(kind: str) -> TaskPool:
    return TaskPool(DomainRegistry([DomainEntry(family=FAMILIES[kind])]), seed=3)  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", sorted(FAMILIES))
def test_gold_one_empty_and_garbage_zero(kind: str) -> None:
    pool = pool_for(kind)
    for domain_id in pool.registry.ids():
        check = validate_domain(pool, domain_id, num_tasks=3)
        assert check.ok, check.failures


@pytest.mark.parametrize("kind", sorted(FAMILIES))
def test_generation_is_deterministic_under_seed(kind: str) -> None:
    first, second = pool_for(kind), pool_for(kind)
    for domain_id in first.registry.ids():
        a = first.sample(domain_id, 5, "train", random.Random(11))
        b = second.sample(domain_id, 5, "train", random.Random(11))
        assert a == b


@pytest.mark.parametrize(
    "kind",
    ["arithmetic", "strings", "lists", "jsonl", "code", "cad", "plugin", pytest.param("reasoning_gym", marks=pytest.mark.slow),
     pytest.param("gamedev", marks=pytest.mark.slow), pytest.param("knowledge", marks=pytest.mark.slow)],
)
def test_no_train_eval_overlap_over_10k_samples(kind: str) -> None:
    pool = pool_for(kind)
    ids = pool.registry.ids()
    rng = random.Random(0)
    per_domain = max(1, 10_000 // len(ids))
    train, evals = set(), set()
    for domain_id in ids:
        train |= {t.content_hash for t in pool.sample(domain_id, per_domain, "train", rng)}
        evals |= {t.content_hash for t in pool.sample(domain_id, max(1, per_domain // 10), "eval", rng)}
    assert train and evals and not train & evals


def test_fixture_dataset_is_well_formed() -> None:
    rows = [json.loads(line) for line in JSONL_PATH.read_text().splitlines()]
    assert len(rows) >= 20 and all("####" in r["answer"] for r in rows)
