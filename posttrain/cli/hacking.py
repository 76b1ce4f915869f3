"""`posttrain hacking RUN_DIR` and `posttrain spotcheck RUN_DIR`: reward-hacking checks of a finished run.

`hacking` runs every detector over the run's logs and writes `RUN_DIR/hacking.json`
(`posttrain.eval.hacking_run`); `--strict` exits 1 when an alarm fires. `spotcheck` draws samples for
people to judge into `RUN_DIR/spotcheck/` and, with `--import`, turns their verdicts into
`agreement.json` (`posttrain.eval.spotcheck`). The library is imported inside the command functions, so
registering these commands costs nothing. docs/hacking.md.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser("hacking", help="reward-hacking detectors over a run's logged samples")
    p.add_argument("run_dir", type=Path)
    p.add_argument("--strict", action="store_true", help="exit 1 when any alarm fires")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="a detector setting, e.g. regrade_fraction=1.0 or disagreement_threshold=0.1")  # fmt: skip
    p.add_argument("--canary", action="append", default=[], metavar="PATTERN",
                   help="a further canary domain (glob); `canary` families always are")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print the report instead of a summary")
    p.set_defaults(func=cmd_hacking)

    p = sub.add_parser("spotcheck", help="draw samples for manual review, or import reviewers' verdicts")
    p.add_argument("run_dir", type=Path)
    p.add_argument("--per-domain", type=int, default=20, metavar="N", help="samples per domain (default 20)")
    p.add_argument("--high-reward-share", type=float, default=0.5, metavar="SHARE",
                   help="share drawn among rewarded samples (default 0.5)")  # fmt: skip
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--force", action="store_true", help="draw again over a review that has verdicts")
    p.add_argument("--import", dest="imports", nargs="+", type=Path, metavar="FILE",
                   help="review files with verdicts: write agreement.json")  # fmt: skip
    p.set_defaults(func=cmd_spotcheck)


def _require_run(run_dir: Path) -> None:
    from posttrain.errors import UsageError

    if not (run_dir / "config.yaml").is_file() and not (run_dir / "samples.jsonl").is_file():
        raise UsageError(f"{run_dir} is not a run directory (no config.yaml, no samples.jsonl)")


def cmd_hacking(args: argparse.Namespace) -> int:
    from posttrain.config import apply_overrides, validate
    from posttrain.eval.hacking_run import HackingConfig, check_run, write_report

    _require_run(args.run_dir)
    data = apply_overrides({"canary_domains": list(args.canary)}, args.overrides)
    config = validate(HackingConfig, data, "posttrain hacking --set")
    document = check_run(args.run_dir, config)
    path = write_report(args.run_dir, document)
    if args.json:
        print(json.dumps(document, indent=2))
    else:
        _print_summary(document, path)
    return 1 if args.strict and document["fired"] else 0


def _print_summary(document: dict[str, Any], path: Path) -> None:
    checked = ", ".join(f"{name} {count}" for name, count in document["checked"].items())
    print(f"{document['samples']} samples, {document['regraded']} re-graded; domains checked: {checked}")
    for reason, count in document["skipped"].items():
        print(f"  not re-graded: {count} ({reason})")
    for note in document["notes"]:
        print(f"  note: {note}")
    for alarm in document["alarms"]:
        if alarm["fired"]:
            print(f"ALARM {alarm['detector']} {alarm['domain_id']}: {alarm['message']}")
    print(f"{document['fired']} alarm(s) fired; report: {path}")


def cmd_spotcheck(args: argparse.Namespace) -> int:
    from posttrain.errors import UsageError
    from posttrain.eval import spotcheck as sc
    from posttrain.eval.sample_log import SAMPLES_FILE, read_samples

    _require_run(args.run_dir)
    review_path = args.run_dir / sc.SPOTCHECK_DIR / sc.REVIEW_FILE
    if args.imports:
        imported = [(str(path), sc.read_review(path)) for path in args.imports]
        document = sc.agreement(sc.read_review(review_path), imported)
        path = sc.write_agreement(args.run_dir, document)
        for domain_id, row in document["domains"].items():
            print(f"{domain_id}: agreement {row['agreement']:.2f} [{row['ci_low']:.2f}, {row['ci_high']:.2f}] "
                  f"n={row['n']} (verifier passed / reviewer failed: {row['verifier_pass_reviewer_fail']})")
        print(f"{document['overall']['n']} verdicts; {path}")
        return 0
    if not 0.0 <= args.high_reward_share <= 1.0 or args.per_domain < 1:
        raise UsageError("--per-domain must be >= 1 and --high-reward-share in [0, 1]")
    if review_path.is_file() and not args.force and any(i.verdict for i in sc.read_review(review_path)):
        raise UsageError(f"{review_path} already holds verdicts; import them, or draw again with --force")
    samples = read_samples(args.run_dir / SAMPLES_FILE)
    if not samples:
        raise UsageError(f"{args.run_dir / SAMPLES_FILE} holds no samples (log_samples.per_domain_per_step: 0?)")
    items = sc.draw(samples, args.per_domain, args.high_reward_share, args.seed)
    folder = sc.write_review(args.run_dir, items)
    print(f"{len(items)} samples from {len({i.domain_id for i in items})} domains: {folder / sc.REVIEW_FILE}, "
          f"{folder / sc.REVIEW_HTML}")
    return 0
