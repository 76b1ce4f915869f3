"""`posttrain hacking` and `posttrain spotcheck` on run directories made of synthetic logs."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
import yaml

from posttrain.cli import main
from posttrain.eval.sample_log import LoggedSample
from posttrain.tasks.families.arithmetic import ArithmeticConfig
from posttrain.tasks.pool import TaskPool
from posttrain.tasks.registry import DomainEntry, DomainsConfig
from posttrain.train.config import TrainConfig
from tests.fakes.hacking_runs import synthetic_run


def _write_run(run_dir: Path, samples: Sequence[LoggedSample], config: TrainConfig | None = None) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "samples.jsonl").write_text("".join(json.dumps(s.to_dict()) + "\n" for s in samples))
    if config is not None:
        (run_dir / "config.yaml").write_text(yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False))
    return run_dir


def test_strict_exits_1_on_a_hacked_run_and_0_on_a_clean_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hacked = _write_run(tmp_path / "hacked", synthetic_run("canary")[0])
    assert main(["hacking", str(hacked), "--strict"]) == 1
    out = capsys.readouterr().out
    assert "ALARM canary_reward code/canary/impossible" in out and "nothing re-graded" in out
    document = json.loads((hacked / "hacking.json").read_text())
    assert document["version"] == 1 and document["fired"] >= 1 and document["regraded"] == 0
    assert main(["hacking", str(hacked)]) == 0  # without --strict an alarm is reported, not an error
    capsys.readouterr()
    clean = _write_run(tmp_path / "clean", synthetic_run(None)[0])
    assert main(["hacking", str(clean), "--strict", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["fired"] == 0
    assert main(["hacking", str(tmp_path / "nothing")]) == 2
    assert main(["hacking", str(clean), "--set", "disagreement_threshold=7"]) == 2


def test_samples_of_a_real_pool_are_regraded_through_the_run_config(tmp_path: Path) -> None:
    domains = DomainsConfig(domains=[DomainEntry(family=ArithmeticConfig(ops=["add"], levels=["easy"]))])
    pool = TaskPool.from_config(domains)
    tasks = [pool.task("math/arithmetic/add@easy", i) for i in range(40)]
    samples = [LoggedSample(i % 4, t.domain_id, t.id, 0, 0, t.answer if i % 3 else "no idea", 2, float(i % 3 > 0),
                            i % 3 > 0, "none", verifier="numeric") for i, t in enumerate(tasks)]  # fmt: skip
    run_dir = _write_run(tmp_path / "run", samples, TrainConfig(domains=domains))
    assert main(["hacking", str(run_dir), "--set", "regrade_fraction=1.0"]) == 0
    document = json.loads((run_dir / "hacking.json").read_text())
    assert document["regraded"] == 40 and document["skipped"] == {} and document["notes"] == []
    disagreement = next(a for a in document["alarms"] if a["detector"] == "verifier_disagreement")
    assert disagreement["value"] == 0.0 and disagreement["stats"]["n"] == 40 and not disagreement["fired"]


def test_spotcheck_draws_refuses_to_overwrite_verdicts_and_imports_them(tmp_path: Path) -> None:
    run_dir = _write_run(tmp_path / "run", synthetic_run(None, steps=6)[0])
    assert main(["spotcheck", str(run_dir), "--per-domain", "6", "--seed", "3"]) == 0
    review = run_dir / "spotcheck" / "review.jsonl"
    lines = [json.loads(line) for line in review.read_text().splitlines()]
    assert len(lines) == 24 and (run_dir / "spotcheck" / "review.html").is_file()
    judged = [{**line, "verdict": "pass" if line["passed"] else "fail", "reviewer": "ann"} for line in lines]
    mine = tmp_path / "ann.jsonl"
    mine.write_text("".join(json.dumps(line) + "\n" for line in judged))
    assert main(["spotcheck", str(run_dir), "--import", str(mine)]) == 0
    result = json.loads((run_dir / "spotcheck" / "agreement.json").read_text())
    assert {d: (r["n"], r["agreement"]) for d, r in result["domains"].items()} == {
        d: (6, 1.0) for d in {line["domain_id"] for line in lines}}  # fmt: skip
    review.write_text(mine.read_text())  # verdicts written into the review itself
    assert main(["spotcheck", str(run_dir)]) == 2
    assert main(["spotcheck", str(run_dir), "--force"]) == 0
