"""Failed-trajectory replay: bounded per-domain queues, the batch share, leaving on success, state."""

from __future__ import annotations

from posttrain.curriculum.replay import FailureReplay, ReplayConfig, failure_kind
from posttrain.types import Score, Task


def task(domain: str, index: int) -> Task:
    return Task(id=f"{domain}#{index}", domain_id=domain, prompt=f"p{index}")


def fail(**details: object) -> Score:
    return Score.wrong(**details)


def test_failure_kinds_name_what_went_wrong() -> None:
    assert failure_kind([fail(tool_errors=1, recovered=False), Score.correct()]) == "tool_error"
    assert failure_kind([fail(end_reason="max_turns"), fail(end_reason="max_turns"), fail()]) == "max_turns"
    assert failure_kind([fail(end_reason="completed")]) == "wrong"
    assert failure_kind([Score.correct()]) == "none"


def test_draws_at_most_the_share_and_takes_domains_in_turn() -> None:
    replay = FailureReplay(ReplayConfig(share=0.5, max_replays=5))
    for i in range(6):
        replay.observe(task("a/b/one", i), [fail()])
    replay.observe(task("a/b/two", 0), [fail()])
    drawn = replay.draw(4)
    assert len(drawn) == 2 and {t.domain_id for t in drawn} == {"a/b/one", "a/b/two"}
    assert replay.draw(1) == []  # 0.5 * 1 rounds down to nothing


def test_a_task_leaves_on_success_or_after_its_replays() -> None:
    replay = FailureReplay(ReplayConfig(share=1.0, max_replays=2))
    first, second = task("a/b/c", 1), task("a/b/c", 2)
    replay.observe(first, [fail(), Score.correct()])
    replay.observe(second, [fail()])
    assert [t.id for t in replay.draw(2)] == [first.id, second.id]
    replay.observe(first, [Score.correct(), Score.correct()])  # solved: gone
    assert [t.id for t in replay.draw(2)] == [second.id]  # second draw of `second`: then gone too
    assert replay.draw(2) == []
    metrics = replay.metrics()
    assert metrics["replay/groups"] == 1 and metrics["replay/success_rate"] == 1.0


def test_queues_are_bounded_per_domain_and_kinds_filter() -> None:
    replay = FailureReplay(ReplayConfig(share=1.0, capacity_per_domain=3, kinds=["tool_error"]))
    for i in range(10):
        replay.observe(task("a/b/c", i), [fail(tool_errors=1)])
    replay.observe(task("a/b/c", 99), [fail()])  # kind "wrong" is not queued
    assert [t.id for t in replay.draw(10)] == ["a/b/c#7", "a/b/c#8", "a/b/c#9"]
    assert replay.metrics()["replay/queued/tool_error"] == 3


def test_state_round_trips() -> None:
    replay = FailureReplay(ReplayConfig(share=1.0))
    replay.observe(task("a/b/c", 1), [fail(tool_errors=2, recovered=False)])
    replay.draw(1)
    copy = FailureReplay(ReplayConfig(share=1.0))
    copy.load_state_dict(replay.state_dict())
    assert copy.metrics() == replay.metrics()
    assert [t.id for t in copy.draw(1)] == [t.id for t in replay.draw(1)]
