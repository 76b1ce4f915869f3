"""Connecting to Ray for one run: a local cluster or an existing one, always shut down by its owner.

`ray_session(config)` is a context manager. With `address: None` it starts a local cluster of
`num_cpus` CPUs (no dashboard, auth disabled); with an address (`auto`, `ray://host:10001`) it joins
that cluster. Either way the workers get `worker_env()`: this process's `PYTHONPATH` (made absolute, with
the directory holding `posttrain` in front) and the offline and hashing variables a run depends on, so a
worker imports the same code and never downloads. If Ray is already initialised (a test's cluster, a
notebook), the session uses it and leaves it running: only the code that called `ray.init` shuts it down.
Not here: the worker pools (`posttrain.dist.engine_pool`, `posttrain.dist.grader_pool`); installing
posttrain on the other nodes of a cluster (each node needs the same code, docs/distributed.md).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from posttrain.dist.config import DistConfig

FORWARDED_ENV = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE", "TOKENIZERS_PARALLELISM",
                 "PYTHONHASHSEED", "POSTTRAIN_CACHE", "RAY_AUTH_MODE")  # fmt: skip
"""Variables copied from the driver into every worker when set here."""


def worker_env() -> dict[str, str]:
    """The environment variables every worker process starts with (see module docstring)."""
    package_root = str(Path(__file__).resolve().parents[2])
    paths = [str(Path(p).resolve()) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env = {name: os.environ[name] for name in FORWARDED_ENV if name in os.environ}
    env["HF_HUB_OFFLINE"] = env.get("HF_HUB_OFFLINE", "1")
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys([package_root, *paths]))
    return env


@contextmanager
def ray_session(config: DistConfig) -> Iterator[None]:
    """Ray initialised for the duration of the block (see module docstring)."""
    import ray

    if ray.is_initialized():
        yield
        return
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(
        address=config.address,
        num_cpus=config.num_cpus if config.address is None else None,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": worker_env()},
    )
    try:
        yield
    finally:
        ray.shutdown()
