"""Verifiers: grade a response to a task as a `Score`.

Public API: the `Verifier` protocol, the `VerifierConfig` union and its members, `build_verifier(config)`
(one explicit mapping from config type to implementation, plugins via `package.module:attr`),
`extract_answer(response, mode)`, and `Grader` — the one grading entry point, which looks up each
task's verifier and scores through an executor (`InlineExecutor`, or the `WorkerPool` of processes).

Gold data conventions (what a family puts in a Task):
- exact / normalized / numeric / math: `task.gold` is the reference answer string or number (or a list
  of acceptable ones); `task.answer` is a full gold response that scores 1.0, e.g.
  `"The answer is \\boxed{42}"` or just `"42"`.
- reasoning_gym: `task.gold` is the reasoning-gym entry (question, answer, metadata) made JSON-safe;
  `task.answer` is `<answer>` + the entry's answer + `</answer>`.
- citations: `task.gold` is a `CitationGold` as JSON (answer type, answer, evidence sections per fact);
  `task.answer` is `Answer: ...` then `Citations: §...` (docs/knowledge.md).

Failure attribution: a wrong, empty or unparsable answer is `Score.wrong` (a model failure); missing gold,
a verifier bug, a crashed or hung worker is `Score.infra` (never trained on).
"""

from posttrain.verify.base import Verifier, score_safely
from posttrain.verify.build import build_verifier
from posttrain.verify.configs import (
    ExactConfig,
    ExtractMode,
    MathConfig,
    NormalizedConfig,
    NumericConfig,
    PluginVerifierConfig,
    ReasoningGymConfig,
    VerifierConfig,
)
from posttrain.verify.executor import ExecutorConfig, InlineExecutor, VerifyItem, WorkerPool
from posttrain.verify.extract import extract_answer
from posttrain.verify.grader import Grader, GradingBackend, VerifierLookup

__all__ = [
    "ExactConfig",
    "ExecutorConfig",
    "ExtractMode",
    "MathConfig",
    "NormalizedConfig",
    "Grader",
    "GradingBackend",
    "InlineExecutor",
    "NumericConfig",
    "PluginVerifierConfig",
    "ReasoningGymConfig",
    "Verifier",
    "VerifierConfig",
    "VerifierLookup",
    "VerifyItem",
    "WorkerPool",
    "build_verifier",
    "extract_answer",
    "score_safely",
]
