"""`posttrain domains list|show|validate` and `posttrain score`: the task pool from the command line.

People get rich tables; `--json` prints one JSON document on stdout (shapes in docs/cli.md).
Everything here delegates to the registry, pool, validation and verifiers.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from posttrain.tasks.registry import DomainRegistry, load_domains, opt_in_entries


def register(sub: Any) -> None:
    domains = sub.add_parser("domains", help="list, show and validate domains")
    dsub = domains.add_subparsers(dest="domains_command", metavar="ACTION", required=True)

    p = dsub.add_parser("list", help="list domains (without --domains: the default set, then every opt-in family)")
    _common(p)
    p.add_argument("--class", dest="cls", help="only this taxonomy class")
    p.set_defaults(func=cmd_list)

    p = dsub.add_parser("show", help="a domain's spec and sample tasks")
    _common(p)
    p.add_argument("domain_id")
    p.add_argument("--num-tasks", type=int, default=3)
    p.set_defaults(func=cmd_show)

    p = dsub.add_parser("validate", help="gold = 1.0, empty/garbage = 0.0 for every domain")
    _common(p)
    p.add_argument("ids", nargs="*", metavar="ID", help="domain ids or glob patterns")
    p.add_argument("--all", action="store_true", help="every domain")
    p.add_argument("--num-tasks", type=int, default=3)
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("score", help="grade model responses offline")
    _common(p)
    p.add_argument("--responses", required=True, help='JSONL of {"task_id", "response"} or {"task_id", "turns": [...]}')
    p.set_defaults(func=cmd_score)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--domains", metavar="CONFIG", help="domains YAML (default: all built-in domains)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def _registry(args: argparse.Namespace) -> tuple[DomainRegistry, Any]:
    config = load_domains(args.domains)
    registry = DomainRegistry.from_config(config)
    for problem in registry.problems:
        print(f"warning: {problem}", file=sys.stderr)
    return registry, config


def _pool(args: argparse.Namespace) -> Any:
    from posttrain.tasks.pool import TaskPool

    registry, config = _registry(args)
    return TaskPool(registry, seed=config.seed, eval_fraction=config.eval_fraction)


def cmd_list(args: argparse.Namespace) -> int:
    registry, _ = _registry(args)
    specs = registry.specs()
    default = {s.id for s in specs}
    if args.domains is None:  # the catalogue: the default domains, then every opt-in family's
        opt_in = DomainRegistry(opt_in_entries())
        for problem in opt_in.problems:
            print(f"warning: {problem}", file=sys.stderr)
        specs = specs + opt_in.specs()
    rows: list[dict[str, Any]] = [
        {
            "id": s.id,
            "class": s.cls,
            "family": s.path.family,
            "level": s.level,
            "difficulty": s.difficulty,
            "verifier": s.verifier,
            "source": s.source,
            "default": s.id in default,
        }
        for s in specs
        if args.cls is None or s.cls == args.cls
    ]
    if args.json:
        classes = sorted({r["class"] for r in rows})
        print(json.dumps({"count": len(rows), "classes": classes, "domains": rows}))
        return 0
    table = Table(title=f"{len(rows)} domains")
    for column in ("id", "class", "family", "difficulty", "verifier", "source", "default"):
        table.add_column(column)
    for r in rows:
        table.add_row(r["id"], r["class"], r["family"], f"{r['difficulty']:.2f}", r["verifier"], r["source"],
                      "yes" if r["default"] else "opt-in")  # fmt: skip
    Console().print(table)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    pool = _pool(args)
    domain = pool.registry.get(args.domain_id)
    tasks = pool.sample(args.domain_id, args.num_tasks, "train")
    doc = {
        "spec": domain.spec.model_dump(),
        "verifier_config": domain.verifier.model_dump(),
        "tasks": [
            {"id": t.id, "prompt": _prompt_text(t.prompt), "gold": t.gold, "answer": t.answer} for t in tasks
        ],
    }
    if args.json:
        print(json.dumps(doc, default=str))
        return 0
    console = Console()
    console.print(f"[bold]{domain.spec.id}[/bold]  {domain.spec.description}")
    for key, value in doc["spec"].items():
        console.print(f"  {key}: {value}")
    console.print(f"  verifier config: {doc['verifier_config']}")
    for t in doc["tasks"]:
        # Prompts and answers are data: `[...]` in them (lists, OpenSCAD vectors) is not rich markup.
        console.print(f"\n[bold]{escape(t['id'])}[/bold]\n{escape(str(t['prompt']))}\n[green]gold:[/green] "
                      f"{escape(str(t['answer']))}")
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from posttrain.errors import UsageError
    from posttrain.tasks.validate import validate_domain

    pool = _pool(args)
    if not args.all and not args.ids:
        raise UsageError("give domain ids or --all")
    ids = pool.registry.ids() if args.all else pool.registry.select(args.ids)
    start = time.perf_counter()
    checks = []
    for domain_id in ids:
        t0 = time.perf_counter()
        check = validate_domain(pool, domain_id, args.num_tasks)
        check.seconds = time.perf_counter() - t0
        checks.append(check)
    failed = [c for c in checks if not c.ok]
    total_s = time.perf_counter() - start
    if args.json:
        rows = [{"id": c.domain_id, "ok": c.ok, "tasks": c.num_tasks, "failures": c.failures} for c in checks]
        doc = {"count": len(checks), "passed": len(checks) - len(failed), "failed": len(failed)}
        print(json.dumps({**doc, "seconds": round(total_s, 2), "domains": rows}))
    else:
        _print_validation(checks, total_s)
    return 1 if failed else 0


def _print_validation(checks: list[Any], total_s: float) -> None:
    console = Console()
    failed = [c for c in checks if not c.ok]
    if failed:
        table = Table(title="failing domains")
        table.add_column("domain")
        table.add_column("first failure")
        for c in failed:
            table.add_row(c.domain_id, c.failures[0])
        console.print(table)
    status = "[green]all passed[/green]" if not failed else f"[red]{len(failed)} failed[/red]"
    console.print(f"validated {len(checks)} domains in {total_s:.1f} s: {status}")


def cmd_score(args: argparse.Namespace) -> int:
    from posttrain.eval.agent_metrics import episode_metrics
    from posttrain.tasks.scoring import print_report, score_responses

    report = score_responses(_pool(args), args.responses, episode_summary=episode_metrics)
    if args.json:
        print(json.dumps(report))
    else:
        print_report(report)
    return 0


def _prompt_text(prompt: Any) -> Any:
    return prompt if isinstance(prompt, str) else [m.model_dump() for m in prompt]
