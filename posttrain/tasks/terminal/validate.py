"""Validate a task package on its own: the oracle scores 1, doing nothing scores 0, the tests are
deterministic (each episode is graded twice, in separate forks, and must score the same).

Used by `posttrain tasks validate` and the AgentBench converter; `posttrain domains validate` covers the
same ground for packages loaded as domains (gold, empty and garbage episodes, each graded twice). A
build failure, a missing oracle or an infrastructure failure is reported as a failure, never raised.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from posttrain.envs.base import run_scripted
from posttrain.errors import ConfigError
from posttrain.tasks.terminal.package import TerminalPackage, load_package
from posttrain.tasks.terminal.shell import TerminalEnv, gold_turns
from posttrain.types import Score, Task


@dataclass
class PackageCheck:
    """The outcome of validating one package."""

    path: Path
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failures


def check_package(path: Path) -> PackageCheck:
    """Load, build and play the oracle and an empty episode twice each."""
    check = PackageCheck(path)
    start = time.monotonic()
    try:
        package = load_package(path)
    except ConfigError as exc:
        check.failures.append(str(exc))
        return check
    if package.solution is None and not (package.root / "solution" / "answer.txt").is_file():
        check.failures.append("no oracle: solution/solve.sh is missing")
    else:
        _expect(check, package, gold_turns(package), "oracle", True)
        if check.ok:
            _expect(check, package, [], "doing nothing", False)
    check.seconds = time.monotonic() - start
    return check


def _expect(
    check: PackageCheck, package: TerminalPackage, turns: list[str], label: str, passes: bool
) -> None:
    task = Task(id=f"terminal/check/package#{package.name}", domain_id="terminal/check/package",
                prompt=package.instruction)  # fmt: skip
    scores = [run_scripted(TerminalEnv(lambda _task: package), task, turns)[1] for _ in range(2)]
    infra = [s for s in scores if s.is_infra_failure]
    if infra:
        check.failures.append(f"{label}: {infra[0].message}")
    elif _key(scores[0]) != _key(scores[1]):
        check.failures.append(
            f"{label}: the tests are not deterministic ({_key(scores[0])} then {_key(scores[1])})"
        )
    elif scores[0].passed != passes:
        tail = str(scores[0].details.get("test_output", ""))[-300:]
        check.failures.append(
            f"{label}: scored {scores[0].reward}, expected {float(passes)}; test output: {tail}"
        )


def _key(score: Score) -> tuple[float, bool]:
    return score.reward, score.passed
