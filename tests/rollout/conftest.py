"""Tiny random-weight Llama/Qwen2/Qwen3 models built from configs (nothing is downloaded)."""

from __future__ import annotations

import os
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
torch.set_num_threads(1)  # oversubscribed CI cores: one thread is faster

ARCHS = ("qwen2", "qwen3", "llama")


def tiny_model(arch: str = "qwen2", seed: int = 0, vocab: int = 96, layers: int = 2) -> Any:
    """A float32 causal LM with GQA (4 query heads, 2 KV heads) and random weights."""
    from transformers import (
        LlamaConfig,
        LlamaForCausalLM,
        Qwen2Config,
        Qwen2ForCausalLM,
        Qwen3Config,
        Qwen3ForCausalLM,
    )

    classes = {"qwen2": (Qwen2Config, Qwen2ForCausalLM), "qwen3": (Qwen3Config, Qwen3ForCausalLM),
               "llama": (LlamaConfig, LlamaForCausalLM)}
    config_cls, model_cls = classes[arch]
    config = config_cls(vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=layers,
                        num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                        max_position_embeddings=1024, tie_word_embeddings=False)
    torch.manual_seed(seed)
    model = model_cls(config).eval()
    # random init is nearly uniform; sharpen the head so greedy paths are not decided by rounding
    with torch.no_grad():
        model.lm_head.weight.mul_(8.0)
    return model


@pytest.fixture(scope="module")
def qwen2() -> Any:
    return tiny_model("qwen2")


def prompt(length: int, seed: int = 1, vocab: int = 96) -> list[int]:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(3, vocab, (length,), generator=gen).tolist()


def full_logits(model: Any, token_ids: list[int]) -> Any:
    """No-cache forward of the whole sequence: float32 logits `[T, V]`."""
    with torch.no_grad():
        return model(torch.tensor([token_ids])).logits[0].float()
