"""Rollout configs (no torch at import): how to sample, and which engine runs with which options.

`SamplingConfig` declares the sampling fields once; `SamplingParams` (one request's parameters, in
`posttrain.rollout.api`) and the trainer's rollout section extend it. `EngineConfig` is the tagged union
of the engines (`native` with all its KV, chunking and sparse-attention options; `hf`; `vllm`), and
`posttrain.rollout.build_engine` maps each to its implementation. Not here: the engines themselves.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from posttrain.config import StrictModel


class SamplingConfig(StrictModel):
    """How each completion is sampled."""

    max_new_tokens: int = Field(32, ge=1)
    """Upper bound on generated tokens per sample (stop token included)."""
    temperature: float = Field(1.0, ge=0.0)
    """Softmax temperature; 0 means greedy (argmax)."""
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    """Nucleus sampling mass; 1.0 disables it."""
    top_k: int = Field(0, ge=0)
    """Keep only the k most likely tokens; 0 disables it."""


class AttentionConfig(StrictModel):
    """Exact attention or one of the sparse approximations (see `posttrain.rollout.engine.attention`)."""

    kind: Literal["exact", "window", "quest"] = "exact"
    """exact | window (sinks + sliding window) | quest (top-k KV blocks per decode query)."""
    sink_tokens: int = Field(4, ge=0)
    """window: leading positions always attended."""
    window_tokens: int = Field(1024, ge=1)
    """window: most recent positions attended (the query's own position included)."""
    top_k_blocks: int = Field(32, ge=1)
    """quest: KV blocks attended per decode query."""


class NativeEngineConfig(StrictModel):
    """Capacity and behaviour of the native engine."""

    kind: Literal["native"] = "native"
    """Paged KV with prefix reuse, tiers and chunked prefill, in pure PyTorch."""
    block_size: int = Field(16, ge=1)
    """Tokens per KV block."""
    kv_cache_tokens: int = Field(65536, ge=1)
    """Device KV budget in tokens (rounded down to whole blocks)."""
    max_num_seqs: int = Field(256, ge=1)
    """Most sequences decoded together."""
    max_prefill_tokens: int | None = Field(2048, ge=1)
    """Prompt tokens computed per step (chunked prefill); None prefills whole prompts at once."""
    prefix_caching: bool = True
    """Reuse KV of shared prefixes through the radix cache."""
    host_kv_tokens: int = Field(0, ge=0)
    """Host-memory tier for evicted KV, in tokens; 0 disables offload to host."""
    disk_kv_dir: str | None = None
    """Directory for the disk tier (memory-mapped files); None disables it."""
    attention: AttentionConfig = AttentionConfig()
    """Exact attention (default) or an opt-in sparse mode."""
    shared_prefix_min_blocks: int = Field(4, ge=1)
    """Decode sequences sharing at least this many leading blocks attend them once (cascade attention)."""
    trace_logits: bool = False
    """Keep every step's raw logits in `SampleOutput.logits` (tests and divergence measurements)."""


class HFEngineConfig(StrictModel):
    """The `transformers` baseline and fallback."""

    kind: Literal["hf"] = "hf"
    """Plain `model.generate` per request (or one prefill per prompt, see below)."""
    prefill_once: bool = False
    """Prefill each prompt once and decode its group as one batch, instead of n full generations."""


class VLLMEngineConfig(StrictModel):
    """vLLM's offline engine (GPU, optional extra `posttrain[vllm]`); needs the model as a directory."""

    kind: Literal["vllm"] = "vllm"
    """vLLM `LLM` with prefix caching."""
    llm_kwargs: dict[str, Any] = Field(default_factory=dict)
    """Extra keyword arguments for `vllm.LLM` (e.g. gpu_memory_utilization, tensor_parallel_size)."""


EngineConfig = Annotated[NativeEngineConfig | HFEngineConfig | VLLMEngineConfig, Field(discriminator="kind")]
"""Which rollout engine, with its options."""
