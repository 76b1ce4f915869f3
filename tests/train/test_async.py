"""Asynchronous training on a tiny random model: reproducible, bounded staleness, exact resume, errors
surface, nothing left running."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from posttrain.train.loop import train
from posttrain.train.run import Run
from posttrain.types import Group, Task
from tests.train.test_loop import make_config

ASYNC = {"mode": "async", "max_staleness": 1, "stale": "drop"}
quiet = lambda _: None  # noqa: E731


def rows(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def losses(run_dir: Path) -> list[float | None]:
    return [row.get("loss") for row in rows(run_dir)]


def producer_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("posttrain-producer")]


def test_async_run_is_reproducible_and_leaves_no_thread(tiny_model_dir: Path, tmp_path: Path) -> None:
    config = make_config(tiny_model_dir, steps=4, dist=ASYNC, filter={"enabled": True})
    train(config, tmp_path / "a", log=quiet)
    assert producer_threads() == []
    train(config, tmp_path / "b", log=quiet)
    first = rows(tmp_path / "a")
    assert [r["step"] for r in first] == [1, 2, 3, 4]
    assert losses(tmp_path / "a") == losses(tmp_path / "b")
    # Step 0 is made before any update (staleness 0), every later step one version behind.
    assert [r["async/staleness_max"] for r in first] == [0.0, 1.0, 1.0, 1.0]
    assert all(r["async/dropped_stale"] == 0 and r["async/overlap_s"] >= 0 and r["sync/weights_s"] >= 0
               for r in first)
    # The first step is the same data as a synchronous run's, so the same loss.
    train(make_config(tiny_model_dir, steps=1, filter={"enabled": True}), tmp_path / "sync", log=quiet)
    assert losses(tmp_path / "sync")[0] == first[0]["loss"]


@pytest.mark.parametrize(("max_staleness", "trained_from_step_1"), [(1, True), (0, False)])
def test_trained_samples_are_never_staler_than_the_bound(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, max_staleness: int, trained_from_step_1: bool
) -> None:
    seen: list[tuple[int, list[int], int]] = []  # (step, staleness of each sample, samples trained on)
    make_batch = Run.make_batch

    def recording(run: Run, groups: Sequence[Group], step: int) -> Any:
        batch, stale = make_batch(run, groups, step)
        seen.append((step, [step - t.policy_version for g in groups for t in g.trajectories], len(batch)))
        return batch, stale

    monkeypatch.setattr(Run, "make_batch", recording)
    dist = {**ASYNC, "max_staleness": max_staleness}
    train(make_config(tiny_model_dir, steps=3, dist=dist), tmp_path, log=quiet)
    logged = rows(tmp_path)
    for (step, ages, trained), row in zip(seen, logged, strict=True):
        stale = [a for a in ages if a > max_staleness]
        assert trained == len(ages) - len(stale)  # exactly the samples within the bound are trained on
        assert row["async/dropped_stale"] == len(stale)
        assert ("loss" in row) == (trained > 0) and row.get("update_skipped", 0.0) == (trained == 0)
        assert bool(stale) == (step >= 1 and not trained_from_step_1)


def test_downweight_scales_stale_samples_and_drop_removes_them(tiny_model_dir: Path, tmp_path: Path) -> None:
    config = make_config(tiny_model_dir, dist={"mode": "async", "max_staleness": 1, "stale": "downweight"})
    with Run.create(config, tmp_path, quiet) as run:
        old = run.sample_and_score(run.draw_tasks(2), version=0)
        new = run.sample_and_score(run.draw_tasks(2), version=2)
        within, _ = run.make_batch(old, step=1)  # staleness 1: weight 1
        beyond, report = run.make_batch(old, step=3)  # staleness 3, excess 2: weight 1/3
        assert report is not None and report.max == 3 and report.num_dropped == 0
        assert within.sample_weights is not None and beyond.sample_weights is not None
        assert beyond.sample_weights == pytest.approx([w / 3 for w in within.sample_weights])
        run.config = run.config.model_copy(update={"dist": run.config.dist.model_copy(update={"stale": "drop"})})
        mixed, report = run.make_batch(old + new, step=3)  # old: staleness 3 (dropped), new: 1 (kept)
        assert report is not None and report.num_dropped == sum(len(g.trajectories) for g in old)
        assert len(mixed) == sum(len(g.trajectories) for g in new)


class Crash(Exception):
    """Stands in for the process dying."""


def test_async_run_crashed_after_a_step_resumes_exactly(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Checkpoints hold the data made ahead (step k+1, made with the weights of step k); the crash comes
    # after step 3 is logged but before its checkpoint, so step 3 is redone and must appear once.
    config = make_config(tiny_model_dir, steps=5, dist=ASYNC, filter={"enabled": True}, checkpoint_every=1)
    train(config, tmp_path / "full", log=quiet)
    save = Run.save

    def crashing(run: Run, step: int) -> None:
        if step == 3:
            raise Crash
        save(run, step)

    monkeypatch.setattr(Run, "save", crashing)
    with pytest.raises(Crash):
        train(config, tmp_path / "split", log=quiet)
    assert [r["step"] for r in rows(tmp_path / "split")] == [1, 2, 3]
    monkeypatch.setattr(Run, "save", save)
    train(config, tmp_path / "split", resume=True, log=quiet)
    assert [r["step"] for r in rows(tmp_path / "split")] == [1, 2, 3, 4, 5]
    assert losses(tmp_path / "split") == losses(tmp_path / "full")


def test_a_producer_error_is_raised_in_the_main_thread(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sample_and_score = Run.sample_and_score

    def failing(run: Run, tasks: Sequence[Task], version: int) -> list[Group]:
        if run.rollout.num_calls >= 2:
            raise RuntimeError("grader lost")
        return sample_and_score(run, tasks, version)

    monkeypatch.setattr(Run, "sample_and_score", failing)
    with pytest.raises(RuntimeError, match="grader lost"):
        train(make_config(tiny_model_dir, steps=4, dist=ASYNC), tmp_path, log=quiet)
    assert producer_threads() == []
