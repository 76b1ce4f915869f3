"""The bounded-staleness rule against values worked out by hand."""

from __future__ import annotations

import pytest

from posttrain.sched.staleness import apply_staleness, sample_staleness, stale_weight


def test_staleness_is_the_version_gap_and_a_sample_from_the_future_is_an_error() -> None:
    assert sample_staleness(learner_version=5, policy_version=3) == 2
    assert sample_staleness(learner_version=5, policy_version=5) == 0
    with pytest.raises(ValueError, match="newer than the learner"):
        sample_staleness(learner_version=2, policy_version=3)


@pytest.mark.parametrize(
    ("staleness", "max_staleness", "drop", "downweight"),
    [
        (0, 0, 1.0, 1.0),  # fresh
        (1, 1, 1.0, 1.0),  # at the bound: still full weight
        (1, 0, None, 1 / 2),  # excess 1 -> 1/(1+1)
        (3, 1, None, 1 / 3),  # excess 2 -> 1/(1+2)
        (5, 1, None, 1 / 5),  # excess 4 -> 1/(1+4)
    ],
)
def test_weight_is_one_within_the_bound_and_one_over_one_plus_excess_beyond(
    staleness: int, max_staleness: int, drop: float | None, downweight: float
) -> None:
    assert stale_weight(staleness, max_staleness, "drop") == drop
    assert stale_weight(staleness, max_staleness, "downweight") == pytest.approx(downweight)


def test_batch_report_counts_drops_and_averages_over_every_sample() -> None:
    # learner at 4; versions 4, 3, 2, 1 -> staleness 0, 1, 2, 3; bound 1.
    report = apply_staleness([4, 3, 2, 1], learner_version=4, max_staleness=1, policy="drop")
    assert report.weights == (1.0, 1.0, None, None)
    assert report.num_dropped == 2 and report.max == 3
    assert report.mean == pytest.approx((0 + 1 + 2 + 3) / 4)
    assert not report.all_fresh
    down = apply_staleness([4, 3, 2, 1], learner_version=4, max_staleness=1, policy="downweight")
    assert down.weights == pytest.approx((1.0, 1.0, 1 / 2, 1 / 3)) and down.num_dropped == 0


def test_fresh_batch_and_empty_batch() -> None:
    assert apply_staleness([2, 2], learner_version=2, max_staleness=0, policy="drop").all_fresh
    empty = apply_staleness([], learner_version=7, max_staleness=1, policy="drop")
    assert (empty.weights, empty.mean, empty.max, empty.num_dropped) == ((), 0.0, 0, 0)
    with pytest.raises(ValueError, match="max_staleness"):
        apply_staleness([1], learner_version=1, max_staleness=-1, policy="drop")
