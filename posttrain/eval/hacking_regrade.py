"""Re-grading logged samples with an independent second verifier, for the disagreement and trend detectors.

`SECOND_VERIFIERS` is the one table from a primary verifier kind to its second opinion:

| primary | second verifier |
|---|---|
| `math` (math-verify) | the numeric matcher when every reference is a number, else the normalised string matcher |
| `numeric` | math-verify (`math`; it needs the main thread, elsewhere it gives no opinion) |
| `exact`, `normalized` | a normalised match under another answer extraction (`answer_block`, or `final_line` when the primary already uses `answer_block`); case kept for `exact` |
| `code_tests` | the same sandboxed grading with the tests reordered and differential tests against the gold program on perturbed inputs (`posttrain.eval.hacking_code`) |
| `gamedev_play` | the same verifier again: it draws fresh secret play-throughs per grading |
| `citations` | the answer and citations re-checked against the document text (`posttrain.eval.hacking_citations`) |

Other kinds (reasoning_gym, bfcl_ast, cad_geometry, environment, plugins) have none and are not
re-graded. `regrade` picks a seeded fraction of the samples (each sample by a hash of (seed, its key), so
the choice of one sample does not depend on the others), looks their tasks up, and grades each domain's
responses in one batch. An infra failure of the second verifier is no opinion, never a disagreement.
Not here: the detectors (`posttrain.eval.hacking`, `hacking_trends`).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from posttrain.eval.hacking import Regraded, by_domain
from posttrain.eval.hacking_citations import regrade_citations
from posttrain.eval.hacking_code import regrade_code
from posttrain.eval.sample_log import LoggedSample
from posttrain.types import Score, Task
from posttrain.verify.base import GoldError, Verifier, score_safely
from posttrain.verify.build import build_verifier
from posttrain.verify.configs import (
    ExactConfig,
    MathConfig,
    NormalizedConfig,
    NumericConfig,
    VerifierConfig,
)
from posttrain.verify.text import gold_references, parse_number

Regrader = Callable[[Sequence[tuple[Task, str]], VerifierConfig, int], list[Score | None]]
"""(task, response) pairs of one domain, the primary verifier's config, a seed -> the second verifier's
scores in order (None: no second opinion on that item)."""


def _each(items: Sequence[tuple[Task, str]], verifier_for: Callable[[Task], Verifier | None]) -> list[Score | None]:
    out: list[Score | None] = []
    for task, response in items:
        try:
            verifier = verifier_for(task)
        except GoldError:
            verifier = None
        out.append(score_safely(verifier, task, response) if verifier is not None else None)
    return out


def _math_by_text(items: Sequence[tuple[Task, str]], config: VerifierConfig, seed: int) -> list[Score | None]:
    def verifier_for(task: Task) -> Verifier:
        numbers = all(parse_number(ref) is not None for ref in gold_references(task))
        return build_verifier(NumericConfig() if numbers else NormalizedConfig())

    return _each(items, verifier_for)


def _numeric_by_math(items: Sequence[tuple[Task, str]], config: VerifierConfig, seed: int) -> list[Score | None]:
    verifier = build_verifier(MathConfig())
    return _each(items, lambda _task: verifier)


def _text_by_other_extraction(items: Sequence[tuple[Task, str]], config: VerifierConfig,
                              seed: int) -> list[Score | None]:  # fmt: skip
    assert isinstance(config, ExactConfig | NormalizedConfig)
    extract = "final_line" if config.extract == "answer_block" else "answer_block"
    case_sensitive = isinstance(config, ExactConfig) or config.case_sensitive
    verifier = build_verifier(NormalizedConfig(extract=extract, case_sensitive=case_sensitive))
    return _each(items, lambda _task: verifier)


def _same_verifier_again(items: Sequence[tuple[Task, str]], config: VerifierConfig, seed: int) -> list[Score | None]:
    verifier: Any = build_verifier(config)
    try:
        if hasattr(verifier, "score_many"):
            return list(verifier.score_many(list(items)))
        return [score_safely(verifier, task, response) for task, response in items]
    finally:
        if hasattr(verifier, "close"):
            verifier.close()


SECOND_VERIFIERS: dict[str, Regrader] = {
    "math": _math_by_text,
    "numeric": _numeric_by_math,
    "exact": _text_by_other_extraction,
    "normalized": _text_by_other_extraction,
    "code_tests": regrade_code,
    "gamedev_play": _same_verifier_again,
    "citations": regrade_citations,
}
"""Primary verifier kind -> its second verifier (the table in the module docstring)."""


def chosen(sample: LoggedSample, fraction: float, seed: int) -> bool:
    """Whether `sample` is among the re-graded fraction (a hash of (seed, its key) below `fraction`)."""
    digest = hashlib.sha256(f"{seed}/{sample.key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64 < fraction


def regrade(
    samples: Sequence[LoggedSample],
    task_of: Callable[[str], Task],
    verifier_of: Callable[[str], VerifierConfig],
    fraction: float = 0.5,
    seed: int = 0,
    regraders: Mapping[str, Regrader] = SECOND_VERIFIERS,
) -> tuple[list[Regraded], dict[str, int]]:
    """(re-graded samples, counts of samples left out by reason) for a seeded `fraction` of `samples`;
    `task_of(task_id)` rebuilds a task (raising when it cannot), `verifier_of(domain_id)` gives the
    domain's primary verifier config."""
    skipped: Counter[str] = Counter()
    picked = [s for s in samples if chosen(s, fraction, seed)]
    skipped["response cut in the log"] = sum(s.is_cut for s in picked)
    picked = [s for s in picked if not s.is_cut]
    out: list[Regraded] = []
    for domain_id, items in by_domain(picked, lambda s: s.domain_id).items():
        try:
            config = verifier_of(domain_id)
        except Exception:  # noqa: BLE001 - a domain the run's config no longer has
            skipped["domain not in the run's registry"] += len(items)
            continue
        regrader = regraders.get(config.kind)
        if regrader is None:
            skipped[f"no second verifier for {config.kind}"] += len(items)
            continue
        pairs, kept = [], []
        for sample in items:
            try:
                pairs.append((task_of(sample.task_id), sample.response))
                kept.append(sample)
            except Exception:  # noqa: BLE001 - a task that cannot be rebuilt is left out, and counted
                skipped["task not rebuilt"] += 1
        try:
            scores = regrader(pairs, config, seed)
        except Exception as exc:  # noqa: BLE001 - a broken second verifier leaves its domain unchecked
            skipped[f"second verifier failed ({type(exc).__name__})"] += len(kept)
            continue
        for sample, score in zip(kept, scores, strict=True):
            if score is None or score.is_infra_failure:
                skipped["no second opinion"] += 1
            else:
                out.append(Regraded(sample, float(score.reward), bool(score.passed)))
    return out, {reason: count for reason, count in skipped.items() if count}
