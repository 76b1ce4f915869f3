"""posttrain.rollout: generation backends for RL rollouts (native paged engine, HF baseline, vLLM).

Importing this package is cheap: torch-backed engines load on first attribute access or in
`build_engine`. `SamplingParams`, `GenerationRequest` and the output records come from
`posttrain.rollout.api`, whose docstring fixes the logprob semantics every engine follows; the engine
configs (`EngineConfig`, a tagged union) from `posttrain.rollout.config`; `PromptRenderer` (chat
template, system prompt, stop ids) from `posttrain.rollout.prompting`.
"""

from __future__ import annotations

import importlib
from typing import Any

from posttrain.errors import ConfigError
from posttrain.plugins import Builders
from posttrain.rollout.api import (
    Conversation,
    GenerationRequest,
    RequestOutput,
    RolloutEngine,
    SampleOutput,
    SamplingParams,
)
from posttrain.rollout.config import (
    AttentionConfig,
    EngineConfig,
    HFEngineConfig,
    NativeEngineConfig,
    SamplingConfig,
    VLLMEngineConfig,
)
from posttrain.rollout.prompting import PromptRenderer

_LAZY = {
    "NativeEngine": "posttrain.rollout.engine.engine",
    "HFEngine": "posttrain.rollout.hf_engine",
    "VLLMEngine": "posttrain.rollout.vllm_engine",
}

__all__ = ["AttentionConfig", "EngineConfig", "GenerationRequest", "HFEngineConfig", "NativeEngineConfig",
           "PromptRenderer", "RequestOutput", "RolloutEngine", "SampleOutput", "SamplingConfig",
           "SamplingParams", "Conversation", "VLLMEngineConfig", "build_engine", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'posttrain.rollout' has no attribute {name!r}")


def _vllm(config: VLLMEngineConfig, model: Any, model_path: str | None) -> RolloutEngine:
    if model_path is None:
        raise ConfigError("the vllm engine loads the model from a directory; set model.path")
    engine: RolloutEngine = __getattr__("VLLMEngine")(model_path, config)
    return engine


BUILDERS: Builders[RolloutEngine] = Builders("rollout engine", {
    NativeEngineConfig: lambda config, model, _: __getattr__("NativeEngine")(model, config),
    HFEngineConfig: lambda config, model, _: __getattr__("HFEngine")(model, config),
    VLLMEngineConfig: _vllm,
})


def build_engine(config: EngineConfig, model: Any, model_path: str | None = None) -> RolloutEngine:
    """The engine `config` names, over `model` (shared, not copied; vLLM loads `model_path` instead)."""
    return BUILDERS.build(config, model, model_path)
