"""Weight sync into an engine's model: a state dict plus a version, the one call every engine takes.

`load_weights(module, state)` copies each tensor of `state` into the module's parameter or buffer of the
same name. A tensor that already is that parameter's storage is skipped: an engine that shares the
learner's module in one process (the trainer's default) copies nothing, while an engine holding its own
copy of the model — in another process, or after `copy.deepcopy` — receives the values. The names must
match exactly (a LoRA-wrapped learner sends the wrapped names, so its engine must hold the same wrapper).
Not here: transport between processes or machines, versions (the engines keep those).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch


def load_weights(module: Any, state: Mapping[str, torch.Tensor]) -> int:
    """Copy `state` into `module` in place (see module docstring); returns how many tensors were copied."""
    own = module.state_dict()
    missing, unexpected = own.keys() - state.keys(), state.keys() - own.keys()
    if missing or unexpected:
        raise KeyError(f"weight sync: {len(missing)} tensors missing (e.g. {sorted(missing)[:3]}), "
                       f"{len(unexpected)} unexpected (e.g. {sorted(unexpected)[:3]})")
    copied = 0
    with torch.no_grad():
        for name, tensor in state.items():
            target = own[name]
            if target.data_ptr() == tensor.data_ptr() and target.shape == tensor.shape:
                continue
            target.copy_(tensor)
            copied += 1
    return copied
