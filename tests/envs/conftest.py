"""A byte-level BPE tokenizer with a ChatML template (SmolLM2/Qwen2.5 layout, without their default system
message) and a tiny random Qwen2 over it (nothing downloaded)."""

from __future__ import annotations

import os
from typing import Any

import pytest

from posttrain.bench.agents import chatml_tokenizer as posttrain_chatml_tokenizer

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def chatml_tokenizer() -> Any:
    corpus = ["user assistant tool system <tool_call> </tool_call> hello world"] * 4
    return posttrain_chatml_tokenizer(corpus, vocab_size=300)


def chatml_model(vocab: int, seed: int = 0) -> Any:
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=2048,
                         tie_word_embeddings=False)
    torch.manual_seed(seed)
    return Qwen2ForCausalLM(config).eval()


@pytest.fixture(scope="session")
def tokenizer() -> Any:
    return chatml_tokenizer()


@pytest.fixture(scope="session")
def model(tokenizer: Any) -> Any:
    return chatml_model(len(tokenizer))
