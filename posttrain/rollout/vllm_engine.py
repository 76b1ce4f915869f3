"""`VLLMEngine`: the GPU-scale backend, an adapter over vLLM's offline `LLM` (optional extra).

Install with `pip install posttrain[vllm]` on a CUDA machine. vLLM is imported only when the engine is
built, so this module is safe to import anywhere. Logprobs are requested as raw logprobs
(`logprobs_mode="raw_logprobs"` where the installed vLLM supports it), matching
`posttrain.rollout.api`. `update_weights` loads a state dict into the running model
through `LLM.apply_model` and resets vLLM's prefix cache, so no stale KV is reused.
Not covered by CPU tests (skipped there); the API follows vLLM's documented offline interface.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from posttrain.rollout.api import (
    Conversation,
    GenerationRequest,
    RequestOutput,
    SampleOutput,
    SamplingParams,
    finish_reason_of,
)
from posttrain.rollout.config import VLLMEngineConfig


class VLLMEngine:
    """`RolloutEngine` over `vllm.LLM` (model given as a local HF directory)."""

    def __init__(self, model_path: str, config: VLLMEngineConfig | None = None) -> None:
        llm_kwargs = dict((config or VLLMEngineConfig()).llm_kwargs)
        try:
            import vllm
        except ImportError as exc:  # pragma: no cover - depends on the optional extra
            raise ImportError("VLLMEngine needs the optional extra: pip install 'posttrain[vllm]'") from exc
        self._vllm = vllm
        llm_kwargs.setdefault("enable_prefix_caching", True)
        try:
            self.llm = vllm.LLM(model=model_path, logprobs_mode="raw_logprobs", **llm_kwargs)
        except TypeError:
            self.llm = vllm.LLM(model=model_path, **llm_kwargs)
        self.version = 0
        self._stats: dict[str, float] = {"prompt_tokens": 0, "generated_tokens": 0, "requests": 0}

    def _params(self, p: SamplingParams) -> Any:
        return self._vllm.SamplingParams(
            n=p.n, max_tokens=p.max_new_tokens, temperature=p.temperature, top_p=p.top_p,
            top_k=p.top_k if p.top_k > 0 else -1, seed=p.seed, stop_token_ids=list(p.stop_token_ids),
            logprobs=0, detokenize=False)

    def generate(self, requests: Sequence[GenerationRequest]) -> list[RequestOutput]:
        prompts = [{"prompt_token_ids": list(r.prompt_ids)} for r in requests]
        results = self.llm.generate(prompts, [self._params(r.params) for r in requests], use_tqdm=False)
        outputs = []
        for request, result in zip(requests, results, strict=True):
            samples = []
            for completion in result.outputs:
                ids = list(completion.token_ids)
                lps = [step[t].logprob for step, t in zip(completion.logprobs or [], ids, strict=False)]
                samples.append(SampleOutput(ids, lps, finish_reason_of(ids, request.params.stop_token_ids)))
            outputs.append(RequestOutput(request.request_id, list(request.prompt_ids), samples))
            self._stats["prompt_tokens"] += len(request.prompt_ids) * request.params.n
            self._stats["generated_tokens"] += sum(len(s.token_ids) for s in samples)
            self._stats["requests"] += 1
        return outputs

    def update_weights(self, state_dict: Mapping[str, Any], version: int | None = None) -> None:
        items = list(state_dict.items())
        self.llm.apply_model(lambda model: model.load_weights(items))
        self.llm.reset_prefix_cache()
        self.version = self.version + 1 if version is None else version

    def stats(self) -> dict[str, float]:
        return dict(self._stats)

    def open_conversation(self) -> Conversation:
        return Conversation(self)
