"""The second verifier of `citations`: the answer and its citations re-checked against the document text.

The `citations` verifier trusts the gold record's evidence list (which sections state each fact). This
check reads the sections themselves out of the prompt (`section_texts`: each heading `## §3.2 Title`
and the lines up to the next heading or the question) and applies a stricter rule:

- the answer must match under the gold's type (the same comparison as the primary verifier);
- every needed fact must be covered by a cited section, and every cited section must be an evidence
  section (nothing else cited; an unanswerable question cites nothing);
- a cited section must literally contain the answer value (a number equal within the gold tolerance,
  or the normalised answer text) whenever some evidence section of a fact it covers does. Derived
  answers (a sum, a comparison) appear in no section, so for them the evidence check alone applies.
Structured extraction (`json`) applies the rule field by field; reward = the share of fields right.

Not here: the primary grading (`posttrain.verify.citations`), which samples are re-graded.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

from pydantic import ValidationError

from posttrain.types import Score, Task
from posttrain.verify.citation_gold import CitationGold, FieldGold
from posttrain.verify.citation_parse import cite_keys, json_answer, parse_response, scalar_answer
from posttrain.verify.citations import answer_matches, field_value
from posttrain.verify.configs import VerifierConfig
from posttrain.verify.text import normalize, numbers_match, parse_number

_HEADING = re.compile(r"^#{2,}[ \t]+(\S*§\S+)")
_SECTION_END = re.compile(r"^(?:#[ \t]|---\s*$)")
_NUMBER = re.compile(r"[-−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")


def section_texts(prompt: str) -> dict[str, str]:
    """Cite key -> that section's own text (heading to the next heading, document title or `---`)."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in prompt.splitlines():
        heading = _HEADING.match(line)
        if heading:
            keys = cite_keys(heading.group(1))
            current = sections.setdefault(next(iter(keys)), []) if keys else None
        elif _SECTION_END.match(line):
            current = None
        if current is not None:
            current.append(line)
    return {key: "\n".join(lines) for key, lines in sections.items()}


def contains_literal(text: str, gold: CitationGold | FieldGold) -> bool | None:
    """Whether `text` states the gold answer's value (None: the type has no literal value)."""
    if gold.answer is None or gold.type in ("yes_no", "not_stated", "json"):
        return None
    if gold.type == "numeric":
        reference = parse_number(str(gold.answer))
        if reference is None:
            return None
        body = unicodedata.normalize("NFKC", text).replace("−", "-")
        values = (parse_number(token.replace(",", "")) for token in _NUMBER.findall(body))
        return any(v is not None and numbers_match(v, reference, gold.rel_tol, gold.abs_tol) for v in values)
    haystack = normalize(text)
    return any(normalize(ref) in haystack for ref in [str(gold.answer), *gold.aliases] if normalize(ref))


def strictly_supported(gold: CitationGold | FieldGold, cited: frozenset[str], sections: dict[str, str]) -> bool:
    """The citation rule of the module docstring."""
    if not gold.evidence:
        return not cited
    evidence_keys = {key for fact in gold.evidence for key in fact.sections}
    if not cited <= evidence_keys or not all(cited & set(fact.sections) for fact in gold.evidence):
        return False
    for key in cited:
        for fact in gold.evidence:
            if key not in fact.sections:
                continue
            stated = [contains_literal(sections.get(k, ""), gold) for k in fact.sections]
            if any(stated) and not contains_literal(sections.get(key, ""), gold):
                return False
    return True


def strict_score(task: Task, response: str) -> Score | None:
    """The strict grade of one response (None when the task's gold is not a citations record)."""
    try:
        gold = CitationGold.model_validate(task.gold)
    except ValidationError:
        return None
    sections = section_texts(task.prompt_text())
    parsed = parse_response(response)
    if gold.type != "json":
        right = answer_matches(gold, scalar_answer(parsed.answer_block))
        ok = right and strictly_supported(gold, parsed.citations, sections)
        return Score(reward=float(ok), passed=ok)
    answer = json_answer(parsed.answer_block) or {}
    oks = []
    for name, field in gold.fields.items():
        value, cites = field_value(answer.get(name))
        oks.append(answer_matches(field, value) and strictly_supported(field, cites, sections))
    return Score(reward=sum(oks) / len(oks), passed=all(oks))


def regrade_citations(items: Sequence[tuple[Task, str]], config: VerifierConfig, seed: int) -> list[Score | None]:
    """`strict_score` of each item (the primary's config and the seed do not change it)."""
    out: list[Score | None] = []
    for task, response in items:
        try:
            out.append(strict_score(task, response))
        except Exception:  # noqa: BLE001 - a gold this check cannot read gives no second opinion
            out.append(None)
    return out
