"""A byte-level BPE tokenizer with a ChatML template and a tiny random Qwen2 over it (nothing downloaded)."""

from __future__ import annotations

import os
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
"""The ChatML layout SmolLM2 and Qwen2.5 use (without their default system message)."""


def chatml_tokenizer() -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    raw = Tokenizer(models.BPE())
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<pad>", "<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    raw.train_from_iterator(["user assistant tool system <tool_call> </tool_call> hello world"] * 4, trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=raw, eos_token="<|endoftext|>", pad_token="<pad>")
    tok.chat_template = CHATML
    return tok


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
