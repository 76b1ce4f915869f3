"""`posttrain eval --checkpoints LABEL=SPEC ...`: the evaluation matrix and the regression gate.

The `eval` parser lives in `posttrain.cli.train` (with its single-model form, `--model`); this module
adds the matrix's arguments to it and runs the matrix: checkpoints loaded one at a time through
`posttrain.train.checkpoint_policy`, evaluated by `posttrain.eval.matrix` with the result cache under
`--cache-dir` (default `OUT/cache`), `OUT/matrix.json` written, a per-class table printed, and with
`--gate` the offenders of every checkpoint that fails; the exit status is then 1 when one fails.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from posttrain.errors import UsageError


def add_matrix_arguments(p: argparse.ArgumentParser) -> None:
    """The matrix form's options (the `eval` parser keeps its own `--domains`, `--tasks-per-domain`,
    `--max-new-tokens`, `--backend`, `--threads`)."""
    p.add_argument("--checkpoints", nargs="+", metavar="LABEL=SPEC",
                   help="checkpoints to evaluate: a preset (tiny, smollm2-135m), an HF dir, a run dir, a "
                        "checkpoint dir or a train config (its base model)")  # fmt: skip
    p.add_argument("--select", nargs="+", metavar="GLOB", help="only the domains matching these globs")
    p.add_argument("--attention", default="exact", metavar="KIND[:N]",
                   help="native engine attention: exact, window:N (N most recent positions plus sinks) or "
                        "quest:N (N KV blocks per decode query); the reward impact of a sparse mode is its "
                        "matrix against exact on the same tasks")  # fmt: skip
    p.add_argument("--out", type=Path, help="output folder of matrix.json (and the cache)")
    p.add_argument("--samples-per-task", type=int, default=0, help="n sampled responses per task (0: greedy only)")
    p.add_argument("--pass-k", type=int, help="k of pass@k (default: n)")
    p.add_argument("--temperature", type=float, default=0.7, help="temperature of the sampled responses")
    p.add_argument("--seed", type=int, default=0, help="seed of the sampled responses")
    p.add_argument("--max-total-tokens", type=int, default=None,
                   help="bound on an agent episode's tokens (default: the config's rollout.episode.max_total_tokens)")
    p.add_argument("--workers", type=int, default=2, help="verifier worker processes (0: inline)")
    p.add_argument("--cache-dir", type=Path, help="result cache folder (default OUT/cache)")
    p.add_argument("--gate", action="store_true", help="gate every checkpoint against --base; exit 1 on a failure")
    p.add_argument("--base", default="base", help="label of the base checkpoint for --gate")
    p.add_argument("--margin", type=float, default=0.02, help="largest tolerated drop of a suite domain")
    p.add_argument("--suite", nargs="+", metavar="GLOB", help="gate suite (default: untrained + arithmetic + text)")


def cmd_matrix(args: argparse.Namespace, config: Any, config_of: Callable[[str], Any]) -> int:
    """Run the matrix over `config`'s domains (a `TrainConfig`: also the `tiny` preset's recipe);
    `config_of` resolves a train config name or path (a checkpoint spec naming a config)."""
    if args.out is None:
        raise UsageError("eval --checkpoints needs --out DIR")
    specs = parse_checkpoints(args.checkpoints)
    if args.gate and args.base not in dict(specs):
        raise UsageError(f"--gate compares with --base {args.base!r}, which is not among the checkpoints")
    import torch

    from posttrain.eval.cache import ResultCache
    from posttrain.eval.gate import GateConfig
    from posttrain.eval.matrix import MatrixConfig, evaluate_matrix
    from posttrain.tasks.pool import TaskPool
    from posttrain.verify import ExecutorConfig

    torch.set_num_threads(args.threads or config.threads)
    pool = TaskPool.from_config(config.domains)
    domain_ids = pool.registry.select(args.select) if args.select else pool.registry.ids()
    matrix_config = MatrixConfig(
        tasks_per_domain=args.tasks_per_domain, samples_per_task=args.samples_per_task, pass_k=args.pass_k,
        temperature=args.temperature, seed=args.seed, attention=parse_attention(args.attention),
        **budgets(args, config),
    )  # fmt: skip
    if matrix_config.attention.kind != "exact" and args.backend != "native":
        raise UsageError("--attention needs --backend native")
    grader = pool.registry.grader(ExecutorConfig(num_workers=args.workers))
    start = time.perf_counter()
    try:
        with ResultCache(args.cache_dir or args.out / "cache") as cache:
            result = evaluate_matrix(_policies(specs, config, config_of, args.backend, matrix_config), pool, domain_ids, grader.grade,
                                     matrix_config, cache, _log_stderr)  # fmt: skip
    finally:
        grader.close()
    gates = result.gate(GateConfig(margin=args.margin, suite=args.suite or []), args.base) if args.gate else None
    doc = result.document(gates, args.base)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "matrix.json").write_text(json.dumps(doc, allow_nan=False))
    cells = doc["cells"]
    _log_stderr(f"{len(cells)} cells ({sum(c['computed_samples'] == 0 for c in cells)} wholly cached), "
                f"{sum(c['cached_samples'] for c in cells)} responses cached, "
                f"{sum(c['computed_samples'] for c in cells)} computed, {time.perf_counter() - start:.1f} s; "
                f"wrote {args.out / 'matrix.json'}")  # fmt: skip
    print_matrix(doc)
    return 0 if gates is None or all(g.passed for g in gates) else 1


def budgets(args: argparse.Namespace, config: Any) -> dict[str, int]:
    """Tokens per response (or agent turn) and per agent episode: the flags, else the config's own
    (`eval.max_new_tokens`, `rollout.episode.max_total_tokens`), so a train config's checkpoints are
    evaluated with the budgets its run evaluated them with."""
    return {"max_new_tokens": args.max_new_tokens or config.eval.max_new_tokens,
            "max_total_tokens": args.max_total_tokens or config.rollout.episode.max_total_tokens}


def parse_checkpoints(items: list[str]) -> list[tuple[str, str]]:
    """`LABEL=SPEC` pairs, labels unique (a bare SPEC is its own label)."""
    pairs = [tuple(item.split("=", 1)) if "=" in item else (item, item) for item in items]
    labels = [label for label, _ in pairs]
    duplicates = sorted({label for label in labels if labels.count(label) > 1})
    if duplicates:
        raise UsageError(f"checkpoint labels must be unique: {', '.join(duplicates)}")
    return [(label, spec) for label, spec in pairs]


def parse_attention(text: str) -> Any:
    """`exact`, `window:N` or `quest:N` as an `AttentionConfig` (N: window tokens or KV blocks)."""
    from pydantic import ValidationError

    from posttrain.rollout.config import AttentionConfig

    kind, _, budget = text.partition(":")
    fields = {"window": "window_tokens", "quest": "top_k_blocks"}
    if kind == "exact" and not budget:
        return AttentionConfig()
    if kind not in fields or not budget.isdigit():
        raise UsageError(f"--attention {text!r}: expected exact, window:N or quest:N")
    try:
        return AttentionConfig.model_validate({"kind": kind, fields[kind]: int(budget)})
    except ValidationError as exc:
        raise UsageError(f"--attention {text!r}: {exc.errors()[0]['msg']}") from exc


def _policies(specs: list[tuple[str, str]], config: Any, config_of: Callable[[str], Any], backend: str,
              matrix_config: Any) -> Iterator[Any]:  # fmt: skip
    """Each checkpoint loaded when the matrix reaches it (the previous one is released first)."""
    from pydantic import TypeAdapter

    from posttrain.eval.collect import Policy
    from posttrain.rollout import PromptRenderer, build_engine
    from posttrain.rollout.config import EngineConfig
    from posttrain.train.checkpoint_policy import load_policy

    engine: dict[str, Any] = {"kind": backend}
    if backend == "native":
        engine["attention"] = matrix_config.attention.model_dump()
    engine_config = TypeAdapter(EngineConfig).validate_python(engine)
    for label, spec in specs:
        loaded = load_policy(spec, config, config_of, _log_stderr)
        yield Policy(label, loaded.weights_hash, build_engine(engine_config, loaded.model),
                     PromptRenderer(loaded.tokenizer, loaded.system_prompt), loaded.path, loaded.trained_domains)  # fmt: skip
        del loaded


def print_matrix(doc: dict[str, Any]) -> None:
    """Greedy pass@1 per class and checkpoint, then each failing checkpoint's offenders."""
    from rich.console import Console
    from rich.table import Table

    labels = [c["label"] for c in doc["checkpoints"]]
    table = Table(title="greedy pass@1 per class (mean of domain means, 95% CI)")
    table.add_column("class")
    table.add_column("domains", justify="right")
    for label in labels:
        table.add_column(label, justify="right")
    rows: dict[str, dict[str, str]] = {}
    sizes: dict[str, int] = {}
    for agg in doc["aggregates"]["class"]:
        metric = agg["metrics"].get("pass@1")
        rows.setdefault(agg["class"], {})[agg["checkpoint"]] = _value(metric)
        sizes[agg["class"]] = len(agg["domains"])
    for cls, values in rows.items():
        table.add_row(cls, str(sizes[cls]), *(values.get(label, "") for label in labels))
    console = Console(width=160)
    console.print(table)
    _print_changes(console, doc)
    gate = doc.get("gate")
    if gate is None:
        return
    for result in gate["checkpoints"]:
        verdict = "[green]PASS[/green]" if result["passed"] else "[red]FAIL[/red]"
        console.print(f"gate {result['checkpoint']} vs {gate['base']} (margin {gate['margin']}): {verdict}, "
                      f"{len(result['suite'])} suite domains")  # fmt: skip
        if result["passed"]:
            continue
        offenders = Table(title=f"{result['checkpoint']}: regressions against {gate['base']}")
        for column in ("domain / class", "n", "base", "checkpoint", "delta", "95% CI", "p"):
            offenders.add_column(column, justify="left" if column == "domain / class" else "right")
        for row in [*result["domains"], *({**r, "name": f"class {r['name']}"} for r in result["classes"])]:
            if row["regressed"]:
                offenders.add_row(row["name"], str(row["n"]), f"{row['base']:.3f}", f"{row['checkpoint']:.3f}",
                                  f"{row['delta']:+.3f}", f"[{row['ci_low']:+.3f}, {row['ci_high']:+.3f}]",
                                  f"{row['p_value']:.3g}")  # fmt: skip
        console.print(offenders)


CHANGE_METRICS = ("pass@1", "pass@1_sampled", "recovery_sampled")
"""The paired changes printed (matrix.json's `changes` holds every metric)."""


def _print_changes(console: Any, doc: dict[str, Any]) -> None:
    """Each checkpoint's paired change against the base, per class, for `CHANGE_METRICS`."""
    from rich.table import Table

    changes = doc.get("changes")
    labels = list(dict.fromkeys(r["checkpoint"] for r in (changes or {}).get("classes", ())))
    if not changes or not labels:
        return
    table = Table(title=f"change against {changes['base']}: same tasks, mean over the class's domains (95% CI, p)")
    for column in ("class", "metric", *labels):
        table.add_column(column, justify="left" if column in ("class", "metric") else "right")
    by_row: dict[tuple[str, str], dict[str, str]] = {}
    for row in changes["classes"]:
        for name in CHANGE_METRICS:
            m = row["metrics"].get(name)
            if m is not None and m["ci_low"] is not None:
                text = f"{m['delta']:+.3f} [{m['ci_low']:+.3f}, {m['ci_high']:+.3f}] p {m['p_value']:.2g}"
                by_row.setdefault((row["class"], name), {})[row["checkpoint"]] = text
    for (cls, name), values in by_row.items():
        table.add_row(cls, name, *(values.get(label, "") for label in labels))
    console.print(table)


def _value(metric: dict[str, Any] | None) -> str:
    if not metric or metric["value"] is None:
        return "-"
    return f"{metric['value']:.3f} [{metric['ci_low']:.2f}, {metric['ci_high']:.2f}]"


def _log_stderr(message: str) -> None:
    """Progress goes to stderr; the tables to stdout."""
    print(message, file=sys.stderr)
