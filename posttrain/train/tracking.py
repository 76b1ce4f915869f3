"""Experiment trackers: each step's metrics forwarded to TensorBoard, W&B and MLflow, as the config says.

`TrackingConfig` (the `tracking:` section) names the backends. `"auto"`, the default, keeps TensorBoard
when it is installed and nothing else; an explicit list selects exactly those backends, and a selected
backend that is not installed is a `ConfigError` raised by `check_backends` before the run builds its
model. W&B runs offline unless `mode: online`; MLflow writes to `file:RUN_DIR/mlruns` unless
`mlflow_tracking_uri` says otherwise. Each tracker receives the same numeric row that `metrics.jsonl`
gets (`Outputs.log_step`), keyed by step, and the summary's headline numbers at the end.

Guarantees: importing this module loads none of torch, wandb or mlflow; the run directory's own files
stay the record (a tracker is a copy). Not here: reading the trackers back, or resuming a tracker run
(a resumed training run opens a new tracker run).
"""

from __future__ import annotations

import importlib.util
import os
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal, Protocol

from posttrain.config import StrictModel
from posttrain.errors import ConfigError

Backend = Literal["tensorboard", "wandb", "mlflow"]

BACKEND_MODULES: dict[str, tuple[str, str]] = {
    "tensorboard": ("tensorboard", "pip install tensorboard"),
    "wandb": ("wandb", "pip install wandb"),
    "mlflow": ("mlflow", "pip install mlflow-skinny"),
}
"""Backend -> (the module it needs, how to install it)."""


class TrackingConfig(StrictModel):
    """Where step metrics go besides `metrics.jsonl`."""

    backends: tuple[Backend, ...] | Literal["auto"] = "auto"
    """`auto`: TensorBoard when installed; a list (e.g. [wandb, mlflow]): exactly these, each required."""
    project: str = "posttrain"
    """W&B project and MLflow experiment name."""
    run_name: str | None = None
    """Tracker run name; None uses the run directory's name."""
    mode: Literal["offline", "online", "disabled"] = "offline"
    """W&B mode: `offline` writes under RUN_DIR/wandb (sync later with `wandb sync`), never the network."""
    mlflow_tracking_uri: str | None = None
    """MLflow tracking URI; None writes a file store under RUN_DIR/mlruns."""


class Tracker(Protocol):
    """One experiment-tracking backend: numeric metrics by step, a final summary, then close."""

    def log(self, step: int, metrics: Mapping[str, float]) -> None: ...

    def log_summary(self, values: Mapping[str, float]) -> None: ...

    def close(self) -> None: ...


def selected_backends(config: TrackingConfig) -> tuple[str, ...]:
    """The backends a run uses: the explicit list, or TensorBoard when `auto` and it is installed."""
    if config.backends == "auto":
        return ("tensorboard",) if _installed("tensorboard") else ()
    return tuple(dict.fromkeys(config.backends))


def check_backends(config: TrackingConfig) -> None:
    """Raise a `ConfigError` naming every selected backend that is not installed, and how to add it."""
    missing = [b for b in selected_backends(config) if not _installed(BACKEND_MODULES[b][0])]
    if missing:
        hints = "; ".join(f"{b}: {BACKEND_MODULES[b][1]}" for b in missing)
        raise ConfigError(f"tracking.backends selects {', '.join(missing)}, not installed ({hints})")


def build_trackers(config: TrackingConfig, run_dir: Path, run_config: Mapping[str, Any]) -> list[Tracker]:
    """One tracker per selected backend, each already started; `run_config` is logged as the run's config."""
    check_backends(config)
    return [BUILDERS[b](config, run_dir, run_config) for b in selected_backends(config)]


def summary_values(summary: Mapping[str, Any]) -> dict[str, float]:
    """The summary's numbers a tracker shows at the end: the mean delta and each domain's final reward
    and delta (`summary/<domain>/final_reward`)."""
    values = {"summary/mean_delta": float(summary["mean_delta"]["delta"]),
              "summary/mean_final_reward": float(summary["mean_final_reward"])}
    for domain, entry in summary.get("domains", {}).items():
        values[f"summary/{domain}/final_reward"] = float(entry["final_reward"])
        values[f"summary/{domain}/delta_reward"] = float(entry["delta_reward"])
    return values


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _run_name(config: TrackingConfig, run_dir: Path) -> str:
    return config.run_name or run_dir.resolve().name


class TensorBoardTracker:
    """Scalars through `torch.utils.tensorboard` under RUN_DIR/tensorboard."""

    def __init__(self, config: TrackingConfig, run_dir: Path, run_config: Mapping[str, Any]) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self._writer = SummaryWriter(str(run_dir / "tensorboard"))
        self._last_step = 0

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        for key, value in metrics.items():
            self._writer.add_scalar(key, value, step)
        self._last_step = step

    def log_summary(self, values: Mapping[str, float]) -> None:
        self.log(self._last_step, values)

    def close(self) -> None:
        self._writer.close()


class WandbTracker:
    """A W&B run (offline by default) under RUN_DIR/wandb; the run's config is its W&B config."""

    def __init__(self, config: TrackingConfig, run_dir: Path, run_config: Mapping[str, Any]) -> None:
        import wandb

        # console="off": the run's own progress bar owns the terminal; W&B neither captures nor prints to it.
        settings = wandb.Settings(silent=True, console="off")
        self._run = wandb.init(project=config.project, name=_run_name(config, run_dir), mode=config.mode,
                               dir=str(run_dir), config=dict(run_config), reinit="create_new", settings=settings)

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        self._run.log(dict(metrics), step=step)

    def log_summary(self, values: Mapping[str, float]) -> None:
        self._run.summary.update(dict(values))

    def close(self) -> None:
        import wandb

        self._run.finish()
        # finish() can return before W&B's service process has written the run file; teardown waits for
        # the service to flush and stop (a later wandb.init starts a new one).
        wandb.teardown()


MLFLOW_BATCH = 1000
"""Most metrics MLflow takes in one `log_batch` call."""

_MLFLOW_KEY = re.compile(r"[^\w. :-]")


def mlflow_key(key: str) -> str:
    """`key` as MLflow can store it: `/` becomes `.` (MLflow's file store makes `loss/<domain>` a folder
    under the file of the metric `loss`, and fails), and every other character MLflow rejects (e.g. the
    `@` of `add@easy`) becomes `_`."""
    return _MLFLOW_KEY.sub("_", key.replace("/", "."))


class MlflowTracker:
    """An MLflow run in experiment `project`; the run's config as the artifact `config.yaml`."""

    def __init__(self, config: TrackingConfig, run_dir: Path, run_config: Mapping[str, Any]) -> None:
        uri = config.mlflow_tracking_uri or (run_dir.resolve() / "mlruns").as_uri()
        if uri.startswith("file:"):
            # MLflow keeps its file store in maintenance mode and refuses it unless asked; a run dir
            # holding its own tracking files is what we want here.
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        from mlflow.tracking import MlflowClient

        self._client = MlflowClient(uri)
        experiment = self._client.get_experiment_by_name(config.project)
        experiment_id = experiment.experiment_id if experiment else self._client.create_experiment(config.project)
        run = self._client.create_run(experiment_id, run_name=_run_name(config, run_dir))
        self.run_id: str = run.info.run_id
        self._client.log_dict(self.run_id, dict(run_config), "config.yaml")
        self._last_step = 0

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        from mlflow.entities import Metric

        stamp_ms = int(time.time() * 1000)
        items = [Metric(mlflow_key(k), float(v), stamp_ms, step) for k, v in metrics.items()]
        for start in range(0, len(items), MLFLOW_BATCH):
            self._client.log_batch(self.run_id, metrics=items[start:start + MLFLOW_BATCH])
        self._last_step = step

    def log_summary(self, values: Mapping[str, float]) -> None:
        self.log(self._last_step, values)

    def close(self) -> None:
        self._client.set_terminated(self.run_id)


BUILDERS: dict[str, Callable[[TrackingConfig, Path, Mapping[str, Any]], Tracker]] = {
    "tensorboard": TensorBoardTracker,
    "wandb": WandbTracker,
    "mlflow": MlflowTracker,
}
"""Backend name -> the tracker class that starts it."""
