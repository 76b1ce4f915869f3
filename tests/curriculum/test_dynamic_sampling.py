"""Dynamic sampling: keeps informative groups, refills within budget, gives up without raising."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from posttrain.curriculum import DynamicSamplingConfig, fill_informative_groups


@dataclass(frozen=True)
class RewardGroup:
    """The least the filter needs of a group: its rewards (an id to tell groups apart)."""

    group_id: str
    rewards: tuple[float, ...]


class FakeSource:
    """Yields groups from a repeating pattern of reward tuples and counts what it was asked for."""

    def __init__(self, pattern: Sequence[tuple[float, ...]], limit: int | None = None):
        self._rewards = itertools.cycle(pattern)
        self._ids = itertools.count()
        self.limit = limit
        self.requests: list[int] = []
        self.served = 0

    def draw(self, num_groups: int) -> list[RewardGroup]:
        self.requests.append(num_groups)
        if self.limit is not None:
            num_groups = min(num_groups, self.limit - self.served)
        self.served += num_groups
        return [RewardGroup(f"g{next(self._ids)}", next(self._rewards)) for _ in range(num_groups)]


MIXED = ((1.0, 0.0), (1.0, 1.0))  # one informative, one flat
FLAT = ((0.0, 0.0, 0.0),)


def test_fills_the_batch_with_informative_groups() -> None:
    source = FakeSource(MIXED)
    kept, report = fill_informative_groups(source.draw(4), source.draw, num_groups=4)
    assert len(kept) == 4 and report.num_kept == 4 and not report.gave_up


def test_all_kept_groups_are_informative_when_filled() -> None:
    source = FakeSource(MIXED)
    kept, _ = fill_informative_groups(source.draw(4), source.draw, num_groups=4)
    assert all(max(g.rewards) != min(g.rewards) for g in kept)


def test_fraction_filtered_hand_value() -> None:
    # Initial 4 groups: 2 informative, 2 flat. Keep rate 0.5, deficit 2 -> request ceil(2/0.5*1.25)=5:
    # groups 4..8 alternate informative/flat: 3 informative, 2 flat. Examined 9, flat 4 -> 4/9.
    source = FakeSource(MIXED)
    _, report = fill_informative_groups(source.draw(4), source.draw, num_groups=4)
    assert report.fraction_filtered == pytest.approx(4 / 9)
    assert report.num_extra_drawn == 5


def test_surplus_informative_groups_are_returned_separately() -> None:
    # From the previous example: 5 informative in total, 4 kept, 1 surplus.
    source = FakeSource(MIXED)
    result = fill_informative_groups(source.draw(4), source.draw, num_groups=4)
    assert len(result.surplus) == 1 == result.report.num_surplus


def test_gives_up_on_all_flat_data_within_budget() -> None:
    source = FakeSource(FLAT)
    config = DynamicSamplingConfig(max_extra_fraction=3.0, max_draw_calls=100)
    _, report = fill_informative_groups(source.draw(8), source.draw, num_groups=8, config=config)
    assert report.gave_up and report.num_extra_drawn <= 24


def test_gives_up_after_max_draw_calls() -> None:
    source = FakeSource(FLAT)
    config = DynamicSamplingConfig(max_extra_fraction=1000.0, max_draw_calls=3)
    _, report = fill_informative_groups(source.draw(8), source.draw, num_groups=8, config=config)
    assert report.gave_up and report.num_draw_calls == 3


def test_exhausted_source_ends_the_loop() -> None:
    source = FakeSource(FLAT, limit=8)
    _, report = fill_informative_groups(source.draw(8), source.draw, num_groups=8)
    assert report.gave_up and report.num_draw_calls == 1


def test_pads_with_flat_groups_after_giving_up() -> None:
    source = FakeSource(FLAT)
    kept, report = fill_informative_groups(source.draw(8), source.draw, num_groups=8)
    assert len(kept) == 8 and report.num_padded == 8 and report.num_kept == 0


def test_return_short_keeps_only_informative_groups() -> None:
    source = FakeSource(FLAT)
    config = DynamicSamplingConfig(on_shortfall="return_short")
    kept, _ = fill_informative_groups(source.draw(8), source.draw, num_groups=8, config=config)
    assert kept == []


def test_disabled_keeps_everything_and_still_counts() -> None:
    source = FakeSource(MIXED)
    kept, report = fill_informative_groups(source.draw(4), source.draw,
                                           config=DynamicSamplingConfig(enabled=False))
    assert len(kept) == 4 and report.num_dropped == 2 and source.requests == [4]


def test_custom_rewards_accessor() -> None:
    groups = [{"r": [1.0, 0.0]}, {"r": [1.0, 1.0]}]
    kept, _ = fill_informative_groups(groups, lambda n: [], num_groups=1, rewards_of=lambda g: g["r"])
    assert kept == [groups[0]]
