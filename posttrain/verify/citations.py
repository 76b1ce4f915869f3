"""The `citations` verifier: grades an answer to a question about documents AND the sections it cites.

Gold is a `CitationGold` (`citation_gold.py`) in `Task.gold`; the response format is parsed by
`citation_parse.py`. Scoring (docs/knowledge.md has a worked example):

- accuracy `a` in {0, 1}: the answer compared by its type - `exact` (whitespace-stripped, case kept),
  `normalized` (NFKC, case folded, punctuation trimmed), `numeric` (the answer must hold exactly one
  number; units, currency signs, `%` and thousands commas are ignored; compared within the gold
  tolerance), `yes_no` (exactly `yes` or `no`), `not_stated` (exactly `not stated`). Aliases count.
- citation precision P = cited sections containing some needed fact / cited sections (0 when nothing
  is cited but facts are needed); recall R = needed facts covered by a cited section / needed facts;
  F1 = 2PR/(P+R); support = every cited section contains a needed fact. With no facts needed
  (unanswerable), citing nothing gives P = R = F1 = 1 and any citation gives P = F1 = 0.
- reward = a x ((1 - w) + w x F1) with w = `citation_weight` (default 1: a x F1); with
  `unsupported_zero`, a citation without evidence makes the reward 0. passed = reward >= `pass_threshold`.
- `json` (structured extraction): each gold field is graded on its own - value by the field's type,
  citations from the field's `cite` (a key or a list of keys) against the field's evidence; the reward is
  the mean over fields of each field's reward; P and R in details are pooled over fields.

Guarantees: never raises (bad gold is an infra failure naming the task; a bad response is a model
failure with reward 0 or partial); deterministic; pure text, no sandbox. Not here: the document model or
question generation (`posttrain.tasks.families.knowledge`).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from pydantic import ValidationError

from posttrain.types import ErrorKind, Score, Task
from posttrain.verify.base import GoldError, guarded
from posttrain.verify.citation_gold import NOT_STATED, CitationGold, EvidenceFact, FieldGold
from posttrain.verify.citation_parse import cite_keys, json_answer, parse_response, scalar_answer
from posttrain.verify.configs import CitationsConfig
from posttrain.verify.text import normalize, numbers_match, parse_number

_NUMBER = re.compile(r"[-−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")
_MAX_SHOWN_CITES = 32
"""Cite keys listed in details (a response citing thousands of ids is summarised)."""


@dataclass(frozen=True)
class CitationQuality:
    """Counts behind precision, recall and support for one answer (or one json field)."""

    num_cited: int
    """Distinct cite keys in the response."""
    num_supporting: int
    """Of those, how many name a section that contains a needed fact."""
    num_facts: int
    """Facts the answer needs."""
    num_covered: int
    """Facts covered by at least one cited section."""

    @property
    def precision(self) -> float:
        if self.num_cited == 0:
            return 1.0 if self.num_facts == 0 else 0.0
        return self.num_supporting / self.num_cited

    @property
    def recall(self) -> float:
        return 1.0 if self.num_facts == 0 else self.num_covered / self.num_facts

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 0.0 if p + r == 0 else 2 * p * r / (p + r)

    @property
    def supported(self) -> bool:
        return self.num_supporting == self.num_cited

    def __add__(self, other: CitationQuality) -> CitationQuality:
        return CitationQuality(self.num_cited + other.num_cited, self.num_supporting + other.num_supporting,
                               self.num_facts + other.num_facts, self.num_covered + other.num_covered)  # fmt: skip


def citation_quality(cited: frozenset[str], evidence: Sequence[EvidenceFact]) -> CitationQuality:
    """How well `cited` covers `evidence`: supporting cites and covered facts."""
    relevant = {key for fact in evidence for key in fact.sections}
    covered = sum(1 for fact in evidence if cited.intersection(fact.sections))
    return CitationQuality(len(cited), len(cited & relevant), len(evidence), covered)


def answer_matches(gold: CitationGold | FieldGold, answer: str | None) -> bool:
    """Whether `answer` is right under `gold`'s type (never for a missing answer)."""
    if answer is None:
        return False
    if gold.type == "numeric":
        return _numeric_match(gold, answer)
    if gold.type == "not_stated":
        return normalize(answer) == NOT_STATED
    if gold.type == "yes_no":
        return normalize(answer) == normalize(str(gold.answer))
    refs = [str(gold.answer), *gold.aliases]
    if gold.type == "exact":
        return answer.strip() in {ref.strip() for ref in refs}
    return normalize(answer) in {normalize(ref) for ref in refs}


def single_number(text: str) -> Fraction | None:
    """The one number in `text` (units and signs around it ignored), None when there are none or several."""
    body = unicodedata.normalize("NFKC", text).replace("−", "-")
    values = {parse_number(token.replace(",", "")) for token in _NUMBER.findall(body)}
    values.discard(None)
    return values.pop() if len(values) == 1 else None


def _numeric_match(gold: CitationGold | FieldGold, answer: str) -> bool:
    reference = parse_number(str(gold.answer))
    if reference is None:
        raise GoldError(f"numeric gold {gold.answer!r} is not a number")
    value = single_number(answer)
    return value is not None and numbers_match(value, reference, gold.rel_tol, gold.abs_tol)


@dataclass(frozen=True)
class CitationsVerifier:
    """Answer accuracy times citation quality (see the module docstring for the maths)."""

    config: CitationsConfig

    @guarded
    def score(self, task: Task, response: str) -> Score:
        gold = _gold_of(task)
        if gold.type == "json":
            return self._score_fields(gold, response)
        parsed = parse_response(response)
        answer = scalar_answer(parsed.answer_block)
        accuracy = 1.0 if answer_matches(gold, answer) else 0.0
        quality = citation_quality(parsed.citations, gold.evidence)
        reward = self._mix(accuracy, quality)
        details = _details(gold.type, accuracy, quality, parsed.citations)
        return self._finish(reward, details | {"answer": (answer or "")[:200]})

    def _score_fields(self, gold: CitationGold, response: str) -> Score:
        parsed = parse_response(response)
        obj = json_answer(parsed.answer_block) or {}
        rewards, hits, total = [], 0.0, CitationQuality(0, 0, 0, 0)
        per_field: dict[str, dict[str, float]] = {}
        all_cites: set[str] = set()
        for name, field in gold.fields.items():
            value, cites = field_value(obj.get(name))
            accuracy = 1.0 if answer_matches(field, value) else 0.0
            quality = citation_quality(cites, field.evidence)
            rewards.append(self._mix(accuracy, quality))
            hits += accuracy
            total += quality
            all_cites |= cites
            per_field[name] = {"accuracy": accuracy, "citation_f1": quality.f1}
        reward = sum(rewards) / len(rewards)
        details = _details("json", hits / len(rewards), total, frozenset(all_cites))
        return self._finish(reward, details | {"fields": per_field, "answer_keys": sorted(map(str, obj))[:50]})

    def _mix(self, accuracy: float, quality: CitationQuality) -> float:
        if self.config.unsupported_zero and not quality.supported:
            return 0.0
        weight = self.config.citation_weight
        return accuracy * ((1.0 - weight) + weight * quality.f1)

    def _finish(self, reward: float, details: dict[str, Any]) -> Score:
        passed = reward >= self.config.pass_threshold
        error = ErrorKind.NONE if passed else ErrorKind.MODEL
        message = "" if passed else "answer or citations fall short of the reference"
        return Score(reward=reward, passed=passed, details=details, error=error, message=message)


def _gold_of(task: Task) -> CitationGold:
    try:
        return CitationGold.model_validate(task.gold)
    except ValidationError as exc:
        raise GoldError(f"not a citations gold record: {exc.errors()[0]['msg']}") from None


def field_value(raw: object) -> tuple[str | None, frozenset[str]]:
    """A json field's value as text and its cite keys: `{"value": v, "cite": "§2"}` or a bare value."""
    cites: frozenset[str] = frozenset()
    if isinstance(raw, dict):
        cite = raw.get("cite", raw.get("cites"))
        items = cite if isinstance(cite, list) else [cite]
        cites = frozenset().union(*(cite_keys(item) for item in items if isinstance(item, str)))
        raw = raw.get("value")
    if raw is None or isinstance(raw, dict | list):
        return None, cites
    if isinstance(raw, bool):
        return ("yes" if raw else "no"), cites
    return str(raw), cites


def _details(answer_type: str, accuracy: float, quality: CitationQuality, cites: frozenset[str]) -> dict[str, Any]:
    return {
        "answer_type": answer_type,
        "accuracy": accuracy,
        "citation_precision": quality.precision,
        "citation_recall": quality.recall,
        "citation_f1": quality.f1,
        "citation_support": 1.0 if quality.supported else 0.0,
        "num_cited": quality.num_cited,
        "cites": sorted(cites)[:_MAX_SHOWN_CITES],
    }
