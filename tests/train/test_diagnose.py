"""`posttrain diagnose`: training-signal columns averaged per window between evaluation points."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from posttrain.cli import main
from posttrain.train.diagnose import diagnose, markdown


def _step(step: int, reward: float, kl: float | None = None) -> dict[str, float]:
    row = {"step": step, "domain/a/samples": 8, "domain/a/reward": reward, "domain/a/response_tokens": 4.0,
           "domain/a/zero_variance": 0.5, "entropy/a": 0.2}
    if kl is not None:
        row["kl_base/a"] = kl
    return row


def _run_dir(tmp_path: Path) -> Path:
    steps = [_step(1, 0.1, 0.0), _step(2, 0.3, 0.02), _step(3, 0.5, 0.04), _step(4, 0.7, 0.06)]
    steps[2]["domain/a/samples"] = 0  # domain a not drawn at step 3: its columns skip that step
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in steps))
    for label, rate in (("base", 0.25), ("step2", 0.5), ("final", 0.75)):
        doc = {"a": {"pass_rate": rate}, "untrained": {"pass_rate": 0.1}}
        (tmp_path / f"eval_{label}.json").write_text(json.dumps(doc))
    (tmp_path / "eval_final_sampled.json").write_text(json.dumps({"a": {"pass_at_1": 0.6}}))
    return tmp_path


def test_windows_between_evaluation_points(tmp_path: Path) -> None:
    rows = diagnose(_run_dir(tmp_path))
    assert [(r.domain_id, r.step) for r in rows] == [("a", 0), ("a", 2), ("a", 4)]  # trained domains only
    base, mid, final = rows
    assert base.greedy == 0.25 and base.train_reward is None and base.sampled is None
    assert mid.greedy == 0.5 and mid.train_reward == pytest.approx(0.2) and mid.kl_base == pytest.approx(0.01)
    assert final.train_reward == pytest.approx(0.7)  # step 3 did not sample domain a
    assert final.kl_base == pytest.approx(0.05) and final.sampled == 0.6 and final.zero_signal == 0.5
    table = markdown(rows)
    assert "| a | 4 | 0.750 | 0.600 | 0.700 | 4.0 | 0.200 | 0.0500 | 0.50 |" in table


def test_cli_prints_the_table_and_refuses_a_non_run_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagnose", str(_run_dir(tmp_path))]) == 0
    assert "| a | 2 | 0.500 |" in capsys.readouterr().out
    assert main(["diagnose", str(tmp_path / "missing")]) == 2
