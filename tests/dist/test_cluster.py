"""`ray_session`: a run starts and always stops its own local cluster, and leaves one it did not start."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from posttrain.dist.cluster import worker_env

ROOT = Path(__file__).resolve().parents[2]


def test_workers_get_the_code_path_and_offline_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", "relative/dir")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    env = worker_env()
    paths = env["PYTHONPATH"].split(":")
    assert paths[0] == str(ROOT) and paths[1] == str((Path.cwd() / "relative/dir").resolve())
    assert env["HF_HUB_OFFLINE"] == "1"


SESSION = """
import ray
from posttrain.dist.cluster import ray_session
from posttrain.dist.config import DistConfig

try:
    with ray_session(DistConfig(backend="ray", num_cpus=1)):
        assert ray.cluster_resources()["CPU"] == 1
        raise KeyError("the run failed")
except KeyError:
    pass
assert not ray.is_initialized()  # shut down although the run raised

ray.init(num_cpus=1, include_dashboard=False)
with ray_session(DistConfig(backend="ray", num_cpus=2)):
    assert ray.cluster_resources()["CPU"] == 1  # joined the running one, not a new cluster
assert ray.is_initialized()  # and left it running for its owner
ray.shutdown()
"""


@pytest.mark.ray
def test_a_session_stops_the_cluster_it_started_and_only_that() -> None:
    done = subprocess.run([sys.executable, "-c", SESSION], cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
