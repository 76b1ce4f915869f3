"""Filler prose of the annual reports: strategy, markets, risks, sustainability, people, accounting policy.

No template or slot word holds a digit, a person's name, a segment, region or auditor name, or a topic an
unanswerable question asks about with a figure (dividends, buy-backs, research spending, emissions,
patents); `tests/tasks/test_knowledge_corpora.py` checks the digits.
"""

from __future__ import annotations

from posttrain.tasks.families.knowledge.prose import Topic, Vocabulary

_SLOTS: dict[str, tuple[str, ...]] = {
    "adverb": ("steadily", "deliberately", "consistently", "carefully", "progressively", "selectively"),
    "horizon": ("over the coming years", "in the medium term", "during the next planning cycle",
                "over the long term", "as conditions allow", "in the periods ahead"),
    "driver": ("customer demand", "pricing discipline", "operational efficiency", "product mix",
               "service quality", "contract renewals", "procurement savings", "digital adoption"),
    "market": ("industrial customers", "public-sector buyers", "mid-sized enterprises", "consumer channels",
               "logistics partners", "regional distributors", "utility operators"),
    "pressure": ("wage inflation", "higher freight costs", "currency volatility", "tighter credit conditions",
                 "component shortages", "energy price swings", "longer sales cycles"),
    "action": ("simplified the product portfolio", "renegotiated supplier agreements",
               "consolidated overlapping facilities", "invested in automation",
               "strengthened pricing governance", "expanded shared service centres",
               "retired legacy systems"),
    "stakeholder": ("customers", "employees", "suppliers", "shareholders", "local communities",
                    "regulators", "lenders"),
    "quality": ("resilient", "disciplined", "balanced", "focused", "measured", "robust"),
    "risk": ("cyber intrusion", "supplier concentration", "regulatory change", "loss of key staff",
             "extreme weather", "litigation", "technology obsolescence", "reputational damage"),
    "control": ("periodic stress testing", "dual sourcing", "independent assurance reviews",
                "succession planning", "business continuity exercises", "contractual safeguards"),
    "standard": ("the applicable financial reporting standards", "the group accounting manual",
                 "the policies approved by the audit committee", "generally accepted practice"),
    "item": ("inventories", "receivables", "leases", "provisions", "intangible assets", "goodwill",
             "deferred taxes", "pension obligations"),
    "initiative": ("a mentoring programme", "flexible working arrangements", "a leadership academy",
                   "an apprenticeship scheme", "a wellbeing platform", "an internal mobility scheme"),
}

_TOPICS = (
    Topic(("Strategy and priorities", "Strategic direction", "Our strategy in practice"), (
        "{subject} continued to pursue a {quality} strategy built around {driver}.",
        "management {adverb} reallocated capital towards activities with the strongest returns.",
        "the board reviewed the strategic plan and confirmed its priorities {horizon}.",
        "we {action}, which supports a leaner cost base {horizon}.",
        "growth is expected to come mainly from {market} and from improved {driver}.",
        "the portfolio is managed {adverb}, with exits considered where returns fall short.",
        "partnerships with {market} remained central to how {subject} goes to market.",
        "every business unit now reports progress against a common set of strategic indicators.",
    )),
    Topic(("Market environment", "Operating environment", "Trading conditions"), (
        "conditions across our markets were mixed, with {pressure} weighing on margins.",
        "demand from {market} held up better than expected despite {pressure}.",
        "competitors responded to {pressure} in different ways, and pricing remained rational.",
        "we monitored {pressure} closely and adjusted purchasing plans {adverb}.",
        "the macroeconomic backdrop remained uncertain, but order books stayed {quality}.",
        "customers increasingly value {driver}, which favours suppliers with scale.",
        "{subject} expects the environment to remain demanding {horizon}.",
    )),
    Topic(("Principal risks", "Risk management", "Risk factors"), (
        "the principal risks include {risk}, which could disrupt operations or erode trust.",
        "{risk} is mitigated through {control} and clear ownership at executive level.",
        "the audit committee reviewed the risk register and the effectiveness of {control}.",
        "emerging risks such as {risk} are assessed for likelihood and impact each quarter.",
        "no single risk is expected to threaten the viability of {subject} {horizon}.",
        "risk appetite is set by the board and cascaded {adverb} to each business unit.",
        "our exposure to {pressure} is partly hedged, although residual risk remains.",
        "a failure of {control} would increase our exposure to {risk}.",
    )),
    Topic(("Sustainability", "Environmental stewardship", "Responsible business"), (
        "{subject} is committed to reducing the environmental footprint of its operations.",
        "sites continued to replace older equipment with more efficient alternatives.",
        "we engage {stakeholder} on sustainability topics through regular forums.",
        "waste reduction programmes were extended to further sites during the year.",
        "sustainability criteria now form part of how capital projects are approved.",
        "we expect reporting requirements on climate matters to tighten {horizon}.",
        "suppliers are asked to confirm their adherence to our responsible sourcing principles.",
    )),
    Topic(("Our people", "Workforce and culture", "Talent and engagement"), (
        "attracting and retaining skilled people remains a priority for {subject}.",
        "the year saw the launch of {initiative} for colleagues across the organisation.",
        "engagement surveys pointed to pride in the work and a wish for clearer career paths.",
        "managers received training on inclusive leadership and constructive feedback.",
        "health and safety performance is reviewed by the executive team every month.",
        "we continued to invest in {initiative}, which colleagues rated highly.",
        "our culture rests on integrity, accountability and care for {stakeholder}.",
    )),
    Topic(("Accounting policies", "Basis of preparation", "Critical accounting judgements"), (
        "the financial statements are prepared in accordance with {standard}.",
        "{item} are measured at the lower of cost and net realisable value where appropriate.",
        "judgement is required in estimating the recoverable amount of {item}.",
        "the valuation of {item} relies on assumptions that are reviewed at each reporting date.",
        "changes in estimates are recognised prospectively in the period of the change.",
        "management considered whether events after the reporting date required adjustment.",
        "foreign currency transactions are translated at the rates on the transaction dates.",
        "the directors consider the going concern basis of preparation to be appropriate.",
    )),
    Topic(("Stakeholder engagement", "Engaging with stakeholders", "Section on stakeholder interests"), (
        "the board considers the interests of {stakeholder} in its principal decisions.",
        "we held listening sessions with {stakeholder} to understand their priorities.",
        "feedback from {stakeholder} shaped several of the decisions taken during the year.",
        "directors visited operating sites to meet {stakeholder} directly.",
        "clear and timely communication with {stakeholder} remains a priority.",
    )),
    Topic(("Outlook", "Looking ahead", "Priorities for the year ahead"), (
        "{subject} enters the new financial year with a {quality} balance sheet.",
        "we will continue to focus on {driver} and on disciplined cost control.",
        "investment will be directed {adverb} towards automation and digital services.",
        "the board remains confident in the long-term prospects of {subject}.",
        "we expect {pressure} to persist and have planned accordingly.",
        "management will report on progress against these priorities {horizon}.",
    )),
    Topic(("Technology and operations", "Operational excellence", "Digital transformation"), (
        "we {action} to improve reliability and reduce complexity.",
        "a common data platform now supports planning across the businesses.",
        "operational reviews focus on safety, quality, delivery and cost, in that order.",
        "automation projects were prioritised where they improve both safety and {driver}.",
        "the migration of finance processes to shared centres progressed {adverb}.",
        "cyber security controls were tested by independent specialists during the year.",
    )),
)

_TAILS = (
    "in line with our {quality} approach", "as reported to the board during the year", "across all of our businesses",
    "with the support of our {stakeholder}", "building on the progress of earlier periods",
    "subject to market conditions", "while keeping a close eye on {pressure}", "in close dialogue with {stakeholder}",
    "as part of a {quality} plan agreed by the board", "with clear accountability at executive level",
)

VOCABULARY = Vocabulary(topics=_TOPICS, slots=_SLOTS, tails=_TAILS)
