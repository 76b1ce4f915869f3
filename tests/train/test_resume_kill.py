"""`posttrain train` killed with SIGKILL after a checkpoint, then run with `--resume`, ends with the same
per-step losses as an uninterrupted run, each step's metrics row once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from posttrain.cli import main
from posttrain.train import checkpoint as ckpt
from posttrain.train.loop import train
from tests.train.test_loop import make_config

ROOT = Path(__file__).resolve().parents[2]
STEPS = 8
KILL_AFTER = 3
"""SIGKILL as soon as the checkpoint of this step exists."""


def metrics(run_dir: Path) -> list[dict[str, float]]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def run_until_checkpoint(config_path: Path, run_dir: Path, step: int, timeout_s: float = 120.0) -> None:
    """Start `posttrain train` and SIGKILL it once checkpoint `step` is complete."""
    command = [sys.executable, "-m", "posttrain.cli", "train", str(config_path), "--run-dir", str(run_dir)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + timeout_s
    try:
        while not (ckpt.checkpoint_path(run_dir, step) / "meta.json").is_file():
            if proc.poll() is not None:
                raise AssertionError(f"training exited early ({proc.returncode}): {proc.stderr.read().decode()[-2000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"no checkpoint {step} after {timeout_s} s")
            time.sleep(0.005)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
        assert proc.stderr is not None
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL


def test_killed_run_resumes_to_the_uninterrupted_losses(tiny_model_dir: Path, tmp_path: Path) -> None:
    config = make_config(tiny_model_dir, steps=STEPS, checkpoint_every=1, threads=1, filter={"enabled": True})
    config_path = tmp_path / "config.yaml"
    config_path.write_text(yaml.safe_dump(config.model_dump(mode="json")))
    run_until_checkpoint(config_path, tmp_path / "killed", KILL_AFTER)
    latest = ckpt.latest_checkpoint(tmp_path / "killed")
    assert latest is not None and not (tmp_path / "killed" / "summary.json").exists()
    assert KILL_AFTER <= ckpt.load_checkpoint(latest).extra["loop_step"] < STEPS  # killed mid-run
    assert main(["train", str(config_path), "--run-dir", str(tmp_path / "killed"), "--resume"]) == 0
    train(config, tmp_path / "whole", log=lambda _: None)
    resumed, whole = metrics(tmp_path / "killed"), metrics(tmp_path / "whole")
    assert [row["step"] for row in resumed] == list(range(1, STEPS + 1))  # no step twice
    assert [row["loss"] for row in resumed] == [row["loss"] for row in whole]
