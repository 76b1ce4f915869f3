"""`HFEngine`: the baseline and fallback backend over plain `transformers` generation.

Works for any causal LM `transformers` can run. Two modes:
- default (baseline B0): `model.generate(num_return_sequences=n)` per request, so the prompt is
  prefilled n times and a multi-turn session recomputes its whole history every turn;
- `prefill_once=True` (baseline B1): each prompt is prefilled once, its KV cache expanded to the n
  samples, and the group decoded as one batch with the native engine's sampler.
Logprobs follow `posttrain.rollout.api` (log-softmax of raw logits by default). Nothing is cached
between calls, so `update_weights` only loads the weights (`posttrain.rollout.weights`).
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from posttrain.rollout.api import (
    Conversation,
    GenerationRequest,
    RequestOutput,
    SampleOutput,
    SamplingParams,
    finish_reason_of,
)
from posttrain.rollout.config import HFEngineConfig
from posttrain.rollout.engine.sampler import make_generator, sample_token
from posttrain.rollout.weights import load_weights


def as_module(model_or_path: Any) -> Any:
    """A `transformers` model object as is, or one loaded (float32, eval mode) from a local directory."""
    if isinstance(model_or_path, str):
        from transformers import AutoModelForCausalLM

        return AutoModelForCausalLM.from_pretrained(model_or_path, dtype=torch.float32).eval()
    return model_or_path


def truncate_at_stop(token_ids: list[int], stop_token_ids: Sequence[int]) -> list[int]:
    """Tokens up to and including the first stop token."""
    for i, token in enumerate(token_ids):
        if token in stop_token_ids:
            return token_ids[: i + 1]
    return token_ids


def _cache_kwarg(model: Any) -> str:
    """Newer `transformers` name the KV cache argument `cache`, older ones `past_key_values`."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


class _FirstCallTimer:
    """A logits processor that only records when generation produced its first logits (TTFT)."""

    def __init__(self) -> None:
        self.first_s: float | None = None

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        if self.first_s is None:
            self.first_s = time.perf_counter()
        return scores


class HFEngine:
    """`RolloutEngine` over `transformers` generation (see module docstring for the two modes)."""

    def __init__(self, model: Any, config: HFEngineConfig | None = None) -> None:
        self.model = as_module(model)
        self.prefill_once = (config or HFEngineConfig()).prefill_once
        self.version = 0
        self._stats: dict[str, float] = {"prompt_tokens": 0, "computed_tokens": 0, "cached_tokens": 0,
                                         "generated_tokens": 0, "requests": 0}

    def generate(self, requests: Sequence[GenerationRequest]) -> list[RequestOutput]:
        run = self._generate_prefill_once if self.prefill_once else self._generate_b0
        outputs = []
        for request in requests:
            start_s = time.perf_counter()
            with torch.no_grad():
                output = run(request, start_s)
            output.metrics["latency_s"] = time.perf_counter() - start_s
            outputs.append(output)
            self._stats["requests"] += 1
        return outputs

    def update_weights(self, state_dict: Mapping[str, Any], version: int | None = None) -> None:
        load_weights(self.model, state_dict)
        self.version = self.version + 1 if version is None else version

    def stats(self) -> dict[str, float]:
        return dict(self._stats)

    def open_conversation(self) -> Conversation:
        return Conversation(self)

    def _count(self, prompt_len: int, computed: int, samples: list[SampleOutput]) -> None:
        self._stats["prompt_tokens"] += prompt_len * len(samples)
        self._stats["computed_tokens"] += computed
        self._stats["generated_tokens"] += sum(len(s.token_ids) for s in samples)

    def _generate_b0(self, request: GenerationRequest, start_s: float) -> RequestOutput:
        from transformers import GenerationConfig, LogitsProcessorList

        params = request.params
        if params.seed is not None:
            torch.manual_seed(params.seed)
        stop = list(params.stop_token_ids)
        greedy = params.temperature == 0
        sampling = {} if greedy else {"temperature": params.temperature, "top_p": params.top_p,
                                      "top_k": params.top_k}
        config = GenerationConfig(
            do_sample=not greedy, max_new_tokens=params.max_new_tokens,
            num_return_sequences=1 if greedy else params.n, eos_token_id=stop,  # [] overrides the model default
            pad_token_id=stop[0] if stop else 0, output_logits=True, return_dict_in_generate=True, **sampling,
        )
        timer = _FirstCallTimer()
        device = next(self.model.parameters()).device
        input_ids = torch.tensor([list(request.prompt_ids)], device=device)  # [1, P]
        out = self.model.generate(input_ids, generation_config=config,
                                  logits_processor=LogitsProcessorList([timer]))
        logits = torch.stack(out.logits, dim=1).float()  # [n, T, V] raw logits
        new_ids = out.sequences[:, input_ids.shape[1]:]  # [n, T]
        samples = []
        for j in range(params.n):
            row = 0 if greedy else j  # greedy samples are all identical; computed once
            ids = truncate_at_stop(new_ids[row].tolist(), stop)
            steps = logits[row, : len(ids)]  # [t, V]
            index = torch.tensor(ids, device=steps.device)[:, None]  # [t, 1]
            lps = torch.log_softmax(self._source(steps, params), -1).gather(-1, index)
            samples.append(SampleOutput(ids, lps[:, 0].tolist(), finish_reason_of(ids, stop)))
        prompt_len = len(request.prompt_ids)
        self._count(prompt_len, new_ids.shape[0] * prompt_len + int(new_ids.numel()), samples)
        ttft = (timer.first_s or time.perf_counter()) - start_s
        return RequestOutput(request.request_id, list(request.prompt_ids), samples, {"ttft_s": ttft})

    @staticmethod
    def _source(steps: torch.Tensor, params: SamplingParams) -> torch.Tensor:
        from posttrain.rollout.engine.sampler import processed_logits

        if params.logprobs_mode == "raw" or params.temperature == 0:
            return steps
        return torch.stack([processed_logits(row, params) for row in steps])

    def _generate_prefill_once(self, request: GenerationRequest, start_s: float) -> RequestOutput:
        from transformers import DynamicCache

        params, n = request.params, request.params.n
        device = next(self.model.parameters()).device
        cache = DynamicCache()
        prompt = torch.tensor([list(request.prompt_ids)], device=device)  # [1, P]
        key = _cache_kwarg(self.model)
        extra = {"logits_to_keep": 1} if "logits_to_keep" in inspect.signature(self.model.forward).parameters else {}
        logits = self.model(input_ids=prompt, use_cache=True, **{key: cache}, **extra).logits[:, -1]  # [1, V]
        ttft = time.perf_counter() - start_s
        cache.batch_repeat_interleave(n)
        logits = logits.expand(n, -1)  # [n, V]
        gens = [make_generator(params, j, device) for j in range(n)]
        tokens: list[list[int]] = [[] for _ in range(n)]
        lps: list[list[float]] = [[] for _ in range(n)]
        done = [False] * n
        computed = prompt.shape[1]
        for _ in range(params.max_new_tokens):
            for j in range(n):
                if not done[j]:
                    token, lp = sample_token(logits[j], params, gens[j])
                    tokens[j].append(token)
                    lps[j].append(lp)
                    done[j] = token in params.stop_token_ids or len(tokens[j]) >= params.max_new_tokens
            if all(done):
                break
            step = torch.tensor([[t[-1]] for t in tokens], device=device)  # [n, 1]
            logits = self.model(input_ids=step, use_cache=True, **{key: cache}).logits[:, -1]
            computed += n
        stop = params.stop_token_ids
        samples = [SampleOutput(tokens[j], lps[j], finish_reason_of(tokens[j], stop)) for j in range(n)]
        self._count(prompt.shape[1], computed, samples)
        return RequestOutput(request.request_id, list(request.prompt_ids), samples, {"ttft_s": ttft})
