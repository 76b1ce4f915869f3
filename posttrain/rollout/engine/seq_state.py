"""One sample being generated: its tokens, KV bookkeeping and outputs (plain Python).

`token_ids` is the prompt followed by the generated tokens; `num_computed` counts the leading tokens
whose KV is in the sequence's blocks. Whatever is not yet computed is fed to the model next (a prompt
chunk, or the last sampled token), and when a step reaches the end of `token_ids` the logits at the
last position yield the next token. So chunked prefill, decode and recomputation after preemption are
all the same operation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from posttrain.rollout.api import SamplingParams


class SeqStatus(Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


@dataclass(eq=False)
class SeqState:
    seq_id: int
    request_index: int
    sample_index: int
    token_ids: list[int]
    prompt_len: int
    params: SamplingParams
    generator: Any = None
    status: SeqStatus = SeqStatus.WAITING
    block_table: list[int] = field(default_factory=list)
    num_computed: int = 0
    num_reused: int = 0
    """Leading tokens taken from the prefix cache at (the latest) admission."""
    lock_node: Any = None
    logprobs: list[float] = field(default_factory=list)
    logits_trace: list[Any] = field(default_factory=list)
    finish_reason: str | None = None
    prompt_cached: bool = False
    first_token_s: float | None = None
    forced_ids: list[int] | None = None
    """Teacher forcing: emit these tokens instead of sampling (their logprobs are still computed)."""

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def num_generated(self) -> int:
        return len(self.token_ids) - self.prompt_len

    @property
    def num_uncomputed(self) -> int:
        return len(self.token_ids) - self.num_computed

    @property
    def is_decoding(self) -> bool:
        return self.num_generated > 0 and self.num_uncomputed == 1

    @property
    def generated_ids(self) -> list[int]:
        return self.token_ids[self.prompt_len :]

    def append_token(self, token: int, logprob: float) -> None:
        self.token_ids.append(token)
        self.logprobs.append(logprob)
        if token in self.params.stop_token_ids:
            self.finish_reason = "stop"
        elif self.num_generated >= self.params.max_new_tokens:
            self.finish_reason = "length"

    @property
    def is_done(self) -> bool:
        return self.finish_reason is not None
