"""The result cache: records round-trip, every key part matters, infra failures are not kept."""

from __future__ import annotations

from pathlib import Path

from posttrain.eval.cache import ResultCache, SampleRecord, SampleSlot, record_key
from posttrain.types import Score, Task

TASK = Task(id="math/arithmetic/add@easy#3", domain_id="math/arithmetic/add@easy", prompt="1+2=", gold="3")
GREEDY = {"mode": "greedy", "max_new_tokens": 8}


def test_records_round_trip_through_the_file(tmp_path: Path) -> None:
    slot = SampleSlot(TASK, GREEDY, 0, grading='{"kind":"numeric"}')
    record = SampleRecord("3", Score.correct(0.75, parsed=3, nested={"a": [1, 2]}), num_tokens=2)
    key = record_key("w1", slot)
    with ResultCache(tmp_path) as cache:
        assert cache.put_many([(key, "w1", slot, record)]) == 1
    with ResultCache(tmp_path) as cache:
        assert cache.get_many([key, "absent"]) == {key: record} and len(cache) == 1


def test_every_part_of_the_key_changes_it() -> None:
    slot = SampleSlot(TASK, GREEDY, 0, grading="g")
    key = record_key("w1", slot)
    changed = [
        record_key("w2", slot),
        record_key("w1", SampleSlot(TASK.model_copy(update={"gold": "4"}), GREEDY, 0, "g")),  # content
        record_key("w1", SampleSlot(TASK.model_copy(update={"id": "math/arithmetic/add@easy#4"}), GREEDY, 0, "g")),
        record_key("w1", SampleSlot(TASK, {**GREEDY, "max_new_tokens": 9}, 0, "g")),
        record_key("w1", SampleSlot(TASK, GREEDY, 1, "g")),
        record_key("w1", SampleSlot(TASK, GREEDY, 0, "other verifier")),
        record_key("w1", SampleSlot(TASK, GREEDY, 0, "g", extra={"system_prompt": "be brief"})),
    ]
    assert len({key, *changed}) == len(changed) + 1
    assert record_key("w1", SampleSlot(TASK, dict(reversed(GREEDY.items())), 0, "g")) == key  # order-free


def test_infra_failures_are_not_stored() -> None:
    slot = SampleSlot(TASK, GREEDY)
    with ResultCache(None) as cache:
        stored = cache.put_many([("k1", "w", slot, SampleRecord("", Score.infra("sandbox died"))),
                                 ("k2", "w", slot, SampleRecord("4", Score.wrong()))])  # fmt: skip
        assert stored == 1 and set(cache.get_many(["k1", "k2"])) == {"k2"}
