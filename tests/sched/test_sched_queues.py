"""FairQueue: priority order inside a domain, strict priority across domains, stride fair share with
weights and costs, no credit for idleness, quotas, the bound, and retries that wait for their time."""

from __future__ import annotations

import pytest

from posttrain.sched import FairQueue, WorkItem


def item(job_id: str, domain: str = "a", priority: int = 0, cost: float = 1.0) -> WorkItem:
    return WorkItem(job_id, "verify", domain, None, priority=priority, cost=cost)


def drain(queue: FairQueue, now_s: float = 0.0) -> list[str]:
    out = []
    while (next_item := queue.pop(now_s, {})) is not None:
        out.append(next_item.job_id)
    return out


def test_inside_a_domain_lower_priority_first_then_arrival_order() -> None:
    queue = FairQueue(10)
    for job_id, priority in [("x", 1), ("y", 0), ("z", 1), ("w", 0)]:
        assert queue.offer(item(job_id, priority=priority))
    assert drain(queue) == ["y", "w", "x", "z"]


def test_priority_is_strict_across_domains() -> None:
    queue = FairQueue(10)
    for k in range(3):
        queue.offer(item(f"a{k}", "a", priority=1))
    queue.offer(item("b0", "b", priority=0))
    assert drain(queue) == ["b0", "a0", "a1", "a2"]


def test_a_flood_and_a_trickle_alternate_one_for_one() -> None:
    queue = FairQueue(1000)
    for k in range(200):
        queue.offer(item(f"a{k}", "a"))
    for k in range(10):
        queue.offer(item(f"b{k}", "b"))
    order = drain(queue)
    # equal weights and costs: a0 b0 a1 b1 ... so b9 is the 20th item drawn, a's flood follows
    assert order[:20] == [f"{d}{k}" for k in range(10) for d in ("a", "b")]
    assert order[20:] == [f"a{k}" for k in range(10, 200)]


def test_weights_split_draws_in_their_ratio() -> None:
    queue = FairQueue(1000, weights={"a": 2.0})
    for k in range(60):
        queue.offer(item(f"a{k}", "a"))
        queue.offer(item(f"b{k}", "b"))
    first = drain(queue)[:30]
    # a's pass grows by 1/2 a draw, b's by 1: a gets 2 draws for each of b's
    assert sum(j.startswith("a") for j in first) == 20
    assert sum(j.startswith("b") for j in first) == 10


def test_costs_charge_the_fair_share() -> None:
    queue = FairQueue(1000)
    for k in range(40):
        queue.offer(item(f"a{k}", "a", cost=1.0))
        queue.offer(item(f"b{k}", "b", cost=3.0))
    first = drain(queue)[:16]
    # passes after 16 draws: a 12 x 1 = 12, b 4 x 3 = 12
    assert sum(j.startswith("a") for j in first) == 12


def test_an_idle_domain_earns_no_credit() -> None:
    queue = FairQueue(100)
    for k in range(20):
        queue.offer(item(f"a{k}", "a"))
    assert drain_n(queue, 10) == [f"a{k}" for k in range(10)]
    for k in range(5):
        queue.offer(item(f"b{k}", "b"))
    # b enters at the virtual time 9 (the pass a0..a9 ended on), not at 0: it alternates with a
    # (b's 9 < a's 10 first, then ties go to a, first seen) instead of taking 5 in a row
    assert drain_n(queue, 4) == ["b0", "a10", "b1", "a11"]


def drain_n(queue: FairQueue, count: int) -> list[str]:
    out = []
    for _ in range(count):
        popped = queue.pop(0.0, {})
        assert popped is not None
        out.append(popped.job_id)
    return out


def test_a_domain_at_its_quota_is_skipped() -> None:
    queue = FairQueue(10, quotas={"a": 2})
    for k in range(3):
        queue.offer(item(f"a{k}", "a"))
    assert queue.pop(0.0, {"a": 2}) is None
    queue.offer(item("b0", "b"))
    popped = queue.pop(0.0, {"a": 2})
    assert popped is not None and popped.job_id == "b0"
    popped = queue.pop(0.0, {"a": 1})
    assert popped is not None and popped.job_id == "a0"


def test_the_bound_pushes_back_and_retries_ignore_it() -> None:
    queue = FairQueue(2)
    assert queue.offer(item("x")) and queue.offer(item("y"))
    assert not queue.has_capacity()
    assert not queue.offer(item("z"))
    assert len(queue) == 2
    queue.requeue(item("r"))
    assert len(queue) == 3
    assert queue.depth_by_domain() == {"a": 3}
    assert drain(queue) == ["r", "x", "y"]  # a retry goes ahead of fresh items of its priority
    assert queue.has_capacity() and queue.offer(item("z"))


def test_a_retry_waits_for_its_ready_time() -> None:
    queue = FairQueue(10)
    queue.requeue(item("r"), ready_at_s=5.0)
    assert queue.next_ready_s() == 5.0
    assert queue.depth_by_domain() == {"a": 1}
    assert queue.pop(4.9, {}) is None
    popped = queue.pop(5.0, {})
    assert popped is not None and popped.job_id == "r"
    assert queue.next_ready_s() is None and len(queue) == 0


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError):
        FairQueue(0)
    with pytest.raises(ValueError):
        FairQueue(1, weights={"a": 0.0})
    with pytest.raises(ValueError):
        FairQueue(1, quotas={"a": 0})
