"""A run directory's contents: resolved config, metrics, evals, checkpoints, summary and plots.

Layout: `config.yaml` (the resolved config), `metrics.jsonl` (one line per step: global metrics,
`domain/<id>/<metric>` and the step's wall time split into `time/{generate,verify,learn,other}_s`),
`samples.jsonl` (a few graded samples per domain and step, `posttrain.eval.sample_log`; off with
`log_samples.per_domain_per_step: 0`), `eval_<label>.json`, `checkpoints/step_<n>/`, `summary.json` and
`plots/{reward,mixture}.png` (`posttrain.train.plots`). TensorBoard scalars are written too when
`tensorboard` is installed; `tracking:` selects W&B and MLflow as well (`posttrain.train.tracking`).
A resumed run first rewinds `metrics.jsonl` to its checkpoint's step, so the steps it redoes (those
after the last checkpoint of a run that was killed) appear once there (`samples.jsonl`'s reader keeps
the last record of a sample written twice instead).
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

from posttrain.curriculum import DomainStats
from posttrain.eval.evaluate import DomainEval
from posttrain.eval.sample_log import SAMPLES_FILE, sample_records
from posttrain.eval.sampled import SampledEval
from posttrain.eval.stats import NUM_RESAMPLES, paired, paired_mean_of_domains
from posttrain.train.config import TrainConfig
from posttrain.train.tracking import Tracker, build_trackers, summary_values
from posttrain.types import Group


class Outputs:
    """Writes everything a run leaves behind; prints one progress line per step."""

    def __init__(
        self, run_dir: Path, config: TrainConfig, domain_ids: list[str], untrained_ids: Sequence[str] = ()
    ) -> None:
        self.run_dir = run_dir
        self.domain_ids = domain_ids
        self.untrained_ids = tuple(untrained_ids)
        """Evaluated, never trained on: reported apart, with a flag on a drop (`UNTRAINED_DROP`)."""
        self.total_steps = config.steps
        self.seed = config.seed
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "config.yaml").write_text(yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False))
        self._trackers: list[Tracker] = build_trackers(config.tracking, run_dir, config.model_dump(mode="json"))
        """Each step's numeric row and the summary's numbers go to these too (`tracking:`)."""
        self._metrics = (run_dir / "metrics.jsonl").open("a", encoding="utf-8")
        self.sample_log = config.log_samples
        logging = self.sample_log.per_domain_per_step > 0
        self._samples = (run_dir / SAMPLES_FILE).open("a", encoding="utf-8") if logging else None
        self._start_s = time.perf_counter()
        self._last_s = self._start_s
        self._train_s = 0.0
        """Wall time spent in training steps (evaluations excluded)."""
        self._num_samples = 0
        self._progress = _Progress(config.steps)

    def log_step(
        self,
        step: int,
        metrics: dict[str, float],
        stats: dict[str, DomainStats],
        weights: dict[str, float],
        report: dict[str, float],
        infra_failures: int,
    ) -> None:
        self._num_samples += sum(s.n for s in stats.values())
        now = time.perf_counter()
        step_s = now - self._last_s
        self._train_s += step_s
        self._last_s = now
        row: dict[str, Any] = {"step": step + 1, "elapsed_s": round(now - self._start_s, 3)}
        row.update({k: float(v) for k, v in metrics.items()})
        row.update({f"filter/{k}": v for k, v in report.items()})
        row["train_s"] = round(self._train_s, 3)
        row.update(_step_times(step_s, metrics))
        row["samples_per_s"] = self._num_samples / max(self._train_s, 1e-9)
        row["infra_failures"] = infra_failures
        total = sum(s.n for s in stats.values())
        row["reward"] = sum(s.mean_reward * s.n for s in stats.values()) / max(total, 1)
        row["pass_rate"] = sum(s.pass_rate * s.n for s in stats.values()) / max(total, 1)
        for domain_id, weight in weights.items():
            row[f"domain/{domain_id}/weight"] = weight
        for domain_id, s in stats.items():
            row[f"domain/{domain_id}/reward"] = s.mean_reward
            row[f"domain/{domain_id}/pass_rate"] = s.pass_rate
            row[f"domain/{domain_id}/samples"] = s.n
            row[f"domain/{domain_id}/zero_variance"] = s.zero_variance_fraction
            row[f"domain/{domain_id}/response_tokens"] = s.mean_response_tokens
        self._metrics.write(json.dumps(row) + "\n")
        self._metrics.flush()
        numeric = {k: v for k, v in row.items() if isinstance(v, int | float)}
        for tracker in self._trackers:
            tracker.log(step + 1, numeric)
        self._progress.update(step + 1, row)

    def log_samples(self, step: int, groups: Sequence[Group], verifier_of: Callable[[str], Any]) -> None:
        """Append the step's logged samples (`posttrain.eval.sample_log.sample_records`) to samples.jsonl."""
        if self._samples is None:
            return
        cfg = self.sample_log
        for record in sample_records(step, groups, cfg.per_domain_per_step, cfg.max_chars, cfg.prompt_chars,
                                     self.seed, verifier_of):  # fmt: skip
            self._samples.write(json.dumps(record.to_dict(), ensure_ascii=False) + "\n")
        self._samples.flush()

    def rewind(self, step: int) -> None:
        """Forget the metrics rows of steps after `step` (and a torn last line): a resumed run redoes them."""
        self._metrics.close()
        path = self.run_dir / "metrics.jsonl"
        kept = [line for line in path.read_text(encoding="utf-8").splitlines() if _row_step(line) <= step]
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text("".join(line + "\n" for line in kept), encoding="utf-8")
        os.replace(tmp, path)
        self._metrics = path.open("a", encoding="utf-8")

    def write_eval(self, label: str, result: dict[str, DomainEval]) -> None:
        doc = {d: r.to_dict() for d, r in result.items()}
        (self.run_dir / f"eval_{label}.json").write_text(json.dumps(doc, indent=2))
        self._last_s = time.perf_counter()  # evaluation time is not training time

    def write_sampled_eval(self, label: str, result: dict[str, SampledEval]) -> None:
        doc = {d: r.to_dict() for d, r in result.items()}
        (self.run_dir / f"eval_{label}_sampled.json").write_text(json.dumps(doc, indent=2))
        self._last_s = time.perf_counter()

    def read_sampled_eval(self, label: str) -> dict[str, SampledEval] | None:
        path = self.run_dir / f"eval_{label}_sampled.json"
        if not path.is_file():
            return None
        return {d: SampledEval.from_dict(r) for d, r in json.loads(path.read_text()).items()}

    def read_eval(self, label: str) -> dict[str, DomainEval]:
        doc = json.loads((self.run_dir / f"eval_{label}.json").read_text())
        return {d: DomainEval.from_dict(r) for d, r in doc.items()}

    def write_summary(
        self, base: dict[str, DomainEval], final: dict[str, DomainEval], steps: int, base_model_hash: str = ""
    ) -> dict[str, Any]:
        """Base vs trained per domain, paired on the same eval tasks, with intervals and verdicts."""
        from posttrain.train.plots import write_plots

        domains = {d: _compare(base[d], final[d]) for d in self.domain_ids}
        base_sampled, final_sampled = self.read_sampled_eval("base"), self.read_sampled_eval("final")
        if base_sampled is not None and final_sampled is not None:
            for d in self.domain_ids:
                domains[d]["sampled"] = _compare_sampled(base_sampled[d], final_sampled[d])
        trained = [d for d in self.domain_ids if d not in self.untrained_ids]
        for d in self.domain_ids:
            domains[d]["trained"] = d in trained
        summary: dict[str, Any] = {
            "steps": steps,
            "seed": self.seed,
            "base_model_sha256": base_model_hash,
            "elapsed_s": round(time.perf_counter() - self._start_s, 1),
            "domains": domains,
            **_aggregate(domains, trained, base, final),
        }
        if self.untrained_ids:
            untrained = list(self.untrained_ids)
            for d in untrained:
                high = domains[d]["delta_ci"][1]
                domains[d]["dropped"] = domains[d]["delta_reward"] < -UNTRAINED_DROP and high < 0
            summary["untrained"] = {
                **_aggregate(domains, untrained, base, final),
                "dropped": [d for d in untrained if domains[d]["dropped"]],
            }
        summary["headline"] = headline(summary)
        (self.run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
        for tracker in self._trackers:
            tracker.log_summary(summary_values(summary))
        write_plots(self.run_dir)
        return summary

    def close(self) -> None:
        self._progress.close()
        self._metrics.close()
        for tracker in self._trackers:
            tracker.close()
        self._trackers = []
        if self._samples is not None:
            self._samples.close()


def _row_step(line: str) -> float:
    """The step of a metrics row; infinity for a line that is not one (torn by a kill mid-write)."""
    try:
        return float(json.loads(line)["step"])
    except (ValueError, KeyError, TypeError):
        return math.inf


def _step_times(step_s: float, metrics: dict[str, float]) -> dict[str, float]:
    """The step's wall time and, when the stages timed themselves, the rest of it (`time/other_s`:
    weight sync, batch building, filtering and bookkeeping). In async mode the part of generating and
    grading that ran while the learner was busy (`async/overlap_s`) is not the step's own time."""
    out = {"time/step_s": step_s}
    stages = ("time/generate_s", "time/verify_s", "time/learn_s")
    if all(key in metrics for key in stages):
        hidden = metrics.get("async/overlap_s", 0.0)
        out["time/other_s"] = step_s - sum(metrics[key] for key in stages) + hidden
    return out


UNTRAINED_DROP = 0.02
"""An untrained domain whose reward falls by more than this, with its interval below zero, is flagged."""


def _aggregate(
    domains: dict[str, Any], ids: Sequence[str], base: dict[str, DomainEval], final: dict[str, DomainEval]
) -> dict[str, Any]:
    """Means and verdict counts over `ids`: the paired mean delta with its interval."""
    overall = paired_mean_of_domains([_paired_rewards(base[d], final[d]) for d in ids])
    verdicts = [domains[d]["verdict"] for d in ids]
    return {
        "num_domains": len(ids),
        "mean_base_reward": _mean(domains[d]["base_reward"] for d in ids),
        "mean_final_reward": _mean(domains[d]["final_reward"] for d in ids),
        "mean_delta": {"delta": overall.delta, "ci_low": overall.ci_low, "ci_high": overall.ci_high,
                       "p_value": overall.p_value, "verdict": overall.verdict},
        "domains_improved": sum(domains[d]["delta_reward"] > 0 for d in ids),
        "domains_regressed": sum(domains[d]["delta_reward"] < 0 for d in ids),
        "domains_improved_significantly": verdicts.count("improved"),
        "domains_regressed_significantly": verdicts.count("regressed"),
    }


def headline(summary: dict[str, Any]) -> str:
    """The run in one line, from the summary's own numbers: trained domains whose verdict is `improved`
    and `regressed`, and the mean over them of the paired delta with its interval and p-value, e.g.
    `9/12 trained domains improved significantly, 0 regressed; mean +14.2 pts [+11.0, +17.5] (p=0.001)`;
    then the untrained domains' mean and how many dropped, when the run has any."""
    line = (f"{summary['domains_improved_significantly']}/{summary['num_domains']} trained domains improved "
            f"significantly, {summary['domains_regressed_significantly']} regressed; mean {_mean_text(summary)}")
    untrained = summary.get("untrained")
    if untrained:
        line += (f"; {untrained['num_domains']} untrained domains: mean {_mean_text(untrained)}, "
                 f"{len(untrained['dropped'])} dropped by more than {100 * UNTRAINED_DROP:g} pts")
    return line


def _mean_text(block: dict[str, Any]) -> str:
    mean = block["mean_delta"]
    if math.isnan(mean["delta"]):
        return "n/a (no eval task graded both times)"
    # The bootstrap p-value moves in steps of 2 / NUM_RESAMPLES; its floor, below that, means "smaller".
    resolution = 2.0 / NUM_RESAMPLES
    p_value = f"p<{resolution:g}" if mean["p_value"] < resolution else f"p={mean['p_value']:.3g}"
    interval = f"[{100 * mean['ci_low']:+.1f}, {100 * mean['ci_high']:+.1f}]"
    return f"{100 * mean['delta']:+.1f} pts {interval} ({p_value})"


def _pair_by_task(
    base_ids: Sequence[str], base: Sequence[float], final_ids: Sequence[str], final: Sequence[float]
) -> tuple[list[float], list[float]]:
    """The values of the tasks present in both evaluations, in the same order."""
    before = dict(zip(base_ids, base, strict=True))
    common = [(before[t], v) for t, v in zip(final_ids, final, strict=True) if t in before]
    return [b for b, _ in common], [f for _, f in common]


def _paired_rewards(base: DomainEval, final: DomainEval) -> tuple[list[float], list[float]]:
    return _pair_by_task(base.task_ids, base.rewards, final.task_ids, final.rewards)


def _compare(base: DomainEval, final: DomainEval) -> dict[str, Any]:
    result = paired(*_paired_rewards(base, final))

    def side(e: DomainEval) -> dict[str, Any]:
        return {"reward": e.mean_reward, "pass_rate": e.pass_rate, "ci_low": e.ci_low, "ci_high": e.ci_high,
                "n": e.num_tasks}

    return {
        "base_reward": base.mean_reward,
        "final_reward": final.mean_reward,
        "delta_reward": final.mean_reward - base.mean_reward,
        "base_pass_rate": base.pass_rate,
        "final_pass_rate": final.pass_rate,
        "num_eval_tasks": final.num_tasks,
        "base": side(base),
        "final": side(final),
        "delta_ci": [result.ci_low, result.ci_high],
        "num_paired": result.n,
        "p_value": result.p_value,
        "verdict": result.verdict,
    }


def _compare_sampled(base: SampledEval, final: SampledEval) -> dict[str, Any]:
    """pass@1 (paired on the tasks both runs graded) and pass@k, base vs trained."""
    result = paired(*_pair_by_task(base.task_ids, base.fractions, final.task_ids, final.fractions))
    return {
        "k": final.k,
        "base_pass_at_1": base.pass_at_1,
        "final_pass_at_1": final.pass_at_1,
        "base_ci": [base.ci_low, base.ci_high],
        "final_ci": [final.ci_low, final.ci_high],
        "base_pass_at_k": base.pass_at_k,
        "final_pass_at_k": final.pass_at_k,
        "delta_ci": [result.ci_low, result.ci_high],
        "p_value": result.p_value,
        "verdict": result.verdict,
    }


def _mean(values: Any) -> float:
    items = list(values)
    return sum(items) / len(items) if items else 0.0


class _Progress:
    """A rich progress bar: step, samples/s, reward, ETA."""

    def __init__(self, total_steps: int) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self._bar = Progress(
            TextColumn("[bold]train"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[info]}"),
            TimeRemainingColumn(),
            transient=False,
        )
        self._task = self._bar.add_task("train", total=total_steps, info="")
        self._bar.start()

    def update(self, step: int, row: dict[str, Any]) -> None:
        info = (
            f"reward {row['reward']:.3f} pass {row['pass_rate']:.3f} "
            f"{row['samples_per_s']:.1f} samples/s filtered {row.get('filter/filtered_fraction', 0):.2f}"
        )
        self._bar.update(self._task, completed=step, info=info)

    def close(self) -> None:
        self._bar.stop()
