"""Filler prose of the policy manuals: conduct, data protection, security, safety, records, sustainable
travel, procurement ethics, training.

No template holds a digit, a grade, a city tier, a currency, or a topic the rules or the unanswerable
questions are about (flight classes, hotels, meal allowances, approvals, claim deadlines, mileage,
home internet, parental leave, gym membership, relocation, mobile phones, tuition).
"""

from __future__ import annotations

from posttrain.tasks.families.knowledge.prose import Topic, Vocabulary

_SLOTS: dict[str, tuple[str, ...]] = {
    "must": ("must", "are expected to", "are required to", "shall"),
    "people": ("employees", "contractors and employees", "all staff", "colleagues", "team members"),
    "manager": ("their line manager", "the policy owner", "the compliance team", "their department head",
                "the people team"),
    "record": ("personal data", "customer records", "confidential documents", "financial records",
               "supplier contracts", "access credentials"),
    "channel": ("the ethics hotline", "the compliance mailbox", "their line manager", "the internal portal"),
    "timing": ("without undue delay", "as soon as practicable", "promptly", "at the earliest opportunity"),
    "value": ("integrity", "fairness", "transparency", "respect", "accountability"),
    "asset": ("laptops", "badges", "company documents", "shared drives", "collaboration tools"),
    "breach": ("a suspected data breach", "a lost device", "an unusual access request", "a phishing message",
               "an unattended visitor"),
    "reason": ("to protect colleagues", "to meet legal obligations", "to preserve trust",
               "to keep operations running", "to treat everyone fairly"),
}

_TOPICS = (
    Topic(("Code of conduct", "Standards of behaviour", "Professional conduct"), (
        "{people} {must} act with {value} in every dealing on behalf of {subject}.",
        "behaviour that undermines {value} is not tolerated, whatever the business pressure.",
        "concerns about conduct can be raised through {channel}, and reports are treated confidentially.",
        "no one will suffer retaliation for raising a concern in good faith.",
        "managers {must} set an example and address poor conduct {timing}.",
        "these standards apply {reason} and to uphold the reputation of {subject}.",
    )),
    Topic(("Data protection", "Handling personal data", "Privacy"), (
        "{people} {must} handle {record} only for the purpose for which they were collected.",
        "access to {record} is granted on a need-to-know basis and reviewed regularly.",
        "{breach} {must} be reported to {channel} {timing}.",
        "{record} may not be copied to personal devices or private accounts.",
        "retention periods for {record} are set out in the records schedule.",
        "privacy notices explain to individuals how {subject} uses their information.",
    )),
    Topic(("Information security", "Protecting company assets", "Acceptable use"), (
        "{asset} remain the property of {subject} and {must} be used responsibly.",
        "passwords {must} never be shared, written down or reused across services.",
        "{people} {must} lock their screens whenever they leave their workstation.",
        "report {breach} to {channel} {timing}.",
        "software may only be installed from the approved catalogue.",
        "security awareness training is part of every induction {reason}.",
    )),
    Topic(("Health and safety", "Safe working", "Wellbeing at work"), (
        "{people} {must} follow site safety instructions and report hazards {timing}.",
        "accidents and near misses are recorded so that lessons can be learned.",
        "{manager} reviews workstation assessments for anyone who asks for one.",
        "no task is so urgent that it cannot be done safely.",
        "support for mental wellbeing is available confidentially through the people team.",
        "visitors {must} be accompanied and briefed on emergency procedures.",
    )),
    Topic(("Records management", "Document retention", "Keeping records"), (
        "business records {must} be stored in approved systems, not in personal folders.",
        "records that may be needed for an investigation {must} not be destroyed.",
        "{manager} confirms when a set of records can be archived.",
        "documents are classified as public, internal or confidential according to their content.",
        "scanned copies are accepted where the original has been lost, provided this is noted.",
    )),
    Topic(("Sustainable travel", "Travel and the environment", "Choosing how to travel"), (
        "{people} are encouraged to consider whether a meeting could be held remotely.",
        "rail is preferred to road where journey times are comparable.",
        "combining several meetings into one trip reduces both cost and environmental impact.",
        "{subject} tracks the environmental impact of business travel and reports on it internally.",
        "car sharing is encouraged for journeys to the same site.",
    )),
    Topic(("Procurement ethics", "Gifts and hospitality", "Conflicts of interest"), (
        "{people} {must} declare any interest that could influence a purchasing decision.",
        "gifts that could be seen as influencing a decision {must} be politely declined.",
        "hospitality may be accepted only where it is modest, occasional and business related.",
        "declarations are recorded in the register kept by {manager}.",
        "suppliers are selected on merit, price and quality, and the reasons are documented.",
        "a conflict of interest is not wrongdoing in itself, but hiding one is.",
    )),
    Topic(("Training and awareness", "Learning requirements", "Keeping knowledge current"), (
        "{people} {must} complete the mandatory training modules assigned to their role.",
        "{manager} monitors completion and follows up on overdue modules.",
        "refresher courses are offered whenever this manual changes materially.",
        "questions about this manual can be sent to {channel}.",
        "training records are kept {reason}.",
    )),
)

_TAILS = (
    "in line with the principles of this manual", "{reason}", "with the support of {manager}",
    "whatever their role or location", "as explained during induction", "and questions can go to {channel}",
    "both in the office and when working remotely", "so that {value} is never in doubt",
)

VOCABULARY = Vocabulary(topics=_TOPICS, slots=_SLOTS, tails=_TAILS)
