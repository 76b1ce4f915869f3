"""Fixtures shared by the training tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random model and a 300-token tokenizer fitted on one-digit sums, saved once per session."""
    from posttrain.train.base_model import train_tokenizer
    from posttrain.train.models import TinyModelConfig, tiny_random

    texts = [f"Q: What is {a} + {b}?\nA: {a + b}" for a in range(30) for b in range(10)]
    tokenizer = train_tokenizer(texts, vocab_size=300)
    model = tiny_random(TinyModelConfig(vocab_size=len(tokenizer), hidden_size=32, num_layers=2))
    model.config.eos_token_id = tokenizer.eos_token_id
    path = tmp_path_factory.mktemp("tiny-model")
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path
