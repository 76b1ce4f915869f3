"""Check the in-house terminal task packages end to end in the real sandbox (a script, not a pytest module).

For every package under `posttrain/tasks/data/terminal/<family>/<task>/` this script
  * checks the layout and `task.toml` (difficulty, category = family, timeouts, environment limits);
  * builds the environment in a fresh persistent `Sandbox` (Dockerfile subset: FROM sandbox-base, WORKDIR,
    COPY, RUN, ENV; or `environment/setup.sh`), the way the contract describes: unprivileged, cwd the
    WORKDIR under `/workspace`, no network;
  * (a) copies `tests/` to `/tmp/tests/` and runs `test.sh` on the untouched environment: it must FAIL;
  * (b) twice, on a fresh build each time: runs `solution/solve.sh`, then `test.sh`: it must PASS.
It prints one line per package and a summary, and exits non-zero when any package fails.

Usage: PYTHONPATH=. python tests/tasks/terminal_check.py [substring ...]   (substrings filter task paths)

Not here: loading the packages as domains (the terminal framework does that); this only proves that each
package's oracle scores 1 and doing nothing scores 0, deterministically.
"""

from __future__ import annotations

import asyncio
import io
import shlex
import sys
import tarfile
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from posttrain.sandbox import ExecResult, Sandbox, SandboxSpec

ROOT = Path(__file__).resolve().parents[2] / "posttrain" / "tasks" / "data" / "terminal"
LEVELS = ("easy", "medium", "hard")
WORKSPACE = "/workspace"
FAST_TEST_S = 3.0


@dataclass
class Environment:
    """A parsed environment: the steps to run and the state they leave."""

    steps: list[tuple[str, str]] = field(default_factory=list)
    workdir: str = WORKSPACE
    env: dict[str, str] = field(default_factory=dict)


def parse_dockerfile(text: str) -> list[tuple[str, str]]:
    """Instructions of the contract's Dockerfile subset, `\\` continuations joined."""
    steps: list[tuple[str, str]] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.rstrip()
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        op, _, arg = line.strip().partition(" ")
        if op.upper() not in {"FROM", "WORKDIR", "COPY", "RUN", "ENV"}:
            raise ValueError(f"instruction outside the contract's subset: {line!r}")
        steps.append((op.upper(), arg.strip()))
    return steps


def load_environment(task: Path) -> Environment:
    dockerfile, setup = task / "environment" / "Dockerfile", task / "environment" / "setup.sh"
    if dockerfile.exists() == setup.exists():
        raise ValueError("environment/ needs exactly one of Dockerfile and setup.sh")
    if setup.exists():
        return Environment(steps=[("SETUP", setup.read_text())])
    steps = parse_dockerfile(dockerfile.read_text())
    if not steps or steps[0] != ("FROM", "sandbox-base"):
        raise ValueError("the Dockerfile must start with FROM sandbox-base")
    return Environment(steps=steps[1:])


def tar_of(source: Path) -> bytes:
    """A tar of a file or of a directory's contents (Docker's COPY semantics), modes kept."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        if source.is_file():
            tar.add(source, arcname=source.name)
        else:
            for path in sorted(source.rglob("*")):
                tar.add(path, arcname=str(path.relative_to(source)), recursive=False)
    return buf.getvalue()


def in_dir(workdir: str, command: str) -> list[str]:
    return ["bash", "-c", f"cd {shlex.quote(workdir)} && {command}"]


async def must(
    sb: Sandbox, argv: list[str], what: str, stdin: bytes = b"", env: dict[str, str] | None = None
) -> ExecResult:
    result = await sb.exec(argv, stdin, env=env)
    if not result.ok or result.exit_code != 0:
        tail = (result.stdout + result.stderr).decode(errors="replace")[-800:]
        raise RuntimeError(f"{what} failed ({result.status}, exit {result.exit_code}): {tail}")
    return result


async def copy_in(sb: Sandbox, source: Path, dest: str, env: dict[str, str]) -> None:
    """COPY: a file to `dest` (into it when it ends with /), a directory's contents into `dest`."""
    if source.is_file() and not dest.endswith("/"):
        parent, name = dest.rsplit("/", 1)
        script = f"mkdir -p {shlex.quote(parent or '/')} && cat > {shlex.quote(dest)}"
        if source.stat().st_mode & 0o111:
            script += f" && chmod +x {shlex.quote(dest)}"
        await must(sb, ["bash", "-c", script], f"COPY {source.name}", source.read_bytes(), env=env)
        return
    await must(sb, ["bash", "-c", f"mkdir -p {shlex.quote(dest)} && tar -xf - -C {shlex.quote(dest)}"],
               f"COPY {source.name}", tar_of(source), env=env)


async def build(sb: Sandbox, task: Path) -> Environment:
    parsed = load_environment(task)
    state = Environment(env={})
    await must(sb, ["mkdir", "-p", WORKSPACE], "mkdir")
    for op, arg in parsed.steps:
        if op == "WORKDIR":
            state.workdir = arg if arg.startswith("/") else f"{state.workdir}/{arg}"
            await must(sb, ["mkdir", "-p", state.workdir], "WORKDIR")
        elif op == "ENV":
            key, _, value = arg.partition("=")
            state.env[key.strip()] = value.strip()
        elif op == "COPY":
            src, dest = shlex.split(arg)
            dest = dest if dest.startswith("/") else f"{state.workdir}/{dest}"
            await copy_in(sb, task / "environment" / src, dest, state.env)
        elif op == "RUN":
            await must(sb, ["sh", "-c", f"cd {shlex.quote(state.workdir)} && {arg}"], f"RUN {arg[:60]}",
                       env=state.env)
        else:  # SETUP
            await must(sb, in_dir(state.workdir, "bash -s"), "setup.sh", arg.encode(), env=state.env)
    return state


def spec_of(config: dict) -> SandboxSpec:
    environment = config["environment"]
    return SandboxSpec(timeout_s=float(config["agent"]["timeout_sec"]), memory_mb=int(environment["memory_mb"]),
                       disk_mb=int(environment["storage_mb"]), cpus=float(environment["cpus"]), pids=128,
                       network="loopback" if environment["allow_internet"] else "none")


async def run_tests(sb: Sandbox, task: Path, state: Environment, timeout_s: float) -> tuple[bool, float, str]:
    await must(sb, ["bash", "-c", "mkdir -p /tmp/tests && tar -xf - -C /tmp/tests"], "copy tests",
               tar_of(task / "tests"))
    result = await sb.exec(in_dir(state.workdir, "bash /tmp/tests/test.sh"), timeout_s=timeout_s, env=state.env)
    if result.status not in ("ok", "runtime_error"):
        raise RuntimeError(f"test.sh ended {result.status}: {result.error}")
    output = (result.stdout + result.stderr).decode(errors="replace")[-600:]
    return result.exit_code == 0, result.wall_ms / 1000, output


async def episode(task: Path, config: dict, solve: bool) -> tuple[bool, float, str]:
    async with Sandbox.create(spec_of(config)) as sb:
        state = await build(sb, task)
        if solve:
            await must(sb, ["bash", "-c", "mkdir -p /tmp/solution && tar -xf - -C /tmp/solution"], "copy solution",
                       tar_of(task / "solution"))
            await must(sb, in_dir(state.workdir, "bash /tmp/solution/solve.sh"), "solve.sh", env=state.env)
            await must(sb, ["rm", "-rf", "/tmp/solution"], "remove solution")
        return await run_tests(sb, task, state, float(config["verifier"]["timeout_sec"]))


def check_layout(task: Path) -> dict:
    config = tomllib.loads((task / "task.toml").read_text())
    family = task.parent.name
    meta = config["metadata"]
    if meta["difficulty"] not in LEVELS or meta["category"] != family:
        raise ValueError(f"metadata {meta} does not match family {family!r} and the levels {LEVELS}")
    if config["environment"]["allow_internet"]:
        raise ValueError("in-house tasks run without network")
    for name in ("instruction.md", "solution/solve.sh", "tests/test.sh"):
        if not (task / name).read_text().strip():
            raise ValueError(f"{name} is empty")
    return config


async def check(task: Path) -> tuple[bool, str]:
    try:
        config = check_layout(task)
        noop_passed, _, noop_out = await episode(task, config, solve=False)
        if noop_passed:
            return False, "test.sh PASSES on the untouched environment"
        slowest = 0.0
        for attempt in (1, 2):
            passed, wall_s, out = await episode(task, config, solve=True)
            if not passed:
                return False, f"oracle run {attempt} FAILS test.sh:\n{out}"
            slowest = max(slowest, wall_s)
        note = f" SLOW test.sh {slowest:.1f}s" if slowest > FAST_TEST_S else ""
        reason = noop_out.strip().splitlines()[-1][:80] if noop_out.strip() else "(no output)"
        return True, f"oracle passes x2 (test.sh <= {slowest:.2f}s){note}; noop fails: {reason}"
    except Exception as exc:  # noqa: BLE001 - any failure of one package is reported, the rest still run
        return False, f"{type(exc).__name__}: {exc}"


def main(filters: list[str]) -> int:
    tasks = sorted(p.parent for p in ROOT.glob("*/*/task.toml"))
    tasks = [t for t in tasks if not filters or any(f in str(t.relative_to(ROOT)) for f in filters)]
    counts: dict[tuple[str, str], int] = {}
    failures = 0
    start = time.monotonic()
    for task in tasks:
        ok, message = asyncio.run(check(task))
        failures += not ok
        name = str(task.relative_to(ROOT))
        print(f"{'PASS' if ok else 'FAIL'} {name}: {message}", flush=True)
        level = tomllib.loads((task / "task.toml").read_text())["metadata"]["difficulty"]
        counts[(task.parent.name, level)] = counts.get((task.parent.name, level), 0) + 1
    for family in sorted({f for f, _ in counts}):
        print(f"  {family}: " + ", ".join(f"{lv} {counts.get((family, lv), 0)}" for lv in LEVELS))
    print(f"{len(tasks) - failures}/{len(tasks)} packages pass ({time.monotonic() - start:.0f}s)")
    return 1 if failures or not tasks else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
