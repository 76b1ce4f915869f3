"""Sampled evaluation: pass@1 and pass@k worked out by hand, and seeded sampling."""

from __future__ import annotations

import pytest

from posttrain.eval.sampled import summarise_sampled
from posttrain.types import Score, Task


def _task(name: str) -> Task:
    return Task(id=f"a/b/c#{name}", domain_id="a/b/c", prompt=name)


def test_pass_at_1_and_pass_at_k_by_hand() -> None:
    ok, bad, infra = Score.correct(), Score.wrong(), Score.infra("worker died")
    rows = [
        (_task("a"), [ok, bad, ok, infra]),  # 2 of 3 graded samples pass -> 2/3, at least one pass
        (_task("b"), [bad, bad, bad, bad]),  # 0 of 4 -> 0, none passes
        (_task("c"), [infra] * 4),  # nothing graded: left out
    ]
    result = summarise_sampled("a/b/c", 4, rows)
    assert result.task_ids == ("a/b/c#a", "a/b/c#b")
    assert result.fractions == pytest.approx((2 / 3, 0.0))
    assert result.pass_at_1 == pytest.approx(1 / 3)  # (2/3 + 0) / 2
    assert result.pass_at_k == 0.5  # one task of two has a passing sample
    assert result.ci_low <= result.pass_at_1 <= result.ci_high


def test_no_graded_task_gives_nan_not_a_crash() -> None:
    result = summarise_sampled("a/b/c", 2, [(_task("a"), [Score.infra("x")] * 2)])
    assert result.task_ids == () and result.pass_at_1 != result.pass_at_1  # nan
