"""The pure parts of the pools: slices of requests, chunks of reward items, autoscaling."""

from __future__ import annotations

import itertools

from posttrain.dist.config import AutoscaleConfig
from posttrain.dist.engine_pool import _contiguous_slices
from posttrain.dist.grader_pool import _domain_chunks
from posttrain.dist.scaling import PoolScaler, scaling_config


def test_requests_are_cut_into_contiguous_slices_one_per_worker() -> None:
    assert _contiguous_slices(5, 2) == [(0, 3), (3, 5)]
    assert _contiguous_slices(7, 3) == [(0, 3), (3, 5), (5, 7)]
    assert _contiguous_slices(1, 3) == [(0, 1)]  # never an empty slice
    assert _contiguous_slices(4, 1) == [(0, 4)]  # one worker: the whole batch, as in one process


def test_reward_items_are_grouped_by_domain_then_chunked() -> None:
    assert _domain_chunks(["a", "b", "a", "a", "b"], 2) == [[0, 2], [3], [1, 4]]
    assert _domain_chunks(["a"] * 3, 64) == [[0, 1, 2]]


def test_a_disabled_scaler_keeps_the_size() -> None:
    scaler = PoolScaler(AutoscaleConfig(enabled=False))
    scaler.observe(10, 2, 100.0)
    assert scaler.size_for(1000, 2) == 2


def test_autoscale_maps_onto_the_schedulers_scaling_config() -> None:
    config = scaling_config(AutoscaleConfig(enabled=True, min_workers=2, max_workers=5, target_wait_s=3.0,
                                            cooldown_s=7.0))  # fmt: skip
    assert (config.min_workers, config.max_workers, config.target_wait_s, config.cooldown_s) == (2, 5, 3.0, 7.0)


def test_the_scaler_grows_for_the_target_wait_within_bounds_and_cooldown() -> None:
    times = iter([0.0, 3.0, 6.0])
    scaler = PoolScaler(AutoscaleConfig(enabled=True, max_workers=8, target_wait_s=1.0, cooldown_s=5.0),
                        clock=lambda: next(times))  # fmt: skip
    scaler.observe(num_items=10, num_workers=2, elapsed_s=2.0)  # 2 s x 2 workers / 10 items = 0.4 s per item
    assert scaler.size_for(10, 2) == 4  # t=0: ceil(10 x 0.4 / 1.0) = 4
    assert scaler.size_for(30, 4) == 4  # t=3: within the 5 s cooldown
    assert scaler.size_for(30, 4) == 8  # t=6: ceil(30 x 0.4) = 12, capped at max_workers


def test_nothing_measured_keeps_the_size_and_the_service_time_is_a_moving_average() -> None:
    scaler = PoolScaler(AutoscaleConfig(enabled=True, cooldown_s=0.0), clock=itertools.count().__next__)
    assert scaler.size_for(100, 3) == 3  # no service time yet
    scaler.observe(10, 2, 2.0)  # 0.4 s per item
    scaler.observe(10, 4, 0.5)  # 0.2 s per item -> average (0.4 + 0.2) / 2 = 0.3
    assert scaler.item_s is not None and abs(scaler.item_s - 0.3) < 1e-12
    assert scaler.size_for(20, 3) == 6  # ceil(20 x 0.3 / 1.0) = 6
