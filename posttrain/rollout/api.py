"""Rollout vocabulary: sampling parameters, requests, outputs and the `RolloutEngine` Protocol.

Pure data and typing only (no torch at import). Every engine (native, HF, vLLM) takes a list of
`GenerationRequest` and returns one `RequestOutput` per request, in order, each with `params.n`
samples. Logprob semantics are fixed here for all engines: `SampleOutput.logprobs[t]` is
`log_softmax(raw_logits)[token_t]` in float32, where `raw_logits` are the model's unprocessed output
logits at that step (before temperature, top-k, top-p). That is exactly what a teacher-forced training
forward at temperature 1 computes, so the values can be used as old-policy logprobs. With
`logprobs_mode="processed"` they are taken from the distribution actually sampled from instead
(after temperature and top-k/top-p filtering).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import Field

from posttrain.config import StrictModel
from posttrain.rollout.config import SamplingConfig

FinishReason = Literal["stop", "length"]


class SamplingParams(SamplingConfig):
    """How to sample the completions of one prompt: the sampling fields plus the request's own."""

    n: int = Field(1, ge=1)
    """Number of independent samples (a GRPO group) drawn for the prompt."""
    seed: int | None = None
    """Seed of the per-sample generators (sample j uses seed + j); None draws from torch's global RNG."""
    stop_token_ids: tuple[int, ...] = ()
    """Generation of a sample ends after it emits any of these (the stop token is kept in the output)."""
    logprobs_mode: Literal["raw", "processed"] = "raw"
    """raw: log-softmax of unprocessed logits; processed: of the distribution actually sampled from."""


class GenerationRequest(StrictModel):
    """One prompt (as token ids) and how to sample from it."""

    prompt_ids: tuple[int, ...] = Field(min_length=1)
    """The prompt, already tokenised (chat template applied)."""
    params: SamplingParams = SamplingParams()
    """Sampling parameters, including the group size n."""
    request_id: str | None = None
    """Optional caller id, echoed in the output."""


@dataclass
class SampleOutput:
    """One completion."""

    token_ids: list[int]
    """Generated tokens (the stop token, if any, is the last one)."""
    logprobs: list[float]
    """Per generated token, see the module docstring for which distribution."""
    finish_reason: FinishReason
    """stop: a stop token was emitted; length: max_new_tokens reached."""
    logits: Any = None
    """Raw logits per step `[T, V]` (torch tensor); only filled when the engine traces logits."""


@dataclass
class RequestOutput:
    """The n samples of one request."""

    request_id: str | None
    prompt_ids: list[int]
    samples: list[SampleOutput]
    metrics: dict[str, float] = field(default_factory=dict)
    """Per-request timings, e.g. ttft_s (time to first token of the first sample)."""


@runtime_checkable
class RolloutEngine(Protocol):
    """What the trainer needs from any generation backend."""

    def generate(self, requests: Sequence[GenerationRequest]) -> list[RequestOutput]:
        """Run all requests to completion; one output per request, in order."""
        ...

    def update_weights(self, state_dict: Mapping[str, Any], version: int | None = None) -> None:
        """Take new policy weights as a state dict (copied in place, nothing copied for tensors the
        engine already shares); every cached KV of older weights stops being reused."""
        ...

    def stats(self) -> dict[str, float]:
        """Cumulative counters: prompt_tokens, computed_tokens, cached_tokens, ..."""
        ...

    def open_conversation(self) -> Conversation:
        """A multi-turn conversation whose history is reused across turns where the engine can."""
        ...


class Conversation:
    """A growing token history; each `generate` sends the whole history and appends the reply.

    Engines with a prefix cache recompute only the new suffix; others recompute everything.
    """

    def __init__(self, engine: RolloutEngine) -> None:
        self.engine = engine
        self.token_ids: list[int] = []
        self.turn_metrics: list[dict[str, float]] = []

    def append(self, token_ids: Sequence[int]) -> None:
        """Add user/tool tokens to the history."""
        self.token_ids.extend(int(t) for t in token_ids)

    def request(self, params: SamplingParams) -> GenerationRequest:
        """The request for the next turn (lets callers batch several conversations in one generate)."""
        return GenerationRequest(prompt_ids=tuple(self.token_ids), params=params)

    def record(self, output: RequestOutput) -> SampleOutput:
        """Append sample 0 of `output` to the history and return it."""
        sample = output.samples[0]
        self.token_ids.extend(sample.token_ids)
        self.turn_metrics.append(dict(output.metrics))
        return sample

    def generate(self, params: SamplingParams) -> SampleOutput:
        """Generate the next turn from the whole history and append it (sample 0 when n > 1)."""
        return self.record(self.engine.generate([self.request(params)])[0])


def finish_reason_of(token_ids: Sequence[int], stop_token_ids: Sequence[int]) -> FinishReason:
    """stop when the last generated token is a stop token, else length."""
    return "stop" if token_ids and token_ids[-1] in stop_token_ids else "length"
