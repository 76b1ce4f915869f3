"""The gold record of a cited-answer task (verifier kind `citations`): answer, answer type, evidence.

`Task.gold` holds `CitationGold.model_dump(mode="json")`. The record says how the answer is graded
(`type`), what it is (`answer` and `aliases`, a tolerance for numbers), and which facts a correct answer
rests on, each with the set of section ids (cite keys such as `§3.2`, `A§2.1`, `§json.dumps`) whose own
text contains that fact. Structured extraction (`type: json`) has no top-level answer: each field carries
its own type, answer and evidence. An unanswerable question (`type: not_stated`) has no evidence.

Guarantees: a record that validates is self-consistent (every fact names at least one section; json has
fields and nothing else answers; not_stated has no evidence). Not here: parsing responses
(`citation_parse.py`) or grading (`citations.py`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from posttrain.types import Frozen

AnswerType = Literal["exact", "normalized", "numeric", "yes_no", "not_stated", "json"]
"""How an answer is compared: exact string, normalised string, number within a tolerance, a one-word
yes/no, the literal `not stated` (unanswerable), or a JSON object graded field by field."""

FieldType = Literal["exact", "normalized", "numeric", "yes_no"]
"""The answer types a structured-extraction field may have."""

NOT_STATED = "not stated"
"""The answer to a question the documents do not answer."""


class EvidenceFact(Frozen):
    """One fact an answer needs, and where the documents state it."""

    fact: str
    """The fact in words (for people reading details; never compared with responses)."""
    sections: tuple[str, ...] = Field(min_length=1)
    """Cite keys of every section whose own text contains the fact (citing any one covers it)."""


class _Scalar(Frozen):
    """A single answer: its type, the reference, accepted variants and a numeric tolerance."""

    answer: str | int | float | None = None
    """The reference answer (None only for json and not_stated)."""
    aliases: tuple[str, ...] = ()
    """Other accepted spellings (string types only)."""
    rel_tol: float = Field(0.0, ge=0.0)
    """Relative tolerance of a numeric answer."""
    abs_tol: float = Field(1e-9, ge=0.0)
    """Absolute tolerance of a numeric answer."""
    evidence: tuple[EvidenceFact, ...] = ()
    """The facts the answer needs."""


class FieldGold(_Scalar):
    """One field of a structured extraction."""

    type: FieldType
    """How this field's value is compared."""

    @model_validator(mode="after")
    def _has_answer_and_evidence(self) -> FieldGold:
        if self.answer is None or not self.evidence:
            raise ValueError("a json field needs an answer and evidence")
        return self


class CitationGold(_Scalar):
    """The whole gold record of one task."""

    type: AnswerType
    """How the answer is compared."""
    fields: dict[str, FieldGold] = Field(default_factory=dict)
    """Structured extraction only: the expected fields, by name."""

    @model_validator(mode="after")
    def _consistent(self) -> CitationGold:
        if self.type == "json":
            if not self.fields or self.answer is not None or self.evidence:
                raise ValueError("json gold has fields, and no top-level answer or evidence")
        elif self.fields:
            raise ValueError(f"{self.type} gold has no fields")
        elif self.type == "not_stated":
            if self.evidence:
                raise ValueError("not_stated gold has no evidence")
        elif self.answer is None or not self.evidence:
            raise ValueError(f"{self.type} gold needs an answer and evidence")
        return self
