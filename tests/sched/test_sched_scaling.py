"""ScalingPolicy: desired pool sizes worked out by hand, clamping, cooldown and the scale-down delay."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from posttrain.dist.config import AutoscaleConfig
from posttrain.sched import PoolStats, ScalingConfig, ScalingPolicy

CONFIG = ScalingConfig(min_workers=1, max_workers=8, target_wait_s=1.0, cooldown_s=5.0, scale_down_after_s=10.0)


def pool(queue: int, in_flight: int, workers: int, service_s: float | None,
         last_resize_s: float | None = None) -> PoolStats:
    return PoolStats(queue, in_flight, workers, service_s, last_resize_s)


def test_demand_from_backlog_and_service_time() -> None:
    policy = ScalingPolicy(CONFIG)
    # backlog 10 + 2 = 12 jobs x 0.5 s / 1 s target = 6 workers
    assert policy.decide(pool(10, 2, 2, 0.5), now_s=0.0) == 6
    # 40 x 0.5 / 1 = 20, capped at max_workers 8
    assert policy.demand(pool(38, 2, 2, 0.5)) == 8
    # 2 x 3 s / 1 = 6, but only 2 jobs exist: 2 workers
    assert policy.demand(pool(1, 1, 1, 3.0)) == 2
    # 10 x 0.3 = 3.0000000000000004 in floating point: still 3, not 4
    assert policy.demand(pool(10, 0, 1, 0.3)) == 3
    # nothing to do: the minimum
    assert policy.demand(pool(0, 0, 4, 0.5)) == 1


def test_no_service_time_keeps_the_size_inside_the_bounds() -> None:
    policy = ScalingPolicy(CONFIG)
    assert policy.decide(pool(100, 0, 3, None), now_s=0.0) == 3
    assert policy.decide(pool(100, 0, 12, None), now_s=0.0) == 8


def test_no_resize_inside_the_cooldown() -> None:
    policy = ScalingPolicy(CONFIG)
    # demand 6, but the last resize was 3 s ago (< 5 s cooldown)
    assert policy.decide(pool(10, 2, 2, 0.5, last_resize_s=7.0), now_s=10.0) == 2
    assert policy.decide(pool(10, 2, 2, 0.5, last_resize_s=5.0), now_s=10.0) == 6


def test_shrinks_only_after_demand_stayed_low() -> None:
    policy = ScalingPolicy(CONFIG)
    low = pool(1, 1, 6, 0.5)  # demand ceil(2 x 0.5 / 1) = 1
    assert policy.decide(low, now_s=100.0) == 6  # low since 100
    assert policy.decide(low, now_s=105.0) == 6
    assert policy.decide(low, now_s=110.0) == 1  # 10 s low: shrink to the demand


def test_a_burst_of_demand_restarts_the_shrink_delay() -> None:
    policy = ScalingPolicy(CONFIG)
    low, busy = pool(1, 1, 6, 0.5), pool(10, 2, 6, 0.5)  # demands 1 and 6
    assert policy.decide(low, now_s=100.0) == 6
    assert policy.decide(busy, now_s=104.0) == 6  # demand back to the size: no longer low
    assert policy.decide(low, now_s=110.0) == 6  # low again since 110 only
    assert policy.decide(low, now_s=119.0) == 6
    assert policy.decide(low, now_s=120.0) == 1


def test_bounds_must_be_ordered() -> None:
    with pytest.raises(ValidationError):
        ScalingConfig(min_workers=4, max_workers=2)


def test_the_dist_autoscale_section_maps_onto_the_scaling_config() -> None:
    autoscale = AutoscaleConfig(min_workers=2, max_workers=5, target_wait_s=0.5, cooldown_s=1.0)
    config = ScalingConfig(**autoscale.model_dump(exclude={"enabled"}))
    assert (config.min_workers, config.max_workers, config.target_wait_s, config.cooldown_s) == (2, 5, 0.5, 1.0)
