"""Adversarial sandbox configs: every bad number, every malformed YAML is a `ConfigError` naming the field.

Issue 18 finding 6: `timeout: .inf` was accepted (every run then failed with `sandbox_error`), `.nan` gave
a raw pydantic error, `mem: -5` and `disk: 0` became 1 MB, `pids: 1e30` and `retry: 1e30` were accepted,
and a 50k-deep YAML or a 5000-digit integer raised `RecursionError`/`ValueError`.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import pytest

from posttrain.errors import ConfigError
from posttrain.sandbox.spec import SandboxSpec
from posttrain.tasks.sandbox_config import parse_task_config
from tests.sandbox.helpers import requires_bwrap, requires_root, run

BASE = "task:\n  type: t\n  verifier: v\n"
HUGE = 10**5000


def _short(value: object) -> str:
    """A test id (str() of a 5000-digit int raises)."""
    return "huge" if value is HUGE else str(value)[:24]


def _task_yaml(tmp_path: Path, body: str) -> Any:
    path = tmp_path / "task.yaml"
    path.write_text(BASE + body)
    task = parse_task_config(path)
    return task.sandbox_spec()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ("  timeout: .inf\n", "timeout"),
        ("  timeout: -.inf\n", "timeout"),
        ("  timeout: .nan\n", "timeout"),
        ("  timeout: 0\n", "timeout"),
        ("  timeout: -5\n", "timeout"),
        ("  timeout: 2d\n", "timeout"),
        ("  timeout: 100000h\n", "timeout"),
        ("  timeout: true\n", "timeout"),
        ("  timeout: " + "9" * 400 + "s\n", "timeout"),
        ("  resources: {cpu: .inf}\n", "resources.cpu"),
        ("  resources: {cpu: .nan}\n", "resources.cpu"),
        ("  resources: {cpu: 0}\n", "resources.cpu"),
        ("  resources: {cpu: -1}\n", "resources.cpu"),
        ("  resources: {cpu: 100000}\n", "resources.cpu"),
        ("  resources: {cpu: yes}\n", "resources.cpu"),
        ("  resources: {mem: -5}\n", "resources.mem"),
        ("  resources: {mem: 0}\n", "resources.mem"),
        ("  resources: {mem: 5}\n", "resources.mem"),  # 5 bytes, not silently 1 MB
        ("  resources: {mem: .inf}\n", "resources.mem"),
        ("  resources: {mem: 2Ti}\n", "resources.mem"),
        ("  resources: {mem: true}\n", "resources.mem"),
        ("  resources: {mem: " + "9" * 400 + "Gi}\n", "resources.mem"),
        ("  resources: {disk: 0}\n", "resources.disk"),
        ("  resources: {disk: -1Gi}\n", "resources.disk"),
        ("  resources: {pids: 1.0e+30}\n", "resources.pids"),
        ("  resources: {pids: 0}\n", "resources.pids"),
        ("  resources: {pids: -3}\n", "resources.pids"),
        ("  resources: {pids: true}\n", "resources.pids"),
        ("  retry: 1.0e+30\n", "retry"),
        ("  retry: 101\n", "retry"),
        ("  retry: -1\n", "retry"),
        ("  retry: .nan\n", "retry"),
        ("  retry: true\n", "retry"),
    ],
)
def test_bad_task_numbers_are_config_errors_naming_the_field(tmp_path: Path, body: str, field: str) -> None:
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        _task_yaml(tmp_path, body)


@pytest.mark.parametrize(
    ("key", "value"),
    [("timeout", math.inf), ("timeout", math.nan), ("retry", 1e30), ("retry", HUGE), ("timeout", HUGE)],
    ids=_short,
)
def test_bad_numbers_in_a_mapping_are_config_errors(key: str, value: object) -> None:
    with pytest.raises(ConfigError, match=key):
        parse_task_config({"task": {"type": "t", "verifier": "v", key: value}}).sandbox_spec()


@pytest.mark.parametrize(
    ("key", "value"),
    [("mem", -5), ("disk", 0), ("mem", 1e30), ("pids", 1e30), ("pids", HUGE), ("cpu", math.inf)],
    ids=_short,
)
def test_bad_resources_in_a_mapping_are_config_errors(key: str, value: object) -> None:
    with pytest.raises(ConfigError, match=f"resources.{key}"):
        parse_task_config({"task": {"type": "t", "verifier": "v", "resources": {key: value}}})


def test_good_task_config_still_parses(tmp_path: Path) -> None:
    spec = _task_yaml(
        tmp_path, "  timeout: 1h\n  retry: 100\n  resources: {cpu: 0.5, mem: 1Mi, disk: 1Gi, pids: 1000000}\n"
    )
    assert (spec.timeout_s, spec.cpus, spec.memory_mb, spec.disk_mb, spec.pids) == (
        3600.0,
        0.5,
        1,
        1024,
        10**6,
    )


@pytest.mark.parametrize(
    "text",
    [
        b"task: " + b"[" * 50_000 + b"]" * 50_000 + b"\n",  # deep flow nesting: the composer recurses
        b"task:\n" + b"".join(b"  " * i + b"a:\n" for i in range(1, 3000)),  # deep block nesting
        b"task: {type: t, verifier: v, retry: " + b"7" * 5000 + b"}\n",  # int() refuses > 4300 digits
        b"task: {type: t, verifier: v, timeout: " + b"7" * 5000 + b"}\n",
        b"\x00\x01\x02binary\xff junk",
        b"task: \x07\x1b[31m control characters\n",
        b"task: [unclosed\n",
        b"- just\n- a list\n",
        b"task: 5\n",
    ],
    ids=lambda text: repr(text[:16]),
)
def test_malformed_yaml_is_a_config_error(tmp_path: Path, text: bytes) -> None:
    path = tmp_path / "task.yaml"
    path.write_bytes(text)
    with pytest.raises(ConfigError):
        parse_task_config(path).sandbox_spec()


def test_oversized_yaml_is_refused_before_parsing(tmp_path: Path) -> None:
    path = tmp_path / "task.yaml"
    with path.open("w") as handle:
        handle.write(BASE)
        handle.write(("# " + "x" * 1000 + "\n") * (17 * 1024))  # 17 MB of comments
    with pytest.raises(ConfigError, match="larger than"):
        parse_task_config(path)


def test_alias_bomb_fails_fast_with_a_config_error(tmp_path: Path) -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    path = tmp_path / "task.yaml"
    path.write_text("\n".join(lines) + "\ntask: {type: t, verifier: v, resources: *a8}\n")
    with pytest.raises(ConfigError, match="resources"):
        parse_task_config(path)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("timeout_s", math.inf), ("timeout_s", math.nan), ("timeout_s", 0), ("timeout_s", 86401),
        ("timeout_s", True), ("cpu_time_s", -1.0), ("cpu_time_s", math.inf), ("cpus", math.inf),
        ("cpus", math.nan), ("cpus", 0), ("cpus", 5000), ("memory_mb", -5), ("memory_mb", 0),
        ("memory_mb", 1e30), ("memory_mb", True), ("disk_mb", 0), ("disk_mb", 2 << 20), ("pids", 1e30),
        ("pids", 0), ("pids", False), ("nofile", 3), ("nofile", 10**9), ("max_output_bytes", 10**12),
        ("output_limit_mb", 0), ("output_limit_mb", math.inf),
    ],
)  # fmt: skip
def test_sandbox_spec_rejects_bad_numbers_with_a_config_error(field: str, value: object) -> None:
    with pytest.raises(ConfigError, match=field):
        SandboxSpec(**{field: value})


def test_sandbox_spec_accepts_the_maxima() -> None:
    spec = SandboxSpec(
        timeout_s=86400, cpus=1024, memory_mb=1 << 20, disk_mb=1 << 20, pids=10**6, nofile=1 << 20
    )
    assert spec.timeout_s == 86400.0 and spec.pids == 10**6


def _host_state() -> tuple[list[str], list[str]]:
    """Mount points of the host's mount namespace and the directories under this process's sandbox
    cgroup prefix, without what other processes' sandboxes hold at the same time (their workspaces,
    `<state>/<pid>-<n>`, and their `posttrain-sandbox-<pid>` cgroups come and go while this runs)."""
    from posttrain.sandbox.host import host_features
    from posttrain.sandbox.sandbox import SPARES
    from posttrain.sandbox.workspace import state_base

    SPARES.drain()  # spares are a cache of emptied workspaces, not a leak: compare without them
    state, ours = str(state_base()) + "/", f"{os.getpid()}-"

    def mine(point: str) -> bool:
        return not point.startswith(state) or point[len(state):].startswith(ours)

    points = (line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines())
    mounts = sorted(p for p in points if mine(p))
    manager = host_features().cgroups
    bases = set(getattr(manager, "mounts", {}).values()) | {getattr(manager, "root", None)} - {None}
    prefix = f"posttrain-sandbox-{os.getpid()}"
    groups = sorted(str(p) for base in bases for p in Path(str(base)).glob(f"{prefix}/**"))
    return mounts, groups


@requires_root
@requires_bwrap
def test_a_hundred_failed_builds_leave_no_mount_or_cgroup_behind(tmp_path: Path) -> None:
    from posttrain.sandbox import Sandbox, run_sync
    from posttrain.sandbox.host import host_features

    if host_features().cgroups is None:
        pytest.skip("no cgroups here")
    # A spec built without validation fails late, in the cgroup write (as `cpu: .inf` did before the
    # spec checked it); an empty directory as rootfs fails when bwrap binds /workspace into it.
    late = SandboxSpec.model_construct(**{**SandboxSpec().model_dump(), "cpus": math.inf})
    no_workspace = SandboxSpec(rootfs=str(tmp_path), timeout_s=5.0)

    async def fail_persistent(spec: SandboxSpec) -> None:
        with pytest.raises(Exception):  # noqa: B017 - any failure will do; the leak is what is tested
            await Sandbox.create(spec)

    run(_one_good_sandbox())  # creates this process's cgroup prefix, which stays until exit
    before = _host_state()
    for attempt in range(100):
        if attempt % 10 == 9:
            run(fail_persistent(no_workspace))
        elif attempt % 2:
            assert run_sync(["true"], late).status == "sandbox_error"
        else:
            run(fail_persistent(late))
    assert _host_state() == before


async def _one_good_sandbox() -> None:
    from posttrain.sandbox import Sandbox

    async with Sandbox.create(SandboxSpec(timeout_s=5.0, cpus=1.0)) as sb:
        assert (await sb.exec(["true"])).ok
