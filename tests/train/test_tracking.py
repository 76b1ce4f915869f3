"""Experiment trackers: selection, the missing-backend error, Outputs forwarding each step, and the values
read back from a real offline W&B run file and a real MLflow file store."""

from __future__ import annotations

import importlib.util
import json
import os
import struct
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from posttrain.curriculum import DomainStats
from posttrain.errors import ConfigError
from posttrain.eval.evaluate import DomainEval
from posttrain.train import tracking
from posttrain.train.config import TrainConfig
from posttrain.train.outputs import Outputs
from posttrain.train.tracking import TrackingConfig, check_backends, mlflow_key, selected_backends

DOMAINS = ["math/arithmetic/add@easy", "text/strings/reverse@easy"]


def _require(module: str) -> None:
    """Skip without `module` on a developer machine; in CI (`make setup` installs it) fail instead."""
    if importlib.util.find_spec(module) is None:
        if os.environ.get("CI", "").lower() not in ("", "0", "false"):
            pytest.fail(f"{module} is not installed (make setup installs it)")
        pytest.skip(f"{module} not installed")


class FakeTracker:
    """Records what it was given."""

    instances: list[FakeTracker] = []

    def __init__(self, config: TrackingConfig, run_dir: Path, run_config: Mapping[str, object]) -> None:
        self.run_config = dict(run_config)
        self.steps: list[tuple[int, dict[str, float]]] = []
        self.summary: dict[str, float] = {}
        self.closed = False
        FakeTracker.instances.append(self)

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        self.steps.append((step, dict(metrics)))

    def log_summary(self, values: Mapping[str, float]) -> None:
        self.summary.update(values)

    def close(self) -> None:
        self.closed = True


def _eval(domain: str, passed: int) -> DomainEval:
    rewards = tuple([1.0] * passed + [0.0] * (10 - passed))
    mean = sum(rewards) / 10
    return DomainEval(domain, 10, mean, mean, 0, 1.0, ci_low=mean - 0.1, ci_high=mean + 0.1,
                      task_ids=tuple(f"t{i}" for i in range(10)), rewards=rewards)


def _run(run_dir: Path, config: TrackingConfig, steps: int = 3) -> dict[str, object]:
    """A run's outputs with `steps` logged steps and a summary; domain 0's reward is step / steps."""
    outputs = Outputs(run_dir, TrainConfig(steps=steps, tracking=config), DOMAINS)
    for step in range(steps):
        stats = {d: DomainStats(n=8, mean_reward=step / steps, pass_rate=0.5) for d in DOMAINS}
        # `loss` and `loss/<domain>`, as a real step logs: a key that is another key's prefix
        outputs.log_step(step, {"loss": 0.25, f"loss/{DOMAINS[0]}": 0.5}, stats, dict.fromkeys(DOMAINS, 0.5), {}, infra_failures=0)
    base = {d: _eval(d, 2) for d in DOMAINS}
    final = {d: _eval(d, 7) for d in DOMAINS}
    summary = outputs.write_summary(base, final, steps=steps)
    outputs.close()
    return summary


def test_auto_is_tensorboard_only_when_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tracking, "_installed", lambda module: False)
    assert selected_backends(TrackingConfig()) == ()
    monkeypatch.setattr(tracking, "_installed", lambda module: module == "tensorboard")
    assert selected_backends(TrackingConfig()) == ("tensorboard",)
    assert selected_backends(TrackingConfig(backends=("mlflow", "mlflow"))) == ("mlflow",)
    assert selected_backends(TrackingConfig(backends=())) == ()


def test_a_selected_backend_that_is_missing_is_a_config_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(tracking.BACKEND_MODULES, "wandb", ("posttrain_no_such_module", "pip install wandb"))
    config = TrackingConfig(backends=("wandb",))
    with pytest.raises(ConfigError, match=r"tracking\.backends selects wandb, not installed.*pip install wandb"):
        check_backends(config)
    with pytest.raises(ConfigError):
        Outputs(tmp_path, TrainConfig(tracking=config), DOMAINS)
    check_backends(TrackingConfig(backends=()))  # nothing selected, nothing required


def test_tracking_is_chosen_by_overrides_and_validated() -> None:
    from posttrain.train.config import load_train_config

    config = load_train_config(None, ["tracking.backends=[wandb, mlflow]", "tracking.project=p"])
    assert config.tracking.backends == ("wandb", "mlflow") and config.tracking.project == "p"
    assert TrainConfig().tracking.backends == "auto"
    with pytest.raises(ConfigError, match="tracking"):
        load_train_config(None, ["tracking.backends=[neptune]"])


def test_outputs_forward_every_step_and_the_summary(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    FakeTracker.instances.clear()
    monkeypatch.setitem(tracking.BUILDERS, "mlflow", FakeTracker)
    monkeypatch.setitem(tracking.BACKEND_MODULES, "mlflow", ("json", "-"))
    summary = _run(tmp_path, TrackingConfig(backends=("mlflow",)))
    (fake,) = FakeTracker.instances
    assert fake.closed and fake.run_config["steps"] == 3
    assert [s for s, _ in fake.steps] == [1, 2, 3]
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [m for _, m in fake.steps] == rows  # the same numbers as metrics.jsonl
    assert fake.summary["summary/mean_delta"] == pytest.approx(summary["mean_delta"]["delta"])  # type: ignore[index]
    assert fake.summary[f"summary/{DOMAINS[1]}/final_reward"] == pytest.approx(0.7)


def test_mlflow_keys_drop_what_mlflow_rejects() -> None:
    assert mlflow_key("domain/math/arithmetic/add@easy/reward") == "domain.math.arithmetic.add_easy.reward"
    assert mlflow_key("filter/gave_up-1.0 a:b") == "filter.gave_up-1.0 a:b"


def _wandb_records(path: Path) -> Iterator[object]:
    """The records of a `.wandb` file: a 7-byte header, then LevelDB-log blocks of 32 KiB whose chunks
    (crc32 u32, length u16, type u8: 1 full, 2 first, 3 middle, 4 last) carry protobuf `Record`s."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B"
    pos, pending, block = 7, b"", 32 * 1024
    while pos + 7 <= len(data):
        left = block - pos % block
        _, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if left < 7 or (length == 0 and kind == 0):  # block trailer or padding
            pos += left
            continue
        pending += data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            pending = b""
            yield record


def test_wandb_offline_run_holds_the_logged_values(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _require("wandb")
    for name in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR", "WANDB_ARTIFACT_DIR"):
        monkeypatch.setenv(name, str(tmp_path / "wandb-home"))
    monkeypatch.delenv("WANDB_MODE", raising=False)
    summary = _run(tmp_path / "run", TrackingConfig(backends=("wandb",), run_name="quick"))
    (run_file,) = (tmp_path / "run" / "wandb").glob("offline-run-*/run-*.wandb")
    history: dict[int, dict[str, object]] = {}
    final: dict[str, object] = {}
    for record in _wandb_records(run_file):
        kind = record.WhichOneof("record_type")  # type: ignore[attr-defined]
        if kind == "history":
            items = {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in record.history.item}  # type: ignore[attr-defined]
            history[int(items["_step"])] = items
        elif kind == "summary":
            final.update({i.key or "/".join(i.nested_key): json.loads(i.value_json)
                          for i in record.summary.update})  # type: ignore[attr-defined]
        elif kind == "run":
            assert record.run.display_name == "quick"  # type: ignore[attr-defined]
    assert sorted(history) == [1, 2, 3]
    assert history[3][f"domain/{DOMAINS[0]}/reward"] == pytest.approx(2 / 3)
    assert history[2]["loss"] == 0.25
    assert final["summary/mean_delta"] == pytest.approx(summary["mean_delta"]["delta"])  # type: ignore[index]


def test_mlflow_file_store_holds_the_logged_values(tmp_path: Path) -> None:
    _require("mlflow")
    from mlflow.tracking import MlflowClient

    uri = (tmp_path / "store").as_uri()
    _run(tmp_path / "run", TrackingConfig(backends=("mlflow",), project="exp", mlflow_tracking_uri=uri))
    client = MlflowClient(uri)
    (run,) = client.search_runs([client.get_experiment_by_name("exp").experiment_id])
    assert run.info.run_name == "run" and run.info.status == "FINISHED"
    key = "domain.math.arithmetic.add_easy.reward"
    history = client.get_metric_history(run.info.run_id, key)
    assert [(m.step, m.value) for m in history] == [(1, 0.0), (2, pytest.approx(1 / 3)), (3, pytest.approx(2 / 3))]
    assert run.data.metrics[mlflow_key(f"summary/{DOMAINS[1]}/final_reward")] == pytest.approx(0.7)


def test_mlflow_defaults_to_a_store_in_the_run_dir(tmp_path: Path) -> None:
    _require("mlflow")
    _run(tmp_path, TrackingConfig(backends=("mlflow",)), steps=1)
    names = sorted(p.name for p in (tmp_path / "mlruns").glob("*/*/metrics/loss*"))
    assert names == ["loss", "loss.math.arithmetic.add_easy"]
