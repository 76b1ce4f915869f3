"""A policy to evaluate, loaded from what a person names on the command line.

A spec is one of: a model preset (`tiny`: the embedded base model built for the given config's domains;
`smollm2-135m`), an HF model directory (holding `config.json`; a preset or a directory is taken as it
is: the default config's `warm_start` does not apply to it), a checkpoint directory
(`<run>/checkpoints/step_<n>/`, or `<run>/best_passing/checkpoints/step_<n>/`), a run directory (its
latest checkpoint), or a train config (its base model: a preset name such as `quickstart` or a YAML
path, resolved by the caller). A checkpoint is loaded into the base model of the run's own
`config.yaml` (the nearest one above it): full weights in place, or the LoRA adapters injected with the
run's LoRA settings. The weights hash is `weights_sha256` of the module an engine runs (adapters
included), the evaluation cache's identity of a checkpoint.
Not here: evaluating it (`posttrain.eval.matrix`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from posttrain.errors import ConfigError
from posttrain.tasks.registry import DomainRegistry
from posttrain.train import checkpoint as ckpt
from posttrain.train.config import ModelConfig, TrainConfig, load_train_config

PRESETS = ("tiny", "smollm2-135m")
Log = Callable[[str], None]


@dataclass
class LoadedPolicy:
    """A model ready for an engine, with what the matrix records about it."""

    model: Any
    """The causal LM (under LoRA: with the adapters injected in place)."""
    tokenizer: Any
    system_prompt: str | None
    """The system prompt its run was trained with."""
    path: str
    """What was loaded (the checkpoint directory, the model directory or the preset)."""
    weights_hash: str
    trained_domains: tuple[str, ...] = ()
    """The domains its run trained on (empty for base models)."""


def load_policy(spec: str, default: TrainConfig, config_of: Callable[[str], TrainConfig], log: Log) -> LoadedPolicy:
    """Load `spec` (module docstring); `default` gives the domains a `tiny` preset is built for and the
    system prompt of presets and HF directories; `config_of` resolves a train config name or path."""
    path = Path(spec)
    as_is = {"warm_start": None}  # a named model is evaluated as it is, never fine-tuned by the default's warm_start
    if spec in PRESETS and not path.exists():
        return _base(default.model_copy(update={"model": ModelConfig(preset=spec), **as_is}), spec, log)  # type: ignore[arg-type]
    if path.is_dir():
        if (path / "meta.json").is_file():
            return load_checkpoint_policy(path, log)
        if (path / ckpt.CHECKPOINTS).is_dir():
            latest = ckpt.latest_checkpoint(path)
            if latest is None:
                raise ConfigError(f"{spec}: a run directory without a complete checkpoint")
            return load_checkpoint_policy(latest, log)
        if (path / "config.json").is_file():
            return _base(default.model_copy(update={"model": ModelConfig(path=str(path)), **as_is}), spec, log)
        raise ConfigError(f"{spec}: not a checkpoint, run or HF model directory")
    return _base(config_of(spec), spec, log)


def load_checkpoint_policy(checkpoint_dir: Path, log: Log) -> LoadedPolicy:
    """A checkpoint's policy: its run's base model with the checkpoint's weights."""
    config = load_train_config(run_config_path(checkpoint_dir))
    model, tokenizer = _build_base(config, log)
    tensors = ckpt.load_model_tensors(checkpoint_dir)
    if config.policy.lora is not None:
        from peft import set_peft_model_state_dict

        from posttrain.train.policy import wrap_lora

        wrapped = wrap_lora(model, config.policy.lora, config.policy.seed)
        set_peft_model_state_dict(wrapped, tensors)
        model = wrapped.get_base_model()  # type: ignore[operator]
    else:
        model.load_state_dict(tensors)
    model.eval()
    registry = DomainRegistry.from_config(config.domains)
    untrained = set(config.domains.untrained_ids(registry.ids()))
    trained = tuple(d for d in registry.ids() if d not in untrained)
    return LoadedPolicy(model, tokenizer, config.rollout.system_prompt, str(checkpoint_dir), _hash(model), trained)


def run_config_path(checkpoint_dir: Path) -> Path:
    """The `config.yaml` of the run a checkpoint belongs to (the nearest one above it)."""
    for parent in checkpoint_dir.resolve().parents:
        if (parent / "config.yaml").is_file():
            return parent / "config.yaml"
    raise ConfigError(f"{checkpoint_dir}: no run config.yaml above this checkpoint")


def _base(config: TrainConfig, path: str, log: Log) -> LoadedPolicy:
    model, tokenizer = _build_base(config, log)
    model.eval()
    return LoadedPolicy(model, tokenizer, config.rollout.system_prompt, path, _hash(model))


def _build_base(config: TrainConfig, log: Log) -> tuple[Any, Any]:
    from posttrain.train.warm_start import resolve_model

    return resolve_model(config, log)


def _hash(model: Any) -> str:
    from posttrain.train.models import weights_sha256

    return weights_sha256(model)
