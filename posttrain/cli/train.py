"""`posttrain train | eval | base build | demo`: the main job from the command line.

A CONFIG argument is a YAML path or the name of a preset in `configs/` (e.g. `quickstart`).
Heavy imports (torch, transformers) happen inside the command functions, not at registration.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from posttrain.cli.evaluate import add_matrix_arguments, budgets, cmd_matrix
from posttrain.errors import UsageError


def register(sub: Any) -> None:
    p = sub.add_parser("train", help="run RL post-training")
    p.add_argument("config", help="YAML path or preset name (configs/<name>.yaml)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--run-dir", type=Path, help="output folder (default runs/<config name>-<time>)")
    p.add_argument("--resume", action="store_true", help="continue from the run dir's latest checkpoint")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("eval", help="evaluate a model, or checkpoints x domains (--checkpoints), on the eval split")
    p.add_argument("--model", help="HF model dir, 'tiny' or 'smollm2-135m' (or give --checkpoints)")
    p.add_argument("--domains", help="domains YAML, train config or preset name (default: quickstart)")
    p.add_argument("--tasks-per-domain", type=int, default=32)
    p.add_argument("--max-new-tokens", type=int, default=None,
                   help="tokens per response or agent turn (default: the config's eval.max_new_tokens)")
    p.add_argument("--backend", choices=["native", "hf"], default="native")
    p.add_argument("--threads", type=int, help="torch threads (default: the config's `threads`)")
    p.add_argument("--json", action="store_true")
    add_matrix_arguments(p)
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("diagnose", help="per domain and eval point: train signal next to held-out reward")
    p.add_argument("run_dir", type=Path)
    p.set_defaults(func=cmd_diagnose)

    base = sub.add_parser("base", help="base models")
    bsub = base.add_subparsers(dest="base_command", metavar="ACTION", required=True)
    p = bsub.add_parser("build", help="build (or reuse) the embedded tiny base model")
    p.add_argument("--preset", choices=["tiny"], default="tiny")
    p.add_argument("--config", default="quickstart", help="train config whose domains and recipe to use")
    p.set_defaults(func=cmd_base_build)

    p = sub.add_parser("demo", help="build the base model, train on the quickstart mix, compare")
    p.add_argument("--config", default="quickstart")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--run-dir", type=Path)
    p.set_defaults(func=cmd_demo)


def cmd_diagnose(args: argparse.Namespace) -> int:
    from posttrain.errors import UsageError
    from posttrain.train.diagnose import diagnose, markdown

    if not (args.run_dir / "metrics.jsonl").is_file():
        raise UsageError(f"{args.run_dir} is not a run directory (no metrics.jsonl)")
    print(markdown(diagnose(args.run_dir)))
    return 0


def _load(name: str, overrides: list[str]) -> Any:
    from posttrain.train.config import load_train_config, resolve_config_path

    return load_train_config(resolve_config_path(name), overrides)


def _run_dir(args: argparse.Namespace, name: str) -> Path:
    return args.run_dir or Path("runs") / f"{Path(name).stem}-{time.strftime('%Y%m%d-%H%M%S')}"


def cmd_train(args: argparse.Namespace) -> int:
    from posttrain.train.loop import train

    config = _load(args.config, args.overrides)
    run_dir = _run_dir(args, args.config)
    summary = train(config, run_dir, resume=args.resume)
    print_summary(summary, run_dir)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from posttrain.train.loop import train

    config = _load(args.config, args.overrides)
    run_dir = _run_dir(args, args.config)
    print(f"posttrain demo: {config.steps} RL steps on {args.config}; outputs in {run_dir}")
    summary = train(config, run_dir)
    print_summary(summary, run_dir)
    return 0


def cmd_base_build(args: argparse.Namespace) -> int:
    from posttrain.train.base_model import ensure_tiny_base

    config = _load(args.config, [])
    path = ensure_tiny_base(config.tiny_base, config.domains)
    print(path)
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    if (args.model is None) == (args.checkpoints is None):
        raise UsageError("eval needs exactly one of --model and --checkpoints")
    if args.checkpoints is not None:
        return cmd_matrix(args, _eval_config(args.domains or "quickstart"), lambda name: _load(name, []))
    import torch
    from pydantic import TypeAdapter

    from posttrain.eval.evaluate import evaluate
    from posttrain.rollout.config import EngineConfig
    from posttrain.train.components import Components
    from posttrain.train.config import ModelConfig, RewardConfig

    config = _eval_config(args.domains or "quickstart")
    torch.set_num_threads(args.threads or config.threads)
    preset = args.model if args.model in ("tiny", "smollm2-135m") else None
    engine = TypeAdapter(EngineConfig).validate_python({"kind": args.backend})
    config = config.model_copy(update={
        "model": ModelConfig(preset=preset) if preset else ModelConfig(path=args.model),
        "rollout": config.rollout.model_copy(update={"engine": engine}),
        "reward": RewardConfig(),
    })
    parts = Components.build(config, _log_stderr)
    try:
        result = evaluate(
            parts.engine, parts.renderer, parts.pool, parts.pool.registry.ids(), parts.grader.grade,
            num_tasks=args.tasks_per_domain, **budgets(args, config),
        )
    finally:
        parts.close()
    rows = [r.to_dict() for r in result.values()]
    if args.json:
        print(json.dumps({"model": args.model, "domains": rows}))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"eval of {args.model}")
    for column in ("domain", "tasks", "reward", "95% CI", "pass rate"):
        table.add_column(column)
    for r in rows:
        table.add_row(r["domain_id"], str(r["num_tasks"]), f"{r['mean_reward']:.3f}",
                      f"[{r['ci_low']:.3f}, {r['ci_high']:.3f}]", f"{r['pass_rate']:.3f}")
    Console().print(table)
    agents = [r for r in rows if r.get("agent")]
    if agents:
        from posttrain.tasks.scoring import episode_table

        Console().print(episode_table(agents))
    return 0


def _log_stderr(message: str) -> None:
    """Progress messages go to stderr so `--json` output stays parseable."""
    print(message, file=sys.stderr)


def _eval_config(name: str) -> Any:
    """A train config; a plain domains YAML becomes the domains of the default config."""
    from posttrain.config import read_yaml
    from posttrain.tasks.registry import load_domains
    from posttrain.train.config import TrainConfig, resolve_config_path

    path = resolve_config_path(name)
    data = read_yaml(path)
    if "domains" in data and isinstance(data["domains"], list):
        return TrainConfig(domains=load_domains(path))
    return _load(name, [])


def print_summary(summary: dict[str, Any], run_dir: Path) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"held-out eval: base vs trained ({summary['steps']} RL steps, seed {summary['seed']})")
    for column in ("domain", "n", "base", "trained", "delta", "95% CI", "p", "verdict"):
        table.add_column(column, justify="left" if column in ("domain", "verdict") else "right")
    colours = {"improved": "green", "regressed": "red"}
    for domain_id, d in summary["domains"].items():
        colour = colours.get(d["verdict"], "white")
        verdict = f"[{colour}]{d['verdict']}[/{colour}]"
        if not d.get("trained", True):
            domain_id = f"{domain_id} (untrained)"
            verdict += " [red]DROPPED[/red]" if d.get("dropped") else ""
        low, high = d["delta_ci"]
        table.add_row(
            domain_id, str(d["num_paired"]), f"{d['base_reward']:.3f}", f"{d['final_reward']:.3f}",
            f"{d['delta_reward']:+.3f}", f"[{low:+.3f}, {high:+.3f}]", f"{d['p_value']:.3g}", verdict,
        )
    blocks = [("mean, trained", summary)]
    if "untrained" in summary:
        blocks.append(("mean, untrained", summary["untrained"]))
    for label, block in blocks:
        mean = block["mean_delta"]
        table.add_row(
            label, "", f"{block['mean_base_reward']:.3f}", f"{block['mean_final_reward']:.3f}",
            f"{mean['delta']:+.3f}", f"[{mean['ci_low']:+.3f}, {mean['ci_high']:+.3f}]", f"{mean['p_value']:.3g}",
            mean["verdict"],
        )
    console = Console(width=None if sys.stdout.isatty() else 132)  # piped output keeps whole rows
    console.print(f"run dir {run_dir}: summary.json, metrics.jsonl, plots/")
    console.print(table)
    console.print(summary["headline"], markup=False, highlight=False)
