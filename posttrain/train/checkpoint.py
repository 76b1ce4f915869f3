"""Checkpoint directories: save atomically, find the latest, load back for exact resume.

Layout of `<run_dir>/checkpoints/step_<step:08d>/`: `model.safetensors` (the trainer state's
`model` tensors: full weights or the LoRA adapter), `trainer.pt` (optimizer, LR schedule, step, RNG
states and any other trainer entries), `extra.pt` (whatever the caller adds, e.g. the domain
mixture's state) and `meta.json` (step and format, for people). A checkpoint is written into a
hidden temporary directory and renamed into place, so a crash never leaves a partial `step_*`
directory. Not here: what the states mean (`PolicyTrainer.state_dict`). Checkpoints are trusted
input: `trainer.pt` and `extra.pt` are unpickled on load.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

CHECKPOINTS = "checkpoints"
FORMAT_VERSION = 1


@dataclass(frozen=True)
class Checkpoint:
    """A loaded checkpoint."""

    step: int
    """The trainer step the checkpoint was taken after."""
    state: dict[str, Any]
    """The trainer state, ready for `PolicyTrainer.load_state_dict`."""
    extra: dict[str, Any] = field(default_factory=dict)
    """What the caller saved alongside."""


def checkpoint_path(run_dir: str | Path, step: int) -> Path:
    """Where the checkpoint of `step` lives."""
    return Path(run_dir) / CHECKPOINTS / f"step_{step:08d}"


def save_checkpoint(
    run_dir: str | Path,
    state: Mapping[str, Any],
    extra: Mapping[str, Any] | None = None,
    keep_last: int | None = None,
) -> Path:
    """Write `state` (with `model` tensors and a `step`) and `extra`; keep only `keep_last` newest."""
    step = int(state["step"])
    final = checkpoint_path(run_dir, step)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.parent / f".tmp-{final.name}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        save_file(_unshared(state["model"]), str(tmp / "model.safetensors"))
        torch.save({k: v for k, v in state.items() if k != "model"}, tmp / "trainer.pt")
        torch.save(dict(extra or {}), tmp / "extra.pt")
        meta = {"step": step, "format_version": FORMAT_VERSION}
        (tmp / "meta.json").write_text(json.dumps(meta) + "\n", encoding="utf-8")
        _replace_dir(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if keep_last is not None:
        prune_checkpoints(run_dir, keep_last)
    return final


def load_checkpoint(path: str | Path) -> Checkpoint:
    """Read a checkpoint directory written by `save_checkpoint`."""
    path = Path(path)
    if not (path / "meta.json").is_file():
        raise FileNotFoundError(f"{path} is not a checkpoint directory (no meta.json)")
    state = torch.load(path / "trainer.pt", weights_only=False)
    state["model"] = load_file(str(path / "model.safetensors"))
    extra = torch.load(path / "extra.pt", weights_only=False)
    return Checkpoint(step=int(state["step"]), state=state, extra=extra)


def load_model_tensors(path: str | Path) -> dict[str, torch.Tensor]:
    """Only the `model` tensors of a checkpoint (full weights or the LoRA adapter): nothing unpickled."""
    path = Path(path)
    if not (path / "meta.json").is_file():
        raise FileNotFoundError(f"{path} is not a checkpoint directory (no meta.json)")
    return load_file(str(path / "model.safetensors"))


def list_checkpoints(run_dir: str | Path) -> list[Path]:
    """Complete checkpoints of a run, oldest first."""
    root = Path(run_dir) / CHECKPOINTS
    if not root.is_dir():
        return []
    found = [p for p in root.glob("step_*") if p.is_dir() and (p / "meta.json").is_file()]
    return sorted(found, key=lambda p: int(p.name.removeprefix("step_")))


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    """The newest complete checkpoint of a run, or None."""
    found = list_checkpoints(run_dir)
    return found[-1] if found else None


def prune_checkpoints(run_dir: str | Path, keep_last: int) -> None:
    """Delete all but the `keep_last` newest checkpoints."""
    found = list_checkpoints(run_dir)
    for path in found[: max(len(found) - max(keep_last, 1), 0)]:
        shutil.rmtree(path, ignore_errors=True)


def _replace_dir(src: Path, dst: Path) -> None:
    """Rename `src` to `dst`, moving an existing `dst` aside first (rename cannot replace a full dir)."""
    old = None
    if dst.exists():
        old = dst.parent / f".old-{dst.name}-{uuid.uuid4().hex[:8]}"
        os.replace(dst, old)
    os.replace(src, dst)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _unshared(tensors: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Contiguous tensors with no two sharing memory (safetensors refuses tied weights)."""
    out: dict[str, torch.Tensor] = {}
    seen: set[int] = set()
    for name, tensor in tensors.items():
        tensor = tensor.detach().contiguous()
        pointer = tensor.data_ptr()
        out[name] = tensor.clone() if pointer in seen else tensor
        seen.add(pointer)
    return out
