"""A local Ray cluster shared by the `ray`-marked tests of this directory, always shut down at the end."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[None]:
    """Two CPUs, no dashboard, auth disabled; workers get the driver's code path and offline settings."""
    import ray

    from posttrain.dist.cluster import worker_env

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": worker_env()})
    try:
        yield
    finally:
        ray.shutdown()
