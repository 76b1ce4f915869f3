"""Shared vocabulary: Task, DomainSpec, Score, the taxonomy path, and the records of a training step.

Everything here is pure data (frozen pydantic models) with no behaviour beyond hashing, parsing and
derived views. Guarantees: a Task's `content_hash` depends only on its prompt and gold data, so
train/eval splits derived from it never leak; a `Score` always says whether a failure was the model's
or the infrastructure's; a `Trajectory` is the token sequence the policy was trained on, never a
re-tokenised rendering, and its loss mask is 1 only on tokens the policy sampled. Records are frozen:
stages return new ones, so a stage can move to another process. Not here: how tasks are generated
(`posttrain.tasks`), graded (`posttrain.verify`) or sampled (`posttrain.rollout`).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

LEVELS: tuple[str, ...] = ("easy", "medium", "hard")
"""Named difficulty levels every parametric family offers, easiest first."""

LEVEL_DIFFICULTY: dict[str, float] = {"easy": 0.2, "medium": 0.5, "hard": 0.8}
"""Numeric difficulty in [0, 1] for each named level."""

Level = Literal["easy", "medium", "hard"]


class Frozen(BaseModel):
    """Base for immutable, strict records."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class ChatMessage(Frozen):
    role: Literal["system", "user", "assistant", "tool"]
    """Who speaks."""
    content: str
    """What is said."""


Prompt = str | tuple[ChatMessage, ...]


class TaxonomyPath(Frozen):
    """`class/family/domain[@level]`, e.g. `math/arithmetic/add@hard`."""

    cls: str
    """Top-level class: math, reasoning, coding, text, agent, knowledge, 3d, ..."""
    family: str
    """The generator family within the class."""
    domain: str
    """The domain within the family."""
    level: str | None = None
    """Difficulty level name, if the domain is stratified."""

    @classmethod
    def parse(cls, text: str) -> TaxonomyPath:
        body, _, level = text.partition("@")
        parts = body.split("/")
        if len(parts) != 3 or not all(parts):
            raise ValueError(f"domain id {text!r} is not of the form class/family/domain[@level]")
        return cls(cls=parts[0], family=parts[1], domain=parts[2], level=level or None)

    def __str__(self) -> str:
        base = f"{self.cls}/{self.family}/{self.domain}"
        return f"{base}@{self.level}" if self.level else base


class DomainSpec(Frozen):
    """One domain: a family with fixed parameters at one difficulty, plus its verifier and targets."""

    id: str
    """Taxonomy path as text, unique across the registry."""
    family_kind: str
    """The `kind` tag of the family config that generates it."""
    source: str
    """Where tasks come from: builtin, reasoning_gym, jsonl, plugin, ..."""
    verifier: str
    """Name of the verifier that grades it (see `posttrain.verify`)."""
    difficulty: float = 0.5
    """Numeric difficulty in [0, 1]."""
    size: int | None = None
    """Number of distinct task indices, or None for an unbounded procedural stream."""
    context_size: int | None = Field(None, ge=1)
    """Consecutive task indices that share one context (indices i and j do iff i // context_size ==
    j // context_size; e.g. questions on one document): the pool draws them together, so the shared
    prompt prefix is computed once in rollout and update. None: tasks share nothing."""
    target_pass_rate: float = Field(0.7, ge=0.0, le=1.0)
    """Pass rate above which the curriculum treats the domain as learned."""
    min_weight: float = Field(0.0, ge=0.0, le=1.0)
    """Floor on the domain's sampling weight."""
    max_weight: float = Field(1.0, ge=0.0, le=1.0)
    """Ceiling on the domain's sampling weight."""
    description: str = ""
    """One line for people."""

    @property
    def path(self) -> TaxonomyPath:
        return TaxonomyPath.parse(self.id)

    @property
    def cls(self) -> str:
        return self.path.cls

    @property
    def level(self) -> str | None:
        return self.path.level


class Task(Frozen):
    """One prompt with what is needed to grade a response to it."""

    id: str
    """Stable id, unique within the registry: `<domain id>#<index>` or the dataset's own id."""
    domain_id: str
    """The DomainSpec this task belongs to."""
    prompt: Prompt
    """Plain text, or chat messages."""
    gold: Any = None
    """Reference data for the verifier (JSON-serialisable): an answer, tests, a scorer entry..."""
    answer: str | None = None
    """A gold response text that must score 1.0 (used by validation and the contract tests)."""
    difficulty: float = 0.5
    """Numeric difficulty in [0, 1]."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    """Anything else the family wants to keep (not part of the content hash)."""
    context_hash: str | None = None
    """Hash of a context the task shares with sibling tasks (the document several questions ask about):
    the train/eval split follows it, so no sibling of an evaluation task is ever trained on."""

    @field_validator("prompt", mode="before")
    @classmethod
    def _messages_as_tuple(cls, value: Any) -> Any:
        return tuple(value) if isinstance(value, list) else value

    @property
    def content_hash(self) -> str:
        """sha256 over prompt and gold only: identical content hashes identically wherever it came from."""
        prompt = self.prompt if isinstance(self.prompt, str) else [m.model_dump() for m in self.prompt]
        blob = json.dumps([prompt, self.gold], sort_keys=True, default=str, ensure_ascii=False)
        return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()

    def prompt_text(self) -> str:
        """The prompt as one string (the last user message for chat prompts)."""
        if isinstance(self.prompt, str):
            return self.prompt
        users = [m.content for m in self.prompt if m.role == "user"]
        return users[-1] if users else self.prompt[-1].content


class ErrorKind(StrEnum):
    """Who is to blame for a failed grade."""

    NONE = "none"
    """Graded normally (reward may still be 0)."""
    MODEL = "model"
    """The model's fault: wrong, unparsable, its program timed out or crashed."""
    INFRA = "infra"
    """Not the model's fault: sandbox crashed, worker died, verifier bug. Retried; never trained on."""


class Score(Frozen):
    """The grade of one response."""

    reward: float
    """Scalar reward, usually in [0, 1]."""
    passed: bool
    """Whether the response counts as correct."""
    details: dict[str, Any] = Field(default_factory=dict)
    """Per-verifier sub-scores and diagnostics."""
    error: ErrorKind = ErrorKind.NONE
    """Failure attribution."""
    message: str = ""
    """Human-readable reason for a failure."""

    @field_validator("reward")
    @classmethod
    def _finite(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError("reward must be finite")
        return value

    @property
    def is_infra_failure(self) -> bool:
        return self.error is ErrorKind.INFRA

    @classmethod
    def correct(cls, reward: float = 1.0, **details: Any) -> Score:
        return cls(reward=reward, passed=True, details=details)

    @classmethod
    def wrong(cls, reward: float = 0.0, message: str = "", **details: Any) -> Score:
        return cls(reward=reward, passed=False, details=details, error=ErrorKind.MODEL, message=message)

    @classmethod
    def infra(cls, message: str, **details: Any) -> Score:
        return cls(reward=0.0, passed=False, details=details, error=ErrorKind.INFRA, message=message)


class Trajectory(Frozen):
    """One rollout as the learner sees it: every token in order, which of them the policy sampled
    (`loss_mask` 1; prompt, user, tool and system tokens 0), their sampling logprobs and the weight
    version that produced them. A single-turn answer is one prompt segment and one policy segment."""

    task: Task
    """The task answered."""
    token_ids: tuple[int, ...]
    """Prompt and response tokens as the policy saw and produced them."""
    loss_mask: tuple[int, ...]
    """Per token: 1 where the policy generated it (trained on), 0 elsewhere."""
    logprobs: tuple[float, ...]
    """Per token: log-probability under the sampling policy where `loss_mask` is 1, 0.0 elsewhere."""
    response: str
    """The text graded: the policy's tokens decoded (the final answer for multi-turn episodes)."""
    policy_version: int = 0
    """Weight version that produced the policy tokens."""
    group_index: int = 0
    """Position within the task's group of G samples."""
    finish_reason: str | None = None
    """stop, length, ... of the last policy segment."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    """Per-turn or per-episode facts (turn boundaries, tool calls, ...)."""

    @model_validator(mode="after")
    def _aligned(self) -> Trajectory:
        if not len(self.token_ids) == len(self.loss_mask) == len(self.logprobs):
            raise ValueError("token_ids, loss_mask and logprobs must have one entry per token")
        if any(m not in (0, 1) for m in self.loss_mask):
            raise ValueError("loss_mask holds 0 or 1 per token")
        return self

    @classmethod
    def single_turn(cls, task: Task, prompt_ids: Sequence[int], response_ids: Sequence[int],
                    logprobs: Sequence[float], response: str, **fields: Any) -> Trajectory:
        """A prompt followed by one policy segment."""
        num_prompt, num_response = len(prompt_ids), len(response_ids)
        return cls(
            task=task,
            token_ids=(*prompt_ids, *response_ids),
            loss_mask=(0,) * num_prompt + (1,) * num_response,
            logprobs=(0.0,) * num_prompt + tuple(logprobs),
            response=response,
            **fields,
        )

    @property
    def prompt_length(self) -> int:
        """Tokens before the first policy token (the whole sequence if the policy produced none)."""
        return next((i for i, m in enumerate(self.loss_mask) if m), len(self.loss_mask))

    @property
    def num_policy_tokens(self) -> int:
        return sum(self.loss_mask)


def rewards_differ(rewards: Sequence[float], tolerance: float = 1e-6) -> bool:
    """At least two rewards further apart than `tolerance` (the one definition of an informative group:
    equal rewards give every sample a zero GRPO advantage)."""
    return len(rewards) > 1 and max(rewards) - min(rewards) > tolerance


class Group(Frozen):
    """One task's G trajectories and their scores (same order)."""

    task: Task
    """The task all trajectories answer."""
    trajectories: tuple[Trajectory, ...]
    """The samples."""
    scores: tuple[Score, ...] = ()
    """One per trajectory once graded; empty before."""

    @property
    def rewards(self) -> list[float]:
        return [s.reward for s in self.scores]

    def is_informative(self, tolerance: float = 1e-6) -> bool:
        """Rewards differ by more than `tolerance`: the group carries a GRPO learning signal."""
        return rewards_differ(self.rewards, tolerance)

    def graded(self, scores: Sequence[Score]) -> Group:
        """This group with `scores`, dropping trajectories whose grade is an infra failure."""
        if len(scores) != len(self.trajectories):
            raise ValueError(f"{len(scores)} scores for {len(self.trajectories)} trajectories")
        kept = [(t, s) for t, s in zip(self.trajectories, scores, strict=True) if not s.is_infra_failure]
        return Group(task=self.task, trajectories=tuple(t for t, _ in kept), scores=tuple(s for _, s in kept))
