"""Pure pieces: output capture, result classification, seccomp assembly, cgroup backends on fake trees."""

from __future__ import annotations

import signal
import struct
from pathlib import Path

from posttrain.sandbox.capture import OutputCapture
from posttrain.sandbox.cgroups import Limits, V1Manager, V2Manager, _mounts, _own_paths
from posttrain.sandbox.launch import classify, gate_script
from posttrain.sandbox.seccomp import DENIED_NAMES, RET_ALLOW, X86_64, build_filter
from posttrain.sandbox.spec import SandboxSpec


def test_output_capture_keeps_head_and_tail() -> None:
    cap = OutputCapture(8)  # 4 bytes of head, 4 of tail
    for chunk in (b"abc", b"defgh", b"ijklmnop"):
        cap.feed(chunk)
    # stream "abcdefghijklmnop": head "abcd", tail "mnop", 16 bytes counted
    assert (cap.value(), cap.total) == (b"abcdmnop", 16)


def test_output_capture_short_stream_is_verbatim() -> None:
    cap = OutputCapture(8)
    cap.feed(b"hi")
    assert cap.value() == b"hi"


def _reply(**fields: object) -> dict[str, object]:
    base: dict[str, object] = {"exit_code": 0, "signal": None, "timed_out": False, "output_killed": False}
    base.update(fields)
    return base


def test_classify_statuses() -> None:
    spec = SandboxSpec(cpu_time_s=2)
    cases = {
        "ok": (_reply(), 0),
        "runtime_error": (_reply(exit_code=1), 0),
        "timeout_wall": (_reply(timed_out=True, exit_code=None, signal=9), 0),
        "output_limit": (_reply(output_killed=True), 0),
        "memory_limit": (_reply(exit_code=None, signal=9), 1),
        "timeout_cpu": (_reply(exit_code=None, signal=int(signal.SIGXCPU)), 0),
        "sandbox_error": (_reply(error="bwrap failed"), 0),
    }
    assert {name: classify(r, spec, oom).status for name, (r, oom) in cases.items()} == {n: n for n in cases}


def test_sigkill_without_oom_or_cpu_use_is_a_runtime_error() -> None:
    assert classify(_reply(exit_code=None, signal=9, cpu_ms=5.0), SandboxSpec(), 0).status == "runtime_error"


def test_seccomp_filter_is_whole_instructions_ending_in_returns() -> None:
    program = build_filter(deny_inet=True, machine="x86_64")
    assert program is not None and len(program) % 8 == 0
    code, _, _, k = struct.unpack("<HBBI", program[-8:])
    assert code == 0x06  # the last instruction is a return
    returns = [struct.unpack("<HBBI", program[i : i + 8]) for i in range(0, len(program), 8)]
    assert any(c == 0x06 and value == RET_ALLOW for c, _, _, value in returns)


def test_seccomp_filter_names_every_denied_syscall() -> None:
    program = build_filter(deny_inet=False, machine="x86_64")
    assert program is not None
    compared = {struct.unpack("<HBBI", program[i : i + 8])[3] for i in range(0, len(program), 8)}
    assert all(X86_64.numbers[name] in compared for name in DENIED_NAMES)


def test_unknown_architecture_gets_no_filter() -> None:
    assert build_filter(deny_inet=True, machine="sparc64") is None


def test_gate_joins_every_hierarchy_before_rlimits() -> None:
    class FakeGroup:
        def attach_paths(self) -> list[str]:
            return ["/cg/memory/x/cgroup.procs", "/cg/pids/x/cgroup.procs"]

    script = gate_script(FakeGroup(), [("RLIMIT_FSIZE", 1 << 20, 1 << 20)])  # type: ignore[arg-type]
    lines = script.splitlines()
    assert lines[0].startswith("echo $$ > /cg/memory") and lines[1].startswith("echo $$ > /cg/pids")
    assert "ulimit -S -f 2048" in lines[2]  # 1 MiB in dash's 512-byte blocks
    assert lines[-1] == 'exec "$@"'


def _fake_v2(root: Path) -> Path:
    root.mkdir()
    (root / "cgroup.controllers").write_text("cpu memory pids\n")
    (root / "cgroup.subtree_control").write_text("")
    return root


def test_v2_backend_writes_limits_into_a_fake_tree(tmp_path: Path, monkeypatch: object) -> None:
    root = _fake_v2(tmp_path / "unified")
    manager = V2Manager(root, prefix="pt")
    # a real cgroupfs populates these on mkdir; the fake tree needs them created up front
    real_mkdir = Path.mkdir

    def mkdir(self: Path, *args: object, **kwargs: object) -> None:
        real_mkdir(self, *args, **kwargs)  # type: ignore[arg-type]
        for name in (
            "cgroup.controllers",
            "cgroup.subtree_control",
            "cgroup.procs",
            "memory.max",
            "pids.max",
            "cpu.max",
        ):
            (self / name).write_text("cpu memory pids\n" if name == "cgroup.controllers" else "")

    monkeypatch.setattr(Path, "mkdir", mkdir)  # type: ignore[attr-defined]
    group = manager.create(Limits(memory_bytes=256 << 20, pids=32, cpu_quota=1.5))
    assert (group.path / "memory.max").read_text() == str(256 << 20)
    assert (group.path / "pids.max").read_text() == "32"
    assert (group.path / "cpu.max").read_text() == "150000 100000"
    assert (root / "cgroup.subtree_control").read_text() == "+memory +pids +cpu"


def test_v1_backend_creates_one_group_per_hierarchy(tmp_path: Path) -> None:
    mounts = {c: tmp_path / c for c in ("memory", "pids", "cpu")}
    for path in mounts.values():
        path.mkdir()
    (mounts["cpu"] / "cpu.cfs_period_us").write_text("100000\n")
    group = V1Manager(mounts, prefix="pt").create(Limits(memory_bytes=1 << 20, pids=8, cpu_quota=0.5))
    assert (group.dirs["memory"] / "memory.limit_in_bytes").read_text() == str(1 << 20)
    assert (group.dirs["pids"] / "pids.max").read_text() == "8"
    assert (group.dirs["cpu"] / "cpu.cfs_quota_us").read_text() == "50000"


def test_mountinfo_parsing_finds_hybrid_layout() -> None:
    text = (
        "30 25 0:26 / /sys/fs/cgroup/memory rw,relatime shared:9 - cgroup cgroup rw,memory\n"
        "31 25 0:27 / /sys/fs/cgroup/pids rw,relatime shared:10 - cgroup cgroup rw,pids\n"
        "32 25 0:28 / /sys/fs/cgroup/unified rw,relatime shared:11 - cgroup2 cgroup2 rw\n"
    )
    unified, v1 = _mounts(text)
    assert unified == Path("/sys/fs/cgroup/unified")
    assert v1 == {"memory": Path("/sys/fs/cgroup/memory"), "pids": Path("/sys/fs/cgroup/pids")}


def test_proc_cgroup_parsing_maps_controllers_to_paths() -> None:
    paths = _own_paths("4:memory:/process_api/abc\n8:pids:/\n2:cpu,cpuacct:/x\n0::/\n")
    assert paths == {"memory": "/process_api/abc", "pids": "/", "cpu": "/x", "cpuacct": "/x", "": "/"}


def test_copy_snapshots_link_unchanged_files_and_restore_changed_ones(tmp_path: Path) -> None:
    """The fallback used where overlayfs is unavailable (no root)."""
    import os

    from posttrain.sandbox import snapshots

    work = tmp_path / "work"
    work.mkdir()
    (work / "keep.txt").write_text("same")
    (work / "edit.txt").write_text("one")
    tracker = snapshots.Tracker()
    snapshots.take(str(work), str(tmp_path / "s1"), tracker)
    (work / "edit.txt").write_text("two")
    os.utime(work / "edit.txt", ns=(1, 1))  # even a forged mtime cannot hide the change (ctime moves)
    snapshots.take(str(work), str(tmp_path / "s2"), tracker)
    assert os.stat(tmp_path / "s1/keep.txt").st_ino == os.stat(tmp_path / "s2/keep.txt").st_ino
    assert (tmp_path / "s2/edit.txt").read_text() == "two"
    (work / "new.txt").write_text("extra")
    snapshots.restore(str(work), str(tmp_path / "s1"), tracker, owner=None)
    assert sorted(p.name for p in work.iterdir()) == ["edit.txt", "keep.txt"]
    assert (work / "edit.txt").read_text() == "one"
