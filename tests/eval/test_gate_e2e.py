"""End to end: the gate fails a quickstart run trained on inverted text rewards and passes a normal one.

Two short quickstart runs on the embedded tiny base model (built first if it is not cached: minutes), one
with `reward.invert_domains` on the string transforms; then the matrix over base + both runs with
`--gate`, and a second matrix with one more checkpoint that must come from the cache.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from posttrain.cli import main

STEPS = "30"


def _train(run_dir: Path, *overrides: str) -> dict:  # type: ignore[type-arg]
    settings = ["--set", f"steps={STEPS}", "--set", "eval.tasks_per_domain=64", "--set", "eval.gate.enabled=true"]
    assert main(["train", "quickstart", "--run-dir", str(run_dir), *settings, *overrides]) == 0
    return json.loads((run_dir / "summary.json").read_text())  # type: ignore[no-any-return]


@pytest.mark.e2e
@pytest.mark.timeout(3600)
def test_the_gate_fails_an_inverted_run_and_passes_a_normal_one(tmp_path: Path) -> None:
    normal = _train(tmp_path / "normal")
    inverted = _train(tmp_path / "inverted", "--set", 'reward.invert_domains=["text/strings/*"]')
    assert normal["gate"]["best_passing"] is not None  # the trainer's own gate passed its final evaluation
    assert inverted["gate"]["evaluations"][-1]["passed"] is False

    out = tmp_path / "matrix"
    argv = ["eval", "--checkpoints", "base=quickstart", f"normal={tmp_path / 'normal'}",
            f"inverted={tmp_path / 'inverted'}", "--domains", "quickstart", "--out", str(out),
            "--tasks-per-domain", "64", "--max-new-tokens", "12", "--samples-per-task", "2", "--gate"]  # fmt: skip
    assert main(argv) == 1  # a checkpoint fails the gate
    doc = json.loads((out / "matrix.json").read_text())
    gates = {g["checkpoint"]: g for g in doc["gate"]["checkpoints"]}
    assert gates["normal"]["passed"], gates["normal"]["offenders"]
    assert not gates["inverted"]["passed"]
    assert "class text" in gates["inverted"]["offenders"]
    assert any(o.startswith("text/strings/") for o in gates["inverted"]["offenders"])

    best = f"best={tmp_path / 'normal' / 'best_passing'}"  # the normal run's final weights again
    assert main([*argv[:5], best, *argv[5:]]) == 1
    again = json.loads((out / "matrix.json").read_text())
    assert all(c["computed_samples"] == 0 for c in again["cells"])  # every response came from the cache
    cells = {(c["checkpoint"], c["domain_id"]): c for c in again["cells"]}
    assert all(cells[("best", d)]["rewards"] == cells[("normal", d)]["rewards"] for d in [x["domain_id"] for x in doc["domains"]])
