"""`posttrain bench sim`: the pipeline simulator's predictions against real local training runs.

Usage: `posttrain bench sim [--quick] [--json] [--out DIR] [--images DIR] [--steps N] [--rounds R]`, or
`posttrain bench sim --scenario cluster [...]` for the cluster-scale sweeps (`posttrain.bench.sim_cluster`).

1. A tiny random Qwen2 (hidden 128, 4 layers) and a byte-level BPE tokenizer fitted on arithmetic and code
   prompts are saved once to a temporary directory.
2. Calibration (`posttrain.bench.sim_calibrate`): one `Run` of a calibration config (arithmetic and code
   domains) driven stage by stage at several batch sizes and response budgets; the stages' service
   times are fitted to the simulator's cost models. None of the validation configs is fitted to.
3. Prediction: for each validation config, a `PipelineScenario` built from those coefficients (and the
   config's batch, group size, budget and domains) is simulated in sync mode.
4. Measurement: each validation config is a real `posttrain.train.loop.train` run (sync; filtering off,
   evaluation cut to the minimum); its samples/s comes from the step times of `metrics.jsonl` after the
   warm-up (the median step; the fastest step is reported too), and its stage times from the steps'
   `time/*_s` fields.
Each round runs 2-4 back to back, so a prediction and its measurement see the same minutes of a shared
machine; `--rounds` repeats it and the headline error per config is the median over rounds of the paired
errors.
The validation configs differ in what the simulator models: a generation-bound arithmetic batch
(16 x 8 samples, 16 tokens), a verification-heavy code batch graded by unit tests in the sandbox
(8 x 4, 32 tokens), a larger mixed batch (32 x 4, 24 tokens, 4 arithmetic + 6 code domains), and the code
batch in async mode (`dist.mode: async`, max_staleness 1: the next step is generated and graded in a
producer thread while the learner updates).
Reports predicted vs measured samples/s, the relative error (target: within 20% on each), the
per-stage times of both, the calibration and the load average. Writes `DIR/sim.json` and
`sim_validation.png` (into `--images`, default DIR).
Not measured: reward worker processes, GPUs. The simulator gives each pool its own hardware; locally
the producer thread, the learner and the sandboxes share two cores (and the GIL).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from posttrain.bench.report import emit_report
from posttrain.config import StrictModel
from posttrain.sched.sim_model import ConstantTime, DomainClass, PipelineScenario, VerifyPool

Family = Literal["arithmetic", "code"]
CLASS_OF_FAMILY: dict[str, str] = {"arithmetic": "math", "code": "code"}
"""The domain class of a family's domains: the first part of their taxonomy path."""
NUM_DOMAINS: dict[str, int] = {"arithmetic": 4, "code": 6}


class LocalConfig(StrictModel):
    """One local training configuration."""

    name: str
    """Label in the report."""
    families: tuple[Family, ...]
    """Domain families trained on (arithmetic: add/sub/mul/multistep@easy; code: 3 families x 2 levels)."""
    tasks_per_step: int = Field(ge=1)
    """Tasks per step."""
    group_size: int = Field(ge=2)
    """Samples per task."""
    max_new_tokens: int = Field(ge=1)
    """Response budget."""
    mode: Literal["sync", "async"] = "sync"
    """`dist.mode`: async makes the next step's data (generate, then grade) while the learner updates."""


VALIDATION = (
    LocalConfig(name="arithmetic", families=("arithmetic",), tasks_per_step=16, group_size=8, max_new_tokens=16),
    LocalConfig(name="code", families=("code",), tasks_per_step=8, group_size=4, max_new_tokens=32),
    LocalConfig(name="mixed", families=("arithmetic", "code"), tasks_per_step=32, group_size=4, max_new_tokens=24),
    LocalConfig(name="code-async", families=("code",), tasks_per_step=8, group_size=4, max_new_tokens=32,
                mode="async"),
)
CALIBRATION = LocalConfig(name="calibration", families=("arithmetic", "code"), tasks_per_step=16, group_size=4,
                          max_new_tokens=24)  # fmt: skip


class SimBenchSettings(StrictModel):
    """What the benchmark runs; recorded in the report."""

    seed: int = 0
    """Seed of the model, the tasks and sampling."""
    threads: int = 1
    """torch CPU threads (one: two slow down badly when the other core is busy, docs/pipeline.md)."""
    warmup_steps: int = 2
    """Untimed steps at the start of each validation run."""
    steps: int = 8
    """Timed steps per validation run."""
    rounds: int = 3
    """Rounds (calibration, predictions, the validation runs); the median of their paired errors is reported."""
    calibration_sizes: tuple[int, ...] = (4, 16, 32)
    """Tasks per calibration step."""
    calibration_budgets: tuple[int, ...] = (12, 40)
    """Response budgets of the calibration steps."""
    calibration_repeats: int = 2
    """Passes over the calibration grid."""
    sim_steps: int = 40
    """Steps simulated per prediction (two of them warm-up)."""
    vocab_size: int = 384
    """Tokenizer (and model) vocabulary."""
    hidden_size: int = 128
    """Model width."""
    num_layers: int = 4
    """Decoder layers."""


def class_of(domain_id: str) -> str:
    return domain_id.split("/", 1)[0]


def domains_config(families: tuple[str, ...], seed: int) -> Any:
    from posttrain.tasks.families.arithmetic import ArithmeticConfig
    from posttrain.tasks.families.code import CodeConfig
    from posttrain.tasks.registry import DomainEntry, DomainsConfig

    family = {
        "arithmetic": ArithmeticConfig(ops=["add", "sub", "mul", "multistep"], levels=["easy"]),
        "code": CodeConfig(families=["integers", "strings", "lists"], levels=["easy", "medium"], humaneval=False,
                           canary=False),
    }  # fmt: skip
    return DomainsConfig(seed=seed, domains=[DomainEntry(family=family[f]) for f in families])  # type: ignore[arg-type]


def build_model_dir(settings: SimBenchSettings, out_dir: Path) -> Path:
    """A tiny random Qwen2 and a tokenizer fitted on rendered prompts and answers of both families."""
    import random

    from posttrain.tasks.pool import TaskPool
    from posttrain.train.base_model import train_tokenizer
    from posttrain.train.models import TinyModelConfig, tiny_random

    pool = TaskPool.from_config(domains_config(("arithmetic", "code"), settings.seed))
    rng = random.Random(settings.seed)
    texts = [f"Q: {t.prompt_text()}\nA: {t.answer}" for d in pool.registry.ids() for t in pool.sample(d, 200, "train", rng)]
    tokenizer = train_tokenizer(texts, settings.vocab_size)
    model = tiny_random(TinyModelConfig(
        vocab_size=len(tokenizer), hidden_size=settings.hidden_size, num_layers=settings.num_layers, num_heads=4,
        num_kv_heads=2, intermediate_size=3 * settings.hidden_size, max_positions=1024, seed=settings.seed,
    ))  # fmt: skip
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return out_dir


def train_config(local: LocalConfig, settings: SimBenchSettings, model_dir: Path, steps: int) -> Any:
    from posttrain.train.config import TrainConfig

    return TrainConfig.model_validate({
        "seed": settings.seed, "steps": steps, "tasks_per_step": local.tasks_per_step, "threads": settings.threads,
        "model": {"path": str(model_dir)}, "domains": domains_config(local.families, settings.seed).model_dump(),
        "mixture": {"kind": "uniform"},
        "rollout": {"group_size": local.group_size, "max_new_tokens": local.max_new_tokens, "temperature": 1.0},
        "reward": {"workers": 0}, "filter": {"enabled": False},
        "policy": {"lr": 1e-5, "micro_batch_size": 64, "epochs": 1, "loss": {"kl_beta": 0.0}},
        "eval": {"tasks_per_domain": 1, "max_new_tokens": 1}, "dist": {"mode": local.mode, "max_staleness": 1},
    })  # fmt: skip


def run_calibration(settings: SimBenchSettings, model_dir: Path, run_dir: Path) -> Any:
    from posttrain.bench.sim_calibrate import calibrate
    from posttrain.train.run import Run

    config = train_config(CALIBRATION, settings, model_dir, steps=1)
    with Run.create(config, run_dir, log=lambda message: print(message, file=sys.stderr)) as run:
        return calibrate(run, settings.calibration_sizes, settings.calibration_budgets, class_of,
                         repeats=settings.calibration_repeats)


def local_scenario(calibration: Any, local: LocalConfig, settings: SimBenchSettings) -> PipelineScenario:
    """The simulator's view of `local`, every coefficient from the calibration run."""
    classes = []
    for family in local.families:
        name, count = CLASS_OF_FAMILY[family], NUM_DOMAINS[family]
        verify = calibration.verify_shape.get(name, ConstantTime(value_s=0.0))
        length = max(1, round(calibration.response_fraction[name] * local.max_new_tokens))
        classes.append(DomainClass(name=name, num_domains=count, batch_share=count,
                                   prompt_tokens=round(calibration.prompt_tokens[name]),
                                   prompt_sigma=calibration.prompt_sigma[name], response_tokens=length,
                                   verify=verify))  # fmt: skip
    return PipelineScenario(
        name=local.name, seed=settings.seed, steps=settings.sim_steps, warmup_steps=2,
        tasks_per_step=local.tasks_per_step, group_size=local.group_size, max_new_tokens=local.max_new_tokens,
        domains=tuple(classes),
        # The local async loop has one producer thread that generates a step, then grades it.
        rollout=calibration.rollout.model_copy(update={"grades_own_calls": local.mode == "async"}),
        verify=VerifyPool(num_workers=1, call_s=calibration.verify_call_s), learner=calibration.learner,
        sync_s=calibration.sync_s, mode=local.mode, max_staleness=1,
    )  # fmt: skip


def measure(local: LocalConfig, settings: SimBenchSettings, model_dir: Path, run_dir: Path) -> dict[str, Any]:
    """One real run; samples/s and mean stage times over the steps after the warm-up."""
    from posttrain.bench.pipeline import rate_from_step_times
    from posttrain.train.loop import train

    config = train_config(local, settings, model_dir, steps=settings.warmup_steps + settings.steps)
    train(config, run_dir, log=lambda message: print(message, file=sys.stderr))
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line]
    timed = rows[settings.warmup_steps:]
    samples = [sum(v for k, v in row.items() if k.startswith("domain/") and k.endswith("/samples")) for row in timed]
    rate = rate_from_step_times([row["elapsed_s"] for row in rows], local.tasks_per_step * local.group_size,
                                settings.warmup_steps)  # fmt: skip
    keys = ("generate_s", "verify_s", "learn_s", "other_s", "step_s")
    fastest = min(timed, key=lambda row: row["time/step_s"])
    per_step = local.tasks_per_step * local.group_size
    return {
        **rate,
        # Other processes on a shared machine only ever slow a step down: the fastest step is the least
        # disturbed, the median resists single spikes.
        "fastest_samples_per_s": per_step / fastest["time/step_s"],
        "median_samples_per_s": per_step / statistics.median(row["time/step_s"] for row in timed),
        "fastest_stages_s": {key: fastest[f"time/{key}"] for key in keys},
        "median_stages_s": {key: statistics.median(row[f"time/{key}"] for row in timed) for key in keys},
        "min_samples_per_step": min(samples),
    }


def run_round(settings: SimBenchSettings, model_dir: Path, work_dir: Path, index: int) -> dict[str, Any]:
    """A calibration run, the predictions it gives and the measured runs, back to back (so a
    prediction and its measurement see the same machine load)."""
    from posttrain.sched.sim import simulate

    start = time.perf_counter()
    calibration = run_calibration(settings, model_dir, work_dir / f"calibration_{index}")
    calibration_s = time.perf_counter() - start
    out: dict[str, Any] = {"calibration": calibration.to_dict() | {"wall_s": calibration_s}}
    for local in VALIDATION:
        predicted = simulate(local_scenario(calibration, local, settings))
        measured = measure(local, settings, model_dir, work_dir / f"{local.name}_{index}")
        out[local.name] = {
            "measured": measured,
            "predicted_samples_per_s": predicted.samples_per_s,
            "predicted_stages_s": predicted.breakdown_s | {"step_s": predicted.step_s},
            "relative_error": _error(predicted.samples_per_s, measured["median_samples_per_s"]),
            "relative_error_fastest_step": _error(predicted.samples_per_s, measured["fastest_samples_per_s"]),
        }
    return out


def _error(predicted: float, measured: float) -> float:
    return (predicted - measured) / measured


def compare(local: LocalConfig, results: list[dict[str, Any]]) -> dict[str, Any]:
    """One config over the rounds. Each round pairs its prediction with its run's median step (typical
    figures of the same minutes); the headline error is the median over rounds of those paired errors.
    The same against the run's fastest step (the least disturbed by other processes) is reported too."""
    def median(values: Any) -> float:
        return float(statistics.median(values))

    stages = results[0]["predicted_stages_s"]
    return {
        "config": local.model_dump(),
        "measured_samples_per_s": median(r["measured"]["median_samples_per_s"] for r in results),
        "predicted_samples_per_s": median(r["predicted_samples_per_s"] for r in results),
        "relative_error": median(r["relative_error"] for r in results),
        "round_errors": [r["relative_error"] for r in results],
        "fastest_step_samples_per_s": median(r["measured"]["fastest_samples_per_s"] for r in results),
        "relative_error_fastest_step": median(r["relative_error_fastest_step"] for r in results),
        "round_errors_fastest_step": [r["relative_error_fastest_step"] for r in results],
        "measured_stages_s": {k: median(r["measured"]["median_stages_s"][k] for r in results)
                              for k in results[0]["measured"]["median_stages_s"]},
        "predicted_stages_s": {k: median(r["predicted_stages_s"][k] for r in results) for k in stages},
    }


def validate(settings: SimBenchSettings, work_dir: Path) -> dict[str, Any]:
    """Every round calibrates, predicts and measures; per config, `compare` over the rounds."""
    model_dir = build_model_dir(settings, work_dir / "model")
    rounds = []
    for index in range(settings.rounds):
        print(f"[bench sim] round {index + 1}/{settings.rounds}", file=sys.stderr, flush=True)
        rounds.append(run_round(settings, model_dir, work_dir, index))
    configs = {local.name: compare(local, [r[local.name] for r in rounds]) for local in VALIDATION}
    worst = max(abs(c["relative_error"]) for c in configs.values())
    return {
        "configs": configs, "worst_relative_error": worst,
        "target": {"name": "|predicted - measured| / measured <= 20% on every config", "met": worst <= 0.2},
        "calibration_config": CALIBRATION.model_dump(), "rounds": rounds,
    }  # fmt: skip


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="posttrain bench sim", description=__doc__.splitlines()[0],
                                     epilog="--scenario cluster [--help]: the cluster-scale sweeps instead")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a summary")
    parser.add_argument("--out", default="bench/results", help="directory for sim.json")
    parser.add_argument("--images", default=None, help="directory for sim_validation.png (default: --out)")
    parser.add_argument("--quick", action="store_true", help="3 timed steps, 1 round (a smoke run)")
    parser.add_argument("--steps", type=int, default=None, help="timed steps per validation run")
    parser.add_argument("--rounds", type=int, default=None, help="repetitions of every validation run")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    choose = argparse.ArgumentParser(add_help=False)
    choose.add_argument("--scenario", choices=["validate", "cluster"], default="validate")
    chosen, rest = choose.parse_known_args(argv)
    if chosen.scenario == "cluster":
        from posttrain.bench.sim_cluster import main as cluster_main

        return cluster_main(rest)
    args = parse_args(rest)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    quick = {"steps": 3, "rounds": 1, "calibration_sizes": (4, 16), "calibration_budgets": (12, 32),
             "calibration_repeats": 1}
    settings = SimBenchSettings.model_validate(quick if args.quick else {})
    updates = {k: v for k, v in {"steps": args.steps, "rounds": args.rounds}.items() if v is not None}
    settings = SimBenchSettings.model_validate({**settings.model_dump(), **updates})
    report: dict[str, Any] = {
        "command": " ".join(["posttrain bench sim", *argv]), "quick": args.quick, "settings": settings.model_dump(),
        "machine": platform.machine(), "cpus": os.cpu_count(), "load_avg_start": os.getloadavg(),
    }  # fmt: skip
    start = time.perf_counter()
    import torch

    torch.set_num_threads(settings.threads)
    with tempfile.TemporaryDirectory(prefix="posttrain-bench-sim-") as tmp, contextlib.redirect_stdout(sys.stderr):
        report.update(validate(settings, Path(tmp)))
    report["load_avg_end"] = os.getloadavg()
    report["total_wall_s"] = time.perf_counter() - start
    from posttrain.bench.sim_plots import write_validation_plot

    images = Path(args.images or args.out)
    images.mkdir(parents=True, exist_ok=True)
    report["images"] = [write_validation_plot(report, images)]
    emit_report(report, args.out, "sim.json", args.json, _print_summary)
    return 0


def _print_summary(report: dict[str, Any]) -> None:
    for name, result in report["configs"].items():
        measured, predicted = result["measured_stages_s"], result["predicted_stages_s"]
        print(f"{name}: measured {result['measured_samples_per_s']:.1f} samples/s, predicted "
              f"{result['predicted_samples_per_s']:.1f} (median error {100 * result['relative_error']:+.1f}%, rounds "
              f"{', '.join(f'{100 * e:+.0f}%' for e in result['round_errors'])}; against the fastest step "
              f"{100 * result['relative_error_fastest_step']:+.1f}%); step "
              f"{measured['step_s']:.3f} s measured / {predicted['step_s']:.3f} s simulated "
              f"(generate {measured['generate_s']:.3f}/{predicted['generate_s']:.3f}, verify "
              f"{measured['verify_s']:.3f}/{predicted['verify_s']:.3f}, learn {measured['learn_s']:.3f}/"
              f"{predicted['learn_s']:.3f}, other {measured['other_s']:.3f}/sync {predicted['sync_s']:.3f})")
    print(f"worst relative error {100 * report['worst_relative_error']:.1f}% (target <= 20%: "
          f"met={report['target']['met']}); load average {report['load_avg_start'][0]:.2f} -> "
          f"{report['load_avg_end'][0]:.2f}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
