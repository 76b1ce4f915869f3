"""The sample log: which graded samples a step keeps, how they are cut and trimmed, and reading them back."""

from __future__ import annotations

import json
import math
from pathlib import Path

from posttrain.eval.sample_log import (
    LoggedSample,
    excerpt,
    read_samples,
    sample_records,
    spread_draw,
    trim_details,
)
from posttrain.tasks.base import CANARY
from posttrain.types import Group, Score, Task, Trajectory
from posttrain.verify.configs import ExactConfig, NumericConfig


def _group(domain: str, index: int, rewards: list[float], canary: bool = False, response: str = "r") -> Group:
    task = Task(id=f"{domain}#{index}", domain_id=domain, prompt=f"prompt {index}", gold="1",
                metadata={CANARY: True} if canary else {})  # fmt: skip
    trajectories = tuple(Trajectory.single_turn(task, [1, 2], [3, 4, 5], [-0.1] * 3, f"{response}{index}.{i}",
                                                group_index=i, policy_version=7) for i in range(len(rewards)))  # fmt: skip
    scores = tuple(Score.correct(extracted="1") if r == 1 else Score.wrong(r, "no") for r in rewards)
    return Group(task=task, trajectories=trajectories, scores=scores)


def _kind(domain_id: str) -> object:
    return NumericConfig() if domain_id.startswith("math") else ExactConfig()


def test_the_draw_spreads_over_groups_before_taking_a_second_member() -> None:
    groups = [_group("a/b/c", i, [1.0, 0.0, 0.0, 1.0]) for i in range(3)]
    chosen = spread_draw(groups, 5, "seed")
    assert len({g.task.id for g, _ in chosen[:3]}) == 3  # one member of each group first
    assert len({(g.task.id, m) for g, m in chosen}) == 5  # never the same member twice
    assert spread_draw(groups, 5, "seed") == chosen  # seeded
    assert len(spread_draw(groups, 100, "seed")) == 12  # at most every sample


def test_records_carry_the_schema_fields_per_domain_and_step() -> None:
    groups = [_group("math/x/y", i, [1.0, 0.0]) for i in range(4)] + [_group("text/x/y", 9, [0.0, 0.0], canary=True)]
    records = sample_records(3, groups, per_domain=3, max_chars=100, prompt_chars=50, seed=0, verifier_of=_kind)
    assert [r.domain_id for r in records].count("math/x/y") == 3
    assert [r.domain_id for r in records].count("text/x/y") == 2  # fewer samples than asked: all of them
    first = next(r for r in records if r.domain_id == "math/x/y")
    assert first.step == 3 and first.policy_version == 7 and first.num_tokens == 3 and first.verifier == "numeric"
    assert first.error_kind == ("none" if first.passed else "model") and first.prompt.startswith("prompt ")
    assert all(r.canary for r in records if r.domain_id == "text/x/y")
    assert not any(r.canary for r in records if r.domain_id == "math/x/y")
    again = sample_records(3, groups, per_domain=3, max_chars=100, prompt_chars=50, seed=0, verifier_of=_kind)
    assert again == records
    other_step = sample_records(4, groups, per_domain=3, max_chars=100, prompt_chars=50, seed=0, verifier_of=_kind)
    assert [r.key.split(":", 1)[1] for r in other_step] != [r.key.split(":", 1)[1] for r in records]


def test_a_long_response_keeps_head_and_tail_and_says_it_was_cut() -> None:
    text = "H" * 500 + "T" * 500
    cut = excerpt(text, 100)
    assert len(cut) == 100 and cut.startswith("H") and cut.endswith("T" * 50) and " [...] " in cut
    assert excerpt("short", 100) == "short"
    group = _group("a/b/c", 0, [1.0], response="x" * 300)
    record = sample_records(0, [group], 1, 100, 0, 0, _kind)[0]
    assert record.is_cut and record.response_chars == len("x" * 300 + "0.0") and record.prompt == ""


def test_details_are_trimmed_to_small_json() -> None:
    details = {"a": 1, "nan": math.nan, "long": "z" * 1000, "list": list(range(100)), "obj": object(),
               "nested": {"one": {"two": {"three": 3}}, "x": [1, [2, [3]]]}, "grid": [[1, 2], [3, [4]]]}  # fmt: skip
    trimmed = trim_details(details)
    assert trimmed["a"] == 1 and trimmed["nan"] is None and len(trimmed["long"]) == 200
    assert trimmed["list"] == list(range(32)) and "obj" not in trimmed
    assert trimmed["nested"] == {"one": {}, "x": [1]}  # two levels of containers below the top
    assert trimmed["grid"] == [[1, 2], [3]]
    json.dumps(trimmed)


def test_reading_keeps_the_last_record_of_a_repeated_key(tmp_path: Path) -> None:
    path = tmp_path / "samples.jsonl"
    rows = [LoggedSample(0, "a/b/c", "a/b/c#1", 0, 0, "first", 1, 0.0, False, "model"),
            LoggedSample(1, "a/b/c", "a/b/c#1", 0, 1, "other", 1, 1.0, True, "none"),
            LoggedSample(0, "a/b/c", "a/b/c#1", 0, 0, "again", 1, 1.0, True, "none")]  # fmt: skip
    path.write_text("".join(json.dumps({**r.to_dict(), "future_field": 1}) + "\n" for r in rows) + "\n")
    assert [s.response for s in read_samples(path)] == ["other", "again"]
    assert read_samples(tmp_path / "missing.jsonl") == []
