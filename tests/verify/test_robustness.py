"""Every verifier survives huge and malformed responses: a model failure, never a raise or a hang."""

from __future__ import annotations

import pytest

from posttrain.types import ErrorKind, Task
from posttrain.verify import (
    ExactConfig,
    MathConfig,
    NormalizedConfig,
    NumericConfig,
    ReasoningGymConfig,
    build_verifier,
)
from posttrain.verify.gym import load_dataset
from tests.verify.factories import make_task

TEN_MB = 10 * 1024 * 1024
HOSTILE = {
    "ten-megabytes-of-x": "x" * TEN_MB,
    "ten-megabytes-of-digits-and-braces": ("9{\\boxed{" * (TEN_MB // 9)),
    "lone-surrogates": "\ud800 \udfff \\boxed{\udc80}",
    "nul-and-controls": "\x00\x01\x02\n\r\x7f",
    "decoded-invalid-utf8": b"\xff\xfe\xc3(\xa0\xa1".decode("utf-8", "surrogateescape"),
}


def _rg_task() -> tuple[Task, ReasoningGymConfig]:
    params = {"seed": 7, "size": 5}
    entry = load_dataset("basic_arithmetic", params)[0]
    task = Task(id="r#0", domain_id="r/r/r", prompt=entry["question"], gold=entry)
    return task, ReasoningGymConfig(dataset="basic_arithmetic", params=params)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_responses_are_model_failures(name: str) -> None:
    rg_task, rg_config = _rg_task()
    cases = [(make_task("42"), c) for c in (ExactConfig(), NormalizedConfig(), NumericConfig(), MathConfig())]
    for task, config in [*cases, (rg_task, rg_config)]:
        score = build_verifier(config).score(task, HOSTILE[name])
        assert (score.passed, score.error) == (False, ErrorKind.MODEL), config.kind
