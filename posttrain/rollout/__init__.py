"""posttrain.rollout: generation backends for RL rollouts (native paged engine, HF baseline, vLLM).

Importing this package is cheap: torch-backed engines load on first attribute access.
`SamplingParams`, `GenerationRequest` and the output records come from `posttrain.rollout.api`, whose
docstring fixes the logprob semantics every engine follows.
"""

from __future__ import annotations

import importlib
from typing import Any

from posttrain.rollout.api import (
    GenerationRequest,
    RequestOutput,
    RolloutEngine,
    SampleOutput,
    SamplingParams,
    Session,
)

_LAZY = {
    "NativeEngine": "posttrain.rollout.engine.engine",
    "NativeEngineConfig": "posttrain.rollout.engine.engine",
    "AttentionConfig": "posttrain.rollout.engine.attention",
    "HFEngine": "posttrain.rollout.hf_engine",
    "VLLMEngine": "posttrain.rollout.vllm_engine",
}

__all__ = ["GenerationRequest", "RequestOutput", "RolloutEngine", "SampleOutput", "SamplingParams",
           "Session", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'posttrain.rollout' has no attribute {name!r}")
