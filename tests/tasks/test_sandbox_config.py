"""The spec's `task:` block parses into a SandboxSpec plus verifier and retry count."""

from __future__ import annotations

from pathlib import Path

import pytest

from posttrain.errors import ConfigError
from posttrain.tasks.sandbox_config import parse_duration_s, parse_size_mb, parse_task_config

SPEC_EXAMPLE = """
task:
  type: terminal_benchmark
  image: sandbox-base:latest
  timeout: 600s
  resources: {cpu: 4, mem: 16Gi}
  verifier: pytest_runner
  retry: 2
"""


def test_spec_example_parses_as_written(tmp_path: Path) -> None:
    path = tmp_path / "task.yaml"
    path.write_text(SPEC_EXAMPLE)
    task = parse_task_config(path)
    spec = task.sandbox_spec()
    assert (task.type, task.verifier, task.retry) == ("terminal_benchmark", "pytest_runner", 2)
    assert (spec.timeout_s, spec.cpus, spec.memory_mb, spec.image) == (
        600.0,
        4.0,
        16384,
        "sandbox-base:latest",
    )


@pytest.mark.parametrize(
    ("text", "seconds"), [("600s", 600.0), ("10m", 600.0), ("1h", 3600.0), ("250ms", 0.25), ("5", 5.0)]
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration_s(text) == seconds


@pytest.mark.parametrize(("text", "mb"), [("16Gi", 16384), ("512Mi", 512), ("1G", 953), ("2048Ki", 2)])
def test_sizes(text: str, mb: int) -> None:
    assert parse_size_mb(text) == mb  # 1G = 10^9 B = 953.67 MiB, floored


def test_unknown_key_is_named() -> None:
    with pytest.raises(ConfigError, match="gpu"):
        parse_task_config({"task": {"type": "t", "verifier": "v", "gpu": 1}})


def test_bad_duration_is_named() -> None:
    with pytest.raises(ConfigError, match="timeout"):
        parse_task_config({"task": {"type": "t", "verifier": "v", "timeout": "ten minutes"}})


def test_unknown_image_is_a_config_error() -> None:
    task = parse_task_config({"task": {"type": "t", "verifier": "v", "image": "no-such-image:1"}})
    with pytest.raises(ConfigError, match="image"):
        task.sandbox_spec()


def test_registered_directory_image_resolves(tmp_path: Path) -> None:
    from posttrain.sandbox.images import register_image

    register_image("tiny-rootfs", tmp_path)
    task = parse_task_config({"task": {"type": "t", "verifier": "v", "image": "tiny-rootfs:v1"}})
    assert task.sandbox_spec().image == "tiny-rootfs:v1"
