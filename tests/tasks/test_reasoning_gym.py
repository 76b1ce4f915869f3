"""The reasoning-gym family: ids, levels, gold = 1.0, empty/garbage = 0.0, determinism, exclusions."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from posttrain.tasks.base import DomainFamily
from posttrain.tasks.families.reasoning_gym import (
    CLASS_OF_CATEGORY,
    EXCLUDED,
    HASH_SEED_DEPENDENT,
    ReasoningGymFamily,
    ReasoningGymFamilyConfig,
    available_datasets,
    clear_caches,
)
from posttrain.types import DomainSpec, ErrorKind, Task, TaxonomyPath
from posttrain.verify import ReasoningGymConfig, Verifier, build_verifier
from posttrain.verify.gym import decode_entry, encode_entry

GARBAGE = "zzq ~~ ###garbage### \x00 \\boxed{qqzx} Answer: nonsense-token-7f3"
VALIDITY_SCORED = ["boxnet", "graph_color", "propositional_logic", "rubiks_cube", "rush_hour"]
SAMPLE = [
    *VALIDITY_SCORED,
    "basic_arithmetic",  # plain string answers
    "arc_agi",  # tuple-valued metadata compared by equality
    "aiw",  # enum-valued config fields
    "time_intervals",  # date-valued config fields
    "binary_matrix",  # multi-line answers
    "knight_swap",  # curriculum unusable: default config
]


@pytest.fixture(scope="module")
def sample_family() -> ReasoningGymFamily:
    return ReasoningGymFamily(ReasoningGymFamilyConfig(datasets=SAMPLE))


@pytest.fixture(scope="module")
def full_family() -> ReasoningGymFamily:
    return ReasoningGymFamily(ReasoningGymFamilyConfig())


def _check_domain(family: ReasoningGymFamily, spec: DomainSpec, num_tasks: int) -> list[str]:
    verifier = build_verifier(family.verifier(spec))
    problems = []
    for index in range(num_tasks):
        task = family.task(spec, index, seed=0)
        gold, empty, garbage = (verifier.score(task, r) for r in (task.answer or "", "", GARBAGE))
        if (gold.reward, gold.passed) != (1.0, True):
            problems.append(f"{task.id}: gold scored {gold.reward} ({gold.message})")
        for name, score in (("empty", empty), ("garbage", garbage)):
            if (score.reward, score.error) != (0.0, ErrorKind.MODEL):
                problems.append(f"{task.id}: {name} scored {score.reward} ({score.error})")
    return problems


def test_family_satisfies_the_protocol(sample_family: ReasoningGymFamily) -> None:
    assert isinstance(sample_family, DomainFamily)


def test_sample_gold_scores_one_and_empty_garbage_zero(sample_family: ReasoningGymFamily) -> None:
    problems = [p for spec in sample_family.domains() for p in _check_domain(sample_family, spec, 2)]
    assert problems == []


@pytest.mark.slow
def test_every_domain_gold_one_empty_garbage_zero(full_family: ReasoningGymFamily) -> None:
    problems = [p for spec in full_family.domains() for p in _check_domain(full_family, spec, 3)]
    assert problems == []


def test_at_least_300_domains_in_5_classes(full_family: ReasoningGymFamily) -> None:
    specs = full_family.domains()
    assert len(specs) >= 300 and len({spec.cls for spec in specs}) >= 5


def test_domain_ids_follow_the_taxonomy(full_family: ReasoningGymFamily) -> None:
    classes = set(CLASS_OF_CATEGORY.values())
    for spec in full_family.domains():
        path = TaxonomyPath.parse(spec.id)
        assert (path.cls in classes, path.family, path.level in ("easy", "medium", "hard")) == (
            True,
            "reasoning_gym",
            True,
        ), spec.id


def test_excluded_datasets_are_not_offered() -> None:
    assert not set(EXCLUDED) & set(available_datasets())


def test_asking_for_an_excluded_dataset_names_the_reason() -> None:
    family = ReasoningGymFamily(ReasoningGymFamilyConfig(datasets=["game_of_life_halting"]))
    with pytest.raises(ValueError, match="bool"):
        family.domains()


def test_levels_differ_where_the_curriculum_allows(sample_family: ReasoningGymFamily) -> None:
    params = {
        spec.level: sample_family.verifier(spec).params  # type: ignore[union-attr]
        for spec in sample_family.domains()
        if spec.id.endswith(("basic_arithmetic@easy", "basic_arithmetic@hard"))
    }
    assert params["easy"] != params["hard"]


def test_level_without_distinct_config_says_so(sample_family: ReasoningGymFamily) -> None:
    knight = [spec for spec in sample_family.domains() if "/knight_swap@" in spec.id]
    assert all("default config" in spec.description for spec in knight)


@pytest.fixture(scope="module")
def numeric_family() -> ReasoningGymFamily:
    names = ["basic_arithmetic", "chain_sum", "leg_counting"]
    return ReasoningGymFamily(ReasoningGymFamilyConfig(datasets=names, levels=["easy"]))


def _tasks_and_verifiers(family: ReasoningGymFamily, num_tasks: int) -> list[tuple[Task, Verifier, str]]:
    out = []
    for spec in family.domains():
        verifier = build_verifier(family.verifier(spec))
        for index in range(num_tasks):
            task = family.task(spec, index, seed=0)
            out.append((task, verifier, str(decode_entry(task.gold)["answer"])))
    return out


def test_a_final_answer_stated_in_prose_passes(numeric_family: ReasoningGymFamily) -> None:
    # what small instruct models write instead of tags
    for task, verifier, gold in _tasks_and_verifiers(numeric_family, 4):
        for response in (f"The answer is {gold}.", f"Answer: {gold}", f"The final answer to this problem is {gold}."):
            assert verifier.score(task, response).passed, (task.id, response)


def test_a_response_listing_candidates_does_not_pass(numeric_family: ReasoningGymFamily) -> None:
    candidates = [str(n) for n in range(-100, 1000)]
    for task, verifier, gold in _tasks_and_verifiers(numeric_family, 4):
        assert gold in candidates
        others = [c for c in candidates if c != gold]
        responses = [
            ", ".join(candidates),
            "The answer is " + ", ".join(candidates) + ".",
            "The answer is " + " or ".join(candidates),
            "\n".join(f"The answer is {c}." for c in [*candidates, others[0]]),  # only the last one counts
        ]
        for response in responses:
            assert not verifier.score(task, response).passed, (task.id, response[:80])


def test_verifier_is_the_datasets_own_scorer(sample_family: ReasoningGymFamily) -> None:
    spec = sample_family.domains()[0]
    config = sample_family.verifier(spec)
    assert isinstance(config, ReasoningGymConfig) and config.dataset in spec.id


def test_task_ids_and_index_bounds(sample_family: ReasoningGymFamily) -> None:
    spec = sample_family.domains()[0]
    assert sample_family.task(spec, 5, seed=0).id == f"{spec.id}#5"
    with pytest.raises(IndexError):
        sample_family.task(spec, spec.size or 0, seed=0)


def test_same_seed_same_tasks_after_clearing_caches(sample_family: ReasoningGymFamily) -> None:
    specs = [
        s for s in sample_family.domains() if s.id.split("/")[2].startswith(("basic_", "graph_", "arc_"))
    ]
    first = [sample_family.task(spec, 1, seed=3) for spec in specs]
    clear_caches()
    assert [sample_family.task(spec, 1, seed=3) for spec in specs] == first


def test_different_seeds_give_different_tasks(sample_family: ReasoningGymFamily) -> None:
    spec = next(s for s in sample_family.domains() if "basic_arithmetic@hard" in s.id)
    assert sample_family.task(spec, 0, seed=0).prompt != sample_family.task(spec, 0, seed=1).prompt


_HASHES_SCRIPT = """
import json, sys
from posttrain.tasks.families.reasoning_gym import ReasoningGymFamily, ReasoningGymFamilyConfig
names = json.loads(sys.argv[1])
family = ReasoningGymFamily(ReasoningGymFamilyConfig(datasets=names))
hashes = {s.id: [family.task(s, i, 7).content_hash for i in range(2)] for s in family.domains()}
print()
print("HASHES", json.dumps(hashes))
"""


def _hashes_in_subprocess(names: list[str] | str, hash_seed: str) -> dict[str, list[str]]:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    args = [sys.executable, "-c", _HASHES_SCRIPT, json.dumps(names)]
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600, check=True)
    marked = [line for line in done.stdout.splitlines() if line.startswith("HASHES ")]  # generators print too
    return json.loads(marked[-1].removeprefix("HASHES "))


def test_generation_is_deterministic_across_processes() -> None:
    names = ["basic_arithmetic", "graph_color", "aiw", "letter_counting"]
    assert _hashes_in_subprocess(names, "1") == _hashes_in_subprocess(names, "2")


@pytest.mark.slow
def test_only_the_listed_datasets_depend_on_the_hash_seed() -> None:
    first, second = _hashes_in_subprocess("all", "1"), _hashes_in_subprocess("all", "2")
    differing = {domain.split("/")[2].split("@")[0] for domain in first if first[domain] != second[domain]}
    assert differing == set(HASH_SEED_DEPENDENT)


@pytest.mark.parametrize(
    "value",
    [
        {"grid": ((1, 2), (3, 4)), "keys": {0: "a", 1: "b"}, "tags": {"x", "y"}, "inf": float("inf")},
        [(), {}, [], None, True, 1.5, "s"],
    ],
)
def test_entry_encoding_round_trips(value: object) -> None:
    encoded = encode_entry(value)
    assert decode_entry(json.loads(json.dumps(encoded))) == value
