"""The procedural corpora by name: each a `Corpus` of a drafting module and its question makers.

Not here: the documents or questions themselves (one module pair per corpus).
"""

from __future__ import annotations

from posttrain.tasks.families.knowledge import (
    annual_report,
    annual_report_questions,
    policy_manual,
    policy_manual_questions,
    tech_spec,
    tech_spec_questions,
)
from posttrain.tasks.families.knowledge.corpus import Corpus

CORPORA: dict[str, Corpus] = {
    "annual_report": Corpus(
        name="annual_report", draft=annual_report.draft, draft_pair=annual_report.draft_pair,
        questions=annual_report_questions.QUESTIONS,
        description="company annual reports: segment tables, workforce, governance, restatement notes"),
    "policy_manual": Corpus(
        name="policy_manual", draft=policy_manual.draft, draft_pair=policy_manual.draft_pair,
        questions=policy_manual_questions.QUESTIONS,
        description="travel and expense manuals: rules with figures, exceptions for senior grades, cross-references"),
    "tech_spec": Corpus(
        name="tech_spec", draft=tech_spec.draft, draft_pair=tech_spec.draft_pair,
        questions=tech_spec_questions.QUESTIONS,
        description="sensor controller datasheets: characteristics with units, registers, errata per revision"),
}
