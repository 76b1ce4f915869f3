"""`RayEnginePool` over fake engines in Ray workers: order, weight sync with versions, and workers that
die mid-call (crashed, or killed from outside while busy) being replaced without losing an output."""

from __future__ import annotations

import functools
import os
import threading
import time
from pathlib import Path

import pytest
import torch

from posttrain.dist.engine_pool import RayEnginePool
from posttrain.rollout.api import GenerationRequest, RequestOutput, SamplingParams
from tests.fakes.dist_workers import FakeEngine, fake_engine

pytestmark = pytest.mark.ray


def requests(count: int) -> list[GenerationRequest]:
    return [GenerationRequest(prompt_ids=(1,) * (i % 3 + 1), params=SamplingParams(n=2, seed=100 * i),
                              request_id=f"r{i}") for i in range(count)]  # fmt: skip


def samples(outputs: list[RequestOutput]) -> list[tuple[str | None, list[list[int]]]]:
    return [(o.request_id, [s.token_ids for s in o.samples]) for o in outputs]


def expected(reqs: list[GenerationRequest], bias: int) -> list[tuple[str | None, list[list[int]]]]:
    return samples([FakeEngine.answer(r, bias) for r in reqs])


def test_outputs_keep_request_order_and_carry_the_weight_version(ray_cluster: None) -> None:
    pool = RayEnginePool(fake_engine, num_workers=2)
    try:
        reqs = requests(7)
        assert samples(pool.generate(reqs)) == expected(reqs, bias=0)
        pool.update_weights({"bias": torch.tensor(5)}, version=3)
        outputs = pool.generate(reqs)
        assert samples(outputs) == expected(reqs, bias=5)  # both workers loaded the new weights
        assert {o.metrics["weight_version"] for o in outputs} == {3.0}
        stats = pool.stats()
        assert stats["requests"] == 14 and stats["workers"] == 2 and stats["workers_replaced"] == 0
        assert pool.generate([]) == []
    finally:
        pool.close()


def test_a_worker_that_crashes_mid_generate_is_replaced_at_the_latest_weights(
    ray_cluster: None, tmp_path: Path
) -> None:
    flag = tmp_path / "crash"
    pool = RayEnginePool(functools.partial(fake_engine, crash_flag=str(flag)), num_workers=2)
    try:
        pool.update_weights({"bias": torch.tensor(7)}, version=1)
        flag.touch()  # the first worker to start a slice dies in it
        reqs = requests(9)
        outputs = pool.generate(reqs)
        assert not flag.exists()
        assert samples(outputs) == expected(reqs, bias=7)  # complete, in order, once each, new weights
        assert pool.workers.num_replaced == 1 and pool.workers.num_live == 2
        assert {o.metrics["weight_version"] for o in outputs} == {1.0}
    finally:
        pool.close()


def test_a_worker_killed_from_outside_while_busy_is_replaced(ray_cluster: None, tmp_path: Path) -> None:
    import ray

    pool = RayEnginePool(functools.partial(fake_engine, hold_dir=str(tmp_path)), num_workers=2)
    try:
        handles = pool.workers.handles()
        pids = {ray.get(h.pid.remote()): name for name, h in handles.items()}
        killed: list[str] = []

        def kill_the_first_busy_worker() -> None:
            while not (started := list(tmp_path.glob("started-*"))):
                time.sleep(0.02)
            pid = int(started[0].name.split("-")[1])
            name = pids[pid]
            ray.kill(handles[name], no_restart=True)
            killed.append(name)
            # ray.kill only sends the kill: release the workers once the process is really gone, or the
            # doomed one could still finish its call first.
            deadline = time.monotonic() + 10.0
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.02)
            (tmp_path / "release").touch()

        killer = threading.Thread(target=kill_the_first_busy_worker)
        killer.start()
        reqs = requests(6)
        outputs = pool.generate(reqs)
        killer.join()
        assert samples(outputs) == expected(reqs, bias=0)
        assert killed and killed[0] not in pool.workers.handles()
        assert pool.workers.num_replaced == 1 and pool.workers.num_live == 2
    finally:
        pool.close()


def test_a_worker_lost_between_calls_is_replaced_by_the_next_weight_update(ray_cluster: None) -> None:
    import ray

    pool = RayEnginePool(fake_engine, num_workers=2)
    try:
        victim = next(iter(pool.workers.handles().values()))
        ray.kill(victim, no_restart=True)
        pool.update_weights({"bias": torch.tensor(2)}, version=8)
        reqs = requests(4)
        assert samples(pool.generate(reqs)) == expected(reqs, bias=2)
        assert pool.workers.num_live == 2 and pool.workers.num_replaced == 1
    finally:
        pool.close()


def test_autoscaling_grows_the_pool_between_calls(ray_cluster: None) -> None:
    from posttrain.dist.config import AutoscaleConfig

    # A target wait far below any measured service time: the policy asks for as many workers as allowed.
    autoscale = AutoscaleConfig(enabled=True, min_workers=1, max_workers=3, target_wait_s=1e-6, cooldown_s=0.0)
    pool = RayEnginePool(fake_engine, num_workers=1, autoscale=autoscale)
    try:
        reqs = requests(6)
        assert samples(pool.generate(reqs)) == expected(reqs, bias=0)
        assert pool.workers.num_live == 1  # nothing measured before the first call
        assert samples(pool.generate(reqs)) == expected(reqs, bias=0)
        assert pool.workers.num_live == 3 and pool.workers.num_workers == 3
    finally:
        pool.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
