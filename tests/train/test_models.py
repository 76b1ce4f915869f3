"""Model loading: config validation, HF directories, the tiny random Qwen2 and the SmolLM2 preset."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from pydantic import ValidationError

from posttrain.train.models import ModelConfig, TinyModelConfig, load_model, smollm2_gguf_path, tiny_random


@pytest.mark.parametrize(
    "fields",
    [
        {"preset": None},
        {"path": "x", "preset": "smollm2-135m"},
        {"preset": "smollm2-135m", "gguf_file": "a.gguf"},
    ],
)
def test_config_needs_exactly_one_source(fields: dict[str, str]) -> None:
    with pytest.raises(ValidationError):
        ModelConfig(**fields)  # type: ignore[arg-type]


def test_config_defaults_to_tiny_unless_a_path_is_given() -> None:
    assert ModelConfig().preset == "tiny"
    assert ModelConfig(path="some/dir").preset is None


def test_tiny_random_is_deterministic_per_seed() -> None:
    first, again = tiny_random(TinyModelConfig(seed=1)), tiny_random(TinyModelConfig(seed=1))
    other = tiny_random(TinyModelConfig(seed=2))
    weight = "model.layers.0.self_attn.q_proj.weight"
    assert torch.equal(first.state_dict()[weight], again.state_dict()[weight])
    assert not torch.equal(first.state_dict()[weight], other.state_dict()[weight])


def test_tiny_random_leaves_global_rng_alone() -> None:
    torch.manual_seed(0)
    expected = torch.rand(1)
    torch.manual_seed(0)
    tiny_random()
    assert torch.equal(torch.rand(1), expected)


def _save_tiny_hf_dir(directory: Path) -> torch.nn.Module:
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace
    from transformers import PreTrainedTokenizerFast

    vocab = {"<unk>": 0, "<eos>": 1, **{f"w{i}": i for i in range(2, 128)}}
    backend = Tokenizer(WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = Whitespace()  # type: ignore[assignment]
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", eos_token="<eos>")
    model = tiny_random()
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return model


def test_loads_an_hf_directory(tmp_path: Path) -> None:
    saved = _save_tiny_hf_dir(tmp_path)
    model, tokenizer = load_model(ModelConfig(path=str(tmp_path)))
    assert tokenizer("w5 w7")["input_ids"] == [5, 7]
    assert tokenizer.pad_token == "<eos>"  # no pad token of its own: EOS stands in
    for name, tensor in saved.state_dict().items():
        assert torch.equal(model.state_dict()[name], tensor), name


def test_loads_in_the_requested_dtype(tmp_path: Path) -> None:
    _save_tiny_hf_dir(tmp_path)
    model, _ = load_model(ModelConfig(path=str(tmp_path), dtype="bfloat16"))
    assert next(model.parameters()).dtype == torch.bfloat16


def test_missing_directory_is_named(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nowhere"):
        load_model(ModelConfig(path=str(tmp_path / "nowhere")))


def test_smollm2_gguf_ships_with_the_package() -> None:
    path = smollm2_gguf_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert path.stat().st_size > 50_000_000


@pytest.mark.slow
def test_smollm2_answers_a_chat_prompt() -> None:
    torch.set_num_threads(2)
    model, tokenizer = load_model(ModelConfig(preset="smollm2-135m"))
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    prompt = tokenizer.apply_chat_template(
        messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    output = model.generate(**prompt, max_new_tokens=20, do_sample=False)
    answer = tokenizer.decode(output[0, prompt["input_ids"].shape[1] :], skip_special_tokens=True)
    assert "Paris" in answer


@pytest.mark.slow
def test_smollm2_cached_copy_matches_the_gguf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    torch.set_num_threads(2)
    monkeypatch.setenv("POSTTRAIN_CACHE", str(tmp_path))
    gguf = smollm2_gguf_path()
    direct, direct_tokenizer = load_model(ModelConfig(path=str(gguf.parent), gguf_file=gguf.name))
    cached, cached_tokenizer = load_model(ModelConfig(preset="smollm2-135m"))  # converts into tmp_path
    assert any(p.name.startswith("smollm2-135m") for p in tmp_path.iterdir())
    messages = [{"role": "user", "content": "Déjà vu: 12 + 30 = ?\n\tdef f(x): return x**2"}]
    options = {"add_generation_prompt": True, "tokenize": True, "return_dict": True}
    ids = list(direct_tokenizer.apply_chat_template(messages, **options)["input_ids"])
    assert list(cached_tokenizer.apply_chat_template(messages, **options)["input_ids"]) == ids
    with torch.no_grad():
        batch = torch.tensor([ids])
        assert torch.equal(direct(input_ids=batch).logits, cached(input_ids=batch).logits)
