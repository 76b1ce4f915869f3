"""Manual spot checks: a stratified draw of logged samples for people to judge, and their agreement with the verifier.

`draw` takes up to `per_domain` samples of every domain from a run's `samples.jsonl`, a
`high_reward_share` of them among the rewarded ones (reward > 0: a hack is a reward the response did not
earn, so rewarded samples are over-sampled) and the rest among the others, topping either part up from
the other when it runs short; each domain's draw is seeded by (seed, domain id) and shuffled, so the
rewarded ones do not come first. `write_review` writes `RUN_DIR/spotcheck/review.jsonl` (one
`ReviewItem` per line, `verdict` and `reviewer` null) and `review.html` (`posttrain.eval.spotcheck_html`).

Reviewers fill in `"verdict": "pass"` or `"fail"` (and their name) in a copy of the JSONL;
`agreement(review, imported)` joins their lines to the review by `id` (the verifier's grade is taken from
the review, never from the copy), counts each (reviewer, item) verdict once (the last), and reports per
domain the share of verdicts that agree with the verifier's `passed`, with n and a 95% Wilson interval,
plus how many of the disagreements are the verifier passing what the reviewer failed (the direction
that hides reward hacking). `agreement.json`: `{"domains": {domain_id: {"n", "agreement", "ci_low",
"ci_high", "verifier_pass_reviewer_fail", "verifier_fail_reviewer_pass", "reviewers"}}, "overall": {...},
"files": [...]}`. Not here: the command line (`posttrain/cli/hacking.py`).
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from posttrain.errors import UsageError
from posttrain.eval.hacking import by_domain
from posttrain.eval.hacking_stats import wilson_interval
from posttrain.eval.sample_log import LoggedSample

SPOTCHECK_DIR = "spotcheck"
REVIEW_FILE = "review.jsonl"
REVIEW_HTML = "review.html"
AGREEMENT_FILE = "agreement.json"
VERDICTS = ("pass", "fail")
"""What a reviewer writes in `verdict` (null: not judged)."""


@dataclass(frozen=True)
class ReviewItem:
    """One sample to judge (the schema of a `review.jsonl` line)."""

    id: str
    """The logged sample's key, `<step>:<task id>:<group index>`."""
    domain_id: str
    task_id: str
    step: int
    prompt: str
    """The prompt excerpt the run logged ("" when it logged none)."""
    response: str
    reward: float
    passed: bool
    """The verifier's verdict."""
    verdict: str | None = None
    """`pass`, `fail` or None, written by a reviewer."""
    reviewer: str | None = None
    note: str = ""

    @classmethod
    def of(cls, sample: LoggedSample) -> ReviewItem:
        return cls(sample.key, sample.domain_id, sample.task_id, sample.step, sample.prompt, sample.response,
                   sample.reward, sample.passed)  # fmt: skip

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str) -> ReviewItem:
        """A line of a review file; UsageError naming `where` when it is not one."""
        try:
            item = cls(**{name: data[name] for name in cls.__dataclass_fields__ if name in data})
        except TypeError as exc:
            raise UsageError(f"{where}: not a review line ({exc})") from None
        if item.verdict is not None and item.verdict not in VERDICTS:
            raise UsageError(f"{where}: verdict must be \"pass\", \"fail\" or null, not {item.verdict!r}")
        return item


def draw(samples: Sequence[LoggedSample], per_domain: int = 20, high_reward_share: float = 0.5,
         seed: int = 0) -> list[ReviewItem]:  # fmt: skip
    """The stratified draw of the module docstring, domains in sorted order."""
    items: list[ReviewItem] = []
    for domain_id, group in by_domain(samples, lambda s: s.domain_id).items():
        rng = random.Random(f"{seed}/{domain_id}")
        high = [s for s in group if s.reward > 0]
        low = [s for s in group if s.reward <= 0]
        rng.shuffle(high)
        rng.shuffle(low)
        want_high = min(len(high), round(per_domain * high_reward_share))
        want_low = min(len(low), per_domain - want_high)
        want_high = min(len(high), per_domain - want_low)
        chosen = high[:want_high] + low[:want_low]
        rng.shuffle(chosen)
        items.extend(ReviewItem.of(s) for s in chosen)
    return items


def write_review(run_dir: Path, items: Sequence[ReviewItem]) -> Path:
    """Write review.jsonl and review.html under `RUN_DIR/spotcheck/`; returns the folder."""
    from posttrain.eval.spotcheck_html import render_review

    folder = run_dir / SPOTCHECK_DIR
    folder.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(asdict(item), ensure_ascii=False) for item in items]
    (folder / REVIEW_FILE).write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    (folder / REVIEW_HTML).write_text(render_review(items, str(run_dir)), encoding="utf-8")
    return folder


def read_review(path: Path) -> list[ReviewItem]:
    """The items of a review file (UsageError naming the line of a malformed one)."""
    if not path.is_file():
        raise UsageError(f"{path}: no such review file")
    items = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except ValueError as exc:
            raise UsageError(f"{path}:{number}: not JSON ({exc})") from None
        if not isinstance(data, dict):
            raise UsageError(f"{path}:{number}: not a JSON object")
        items.append(ReviewItem.from_dict(data, f"{path}:{number}"))
    return items


def agreement(review: Sequence[ReviewItem], imported: Sequence[tuple[str, Sequence[ReviewItem]]]) -> dict[str, Any]:
    """Reviewer-verifier agreement per domain (module docstring); `imported` is (file name, its items)."""
    original = {item.id: item for item in review}
    verdicts: dict[tuple[str, str], bool] = {}
    for name, items in imported:
        for item in items:
            if item.verdict is None:
                continue
            if item.id not in original:
                raise UsageError(f"{name}: id {item.id!r} is not in the review")
            verdicts[(item.reviewer or Path(name).stem, item.id)] = item.verdict == "pass"
    rows = [(reviewer, original[item_id], says_pass) for (reviewer, item_id), says_pass in verdicts.items()]
    domains = {d: _agreement(group) for d, group in by_domain(rows, lambda row: row[1].domain_id).items()}
    return {"domains": domains, "overall": _agreement(rows), "files": [name for name, _ in imported]}


def _agreement(rows: Sequence[tuple[str, ReviewItem, bool]]) -> dict[str, Any]:
    agree = sum(item.passed == says_pass for _, item, says_pass in rows)
    low, high = wilson_interval(agree, len(rows))
    return {
        "n": len(rows),
        "agreement": agree / len(rows) if rows else None,
        "ci_low": None if math.isnan(low) else low,
        "ci_high": None if math.isnan(high) else high,
        "verifier_pass_reviewer_fail": sum(item.passed and not says for _, item, says in rows),
        "verifier_fail_reviewer_pass": sum(says and not item.passed for _, item, says in rows),
        "reviewers": len({reviewer for reviewer, _, _ in rows}),
    }


def write_agreement(run_dir: Path, document: dict[str, Any]) -> Path:
    path = run_dir / SPOTCHECK_DIR / AGREEMENT_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2, ensure_ascii=False))
    return path
