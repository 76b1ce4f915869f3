"""Domain validation: the gold answer scores 1.0, empty and garbage answers score 0.0, deterministically.

For agent domains the gold answer is the task's gold assistant messages (`metadata["gold_turns"]`) run
as an episode; empty and garbage are one-message episodes. A canary (`metadata["canary"]`: a task no
honest response can pass) has no gold answer: instead its `metadata["honest_answer"]`, the answer to what
its prompt asks, must score 0.

Run for any set of domains by `posttrain domains validate` and by the contract tests. Each check
regenerates its tasks twice and scores every response twice, so non-determinism in a family or a
verifier is caught too. Scoring goes through an inline `Grader` like every other caller, so a verifier
that raises shows up as an infra score and is reported as a failure, never propagated.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from posttrain.tasks.base import CANARY, GOLD_TURNS, HONEST_ANSWER
from posttrain.tasks.pool import TaskPool
from posttrain.types import Score, Task
from posttrain.verify import ExecutorConfig, Grader

GARBAGE_RESPONSE = "zzq ~~ ###garbage### \x00 \\boxed{qqzx} Answer: nonsense-token"
"""A response no verifier should accept."""


@dataclass
class DomainCheck:
    """The outcome of validating one domain."""

    domain_id: str
    num_tasks: int = 0
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failures


def validate_domain(pool: TaskPool, domain_id: str, num_tasks: int = 3) -> DomainCheck:
    """Check gold = 1.0, empty = 0.0 and garbage = 0.0 on `num_tasks` tasks of one domain."""
    check = DomainCheck(domain_id)
    try:
        grader = pool.registry.grader(ExecutorConfig(num_workers=0))
        tasks = [pool.task(domain_id, i) for i in range(_num_indices(pool, domain_id, num_tasks))]
        again = [pool.task(domain_id, i) for i in range(len(tasks))]
    except Exception as exc:  # a broken family is a validation failure, reported not raised
        check.failures.append(f"generation failed: {type(exc).__name__}: {exc}")
        return check
    if tasks != again:
        check.failures.append("task generation is not deterministic")
    for task in tasks:
        check.num_tasks += 1
        if task.metadata.get(CANARY):
            _expect_canary(check, grader, task)
        else:
            gold = task.metadata.get(GOLD_TURNS) or [task.answer or ""]
            _expect(check, grader, task, gold, "gold", lambda s: s.reward == 1.0 and s.passed)
        _expect(check, grader, task, [""], "empty", _is_zero)
        _expect(check, grader, task, [GARBAGE_RESPONSE], "garbage", _is_zero)
    return check


def _expect_canary(check: DomainCheck, grader: Grader, task: Task) -> None:
    """A canary has no gold answer, and even the answer to what its prompt asks must fail."""
    if task.answer is not None:
        check.failures.append(f"{task.id}: a canary has a gold answer")
    honest = task.metadata.get(HONEST_ANSWER)
    if not isinstance(honest, str):
        check.failures.append(f"{task.id}: a canary without metadata[{HONEST_ANSWER!r}]")
        return
    _expect(check, grader, task, [honest], "canary's honest", _is_zero)


def _num_indices(pool: TaskPool, domain_id: str, wanted: int) -> int:
    size = pool.registry.get(domain_id).spec.size
    return wanted if size is None else min(wanted, size)


def _is_zero(score: Score) -> bool:
    return score.reward == 0.0 and not score.passed and not score.is_infra_failure


def _expect(
    check: DomainCheck, grader: Grader, task: Task, turns: list[str], label: str, ok: Callable[[Score], bool]
) -> None:
    first, second = grader.grade_turns([(task, turns), (task, turns)])
    if first != second:
        check.failures.append(f"{task.id}: {label} answer scored non-deterministically")
    elif not ok(first):
        check.failures.append(
            f"{task.id}: {label} answer scored reward={first.reward} passed={first.passed} {first.message}".rstrip()
        )
