"""`NativeEngine`: paged KV, radix prefix cache, tiered KV and chunked prefill in pure PyTorch.

Wires the plain-Python core (block pool, radix cache, scheduler, sequences) to the model runner and
the sampler. `generate` runs the step loop until every request has finished; requests and their
samples finish independently. The prefix cache is keyed by weight version: `update_weights` bumps
the version and clears it, so no KV computed with older weights is ever reused. Weights arrive as a
state dict (`posttrain.rollout.weights.load_weights`): when the engine holds the very module the trainer
updates in place, nothing is copied.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from posttrain.rollout.api import (
    Conversation,
    FinishReason,
    GenerationRequest,
    RequestOutput,
    SampleOutput,
    SamplingParams,
)
from posttrain.rollout.config import NativeEngineConfig
from posttrain.rollout.engine.block_manager import BlockPool
from posttrain.rollout.engine.kv_store import TieredKVStore
from posttrain.rollout.engine.model import CausalLMWeights
from posttrain.rollout.engine.radix import RadixCache
from posttrain.rollout.engine.runner import ModelRunner
from posttrain.rollout.engine.sampler import make_generator, sample_tokens
from posttrain.rollout.engine.scheduler import Chunk, Scheduler
from posttrain.rollout.engine.seq_state import SeqState
from posttrain.rollout.hf_engine import as_module
from posttrain.rollout.weights import load_weights


class NativeEngine:
    """The native `RolloutEngine` (see module docstring)."""

    def __init__(self, model: Any, config: NativeEngineConfig | None = None) -> None:
        self.config = config or NativeEngineConfig()
        self.model = as_module(model)
        self.weights = CausalLMWeights(self.model)
        bs = self.config.block_size
        num_blocks = max(1, self.config.kv_cache_tokens // bs)
        self.pool = BlockPool(num_blocks, bs)
        self.runner = ModelRunner(self.weights, num_blocks, bs, self.config.attention,
                                  self.config.shared_prefix_min_blocks)
        tiered = self.config.host_kv_tokens > 0 or self.config.disk_kv_dir is not None
        self.store = TieredKVStore(self.config.host_kv_tokens, self.config.disk_kv_dir,
                                   pin_memory=self.weights.device.type == "cuda") if tiered else None
        self.radix = RadixCache(self.pool, self.runner, self.store)
        self.scheduler = Scheduler(self.pool, self.radix, self.config.max_num_seqs,
                                   self.config.max_prefill_tokens, self.config.prefix_caching,
                                   self.weights.rope_keys)
        self.version = 0
        self._next_seq_id = 0
        self._counters: dict[str, float] = {"steps": 0, "generated_tokens": 0, "requests": 0,
                                            "max_step_s": 0.0}

    # ---- RolloutEngine --------------------------------------------------------------------
    def generate(self, requests: Sequence[GenerationRequest]) -> list[RequestOutput]:
        start_s = time.perf_counter()
        seqs = self.submit(requests)
        while self.scheduler.has_work:
            self.step()
        return [self._output(i, r, seqs, start_s) for i, r in enumerate(requests)]

    def update_weights(self, state_dict: Mapping[str, Any], version: int | None = None) -> None:
        if self.scheduler.has_work:
            raise RuntimeError("update_weights while requests are in flight")
        load_weights(self.model, state_dict)  # the runner reads weights from the module at every call
        self.weights.mark_updated()  # (its packed CPU copies are refreshed before the next step)
        self.version = self.version + 1 if version is None else version
        self.radix.reset(self.version)

    def stats(self) -> dict[str, float]:
        out: dict[str, float] = dict(self._counters)
        out.update(self.scheduler.counters)
        out.update(self.radix.counters)
        out.update(self.runner.stages.counters)
        if self.store is not None:
            out.update(self.store.counters)
        out["peak_kv_blocks"] = self.pool.peak_used
        out["peak_kv_mb"] = self.pool.peak_used * self.pool.block_size * self.runner.bytes_per_token / 2**20
        out["kv_blocks_total"] = self.pool.num_blocks
        out["weight_version"] = self.version
        return out

    def open_conversation(self) -> Conversation:
        return Conversation(self)

    def teacher_forced_logits(self, prompt_ids: Sequence[int], continuation_ids: Sequence[int]) -> torch.Tensor:
        """Raw logits `[T, V]` predicting each continuation token, fed one decode step at a time."""
        return self.teacher_forced(prompt_ids, continuation_ids)[0]

    def teacher_forced(self, prompt_ids: Sequence[int],
                       continuation_ids: Sequence[int]) -> tuple[torch.Tensor, float, float]:
        """`teacher_forced_logits` plus (time to first logits, total time) in seconds."""
        start_s = time.perf_counter()
        params = SamplingParams(max_new_tokens=len(continuation_ids), temperature=0.0)
        seq = SeqState(self._next_seq_id, 0, 0, list(prompt_ids), len(prompt_ids), params, None,
                       forced_ids=list(continuation_ids))
        self._next_seq_id += 1
        self.scheduler.add(seq)
        while self.scheduler.has_work:
            self.step()
        first_s = (seq.first_token_s or start_s) - start_s
        return torch.stack(seq.logits_trace), first_s, time.perf_counter() - start_s

    # ---- the loop -------------------------------------------------------------------------
    def step(self) -> None:
        """Schedule, run the model and sample once."""
        t0 = time.perf_counter()
        chunks = self.scheduler.schedule()
        if not chunks:
            raise RuntimeError("no progress possible: KV budget too small for a single sequence")
        logits = self.runner.forward(chunks)  # [M, V]
        self._sample(chunks, logits)
        self.scheduler.complete(chunks)
        if not self.scheduler.has_work:
            self.runner.release_staged()
        self._counters["steps"] += 1
        self._counters["max_step_s"] = max(self._counters["max_step_s"], time.perf_counter() - t0)

    def _sample(self, chunks: list[Chunk], logits: torch.Tensor) -> None:
        seqs = [c.seq for c in chunks if c.needs_logits]  # row i of `logits` belongs to seqs[i]
        tokens, logprobs = sample_tokens(logits, [s.params for s in seqs], [s.generator for s in seqs])
        now = time.perf_counter()
        for row, seq in enumerate(seqs):
            token, logprob = tokens[row], logprobs[row]
            if seq.forced_ids is not None:
                token = seq.forced_ids[seq.num_generated]
                logprob = float(torch.log_softmax(logits[row], -1)[token].item())
            if self.config.trace_logits or seq.forced_ids is not None:
                seq.logits_trace.append(logits[row].clone())
            seq.append_token(token, logprob)
            if seq.first_token_s is None:
                seq.first_token_s = now
        self._counters["generated_tokens"] += len(seqs)

    def submit(self, requests: Sequence[GenerationRequest]) -> list[list[SeqState]]:
        """Queue requests without running them (drive with `step`); the sequences of each request."""
        return [self._add(i, r) for i, r in enumerate(requests)]

    @property
    def has_work(self) -> bool:
        return self.scheduler.has_work

    def _add(self, index: int, request: GenerationRequest) -> list[SeqState]:
        capacity = self.pool.num_blocks * self.pool.block_size
        if len(request.prompt_ids) + request.params.max_new_tokens > capacity:
            raise ValueError(f"prompt + max_new_tokens exceeds the KV budget of {capacity} tokens "
                             "(raise NativeEngineConfig.kv_cache_tokens)")
        seqs = []
        for j in range(request.params.n):
            seq = SeqState(self._next_seq_id, index, j, list(request.prompt_ids), len(request.prompt_ids),
                           request.params, make_generator(request.params, j, self.weights.device))
            self._next_seq_id += 1
            self.scheduler.add(seq)
            seqs.append(seq)
        self._counters["requests"] += 1
        return seqs

    def _output(self, index: int, request: GenerationRequest, seqs: list[list[SeqState]],
                start_s: float) -> RequestOutput:
        samples = []
        for seq in seqs[index]:
            trace = torch.stack(seq.logits_trace) if seq.logits_trace else None
            reason: FinishReason = "stop" if seq.finish_reason == "stop" else "length"
            samples.append(SampleOutput(seq.generated_ids, list(seq.logprobs), reason, trace))
        first = min((s.first_token_s or start_s) for s in seqs[index])
        return RequestOutput(request.request_id, list(request.prompt_ids), samples,
                             {"ttft_s": first - start_s})
