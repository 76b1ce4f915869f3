"""RoPE cos/sin for the native engine, for every `rope_scaling` variant `transformers` has for Llama/Qwen2.

Static variants (default, `linear`, `yarn` with its attention factor, `llama3`, and any other type
`transformers` does not route through `dynamic_rope_update`) have one set of frequencies: cos/sin come
from a table built by calling the model's own rotary module once for a range of positions, so whatever
that module computes (inverse frequencies, attention scaling) applies, bit for bit.

`dynamic` (NTK) and `longrope` pick their frequencies from the sequence length (`rope_keys`). Calling
the HF module would both give the frequencies of the table's length and change the module's cached
`inv_freq`, which a trainer's forward on the same module would then see; so for these the frequencies
are computed from the config with `transformers`' own `ROPE_INIT_FUNCTIONS` (the functions its rotary
module calls), with the same arguments it passes, and the module is never called. Each token gets the
frequencies of its `rope_length` (the length `transformers`' incremental decoding computes it at).
Not here: which KV may be reused under which frequencies (`rope_keys`, the prefix cache).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from posttrain.rollout.engine.rope_keys import STATIC_KEY, RopeKeys


def _rope_parameters(config: Any) -> dict[str, Any]:
    """The config's RoPE parameters (`rope_parameters` in transformers 5, `rope_scaling` before)."""
    params = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {}
    return dict(params)


LENGTH_DEPENDENT: dict[str, Callable[[Any], RopeKeys]] = {
    "dynamic": lambda config: RopeKeys(threshold=config.max_position_embeddings, per_length=True),
    "longrope": lambda config: RopeKeys(threshold=int(_rope_parameters(config)["original_max_position_embeddings"])),
}
"""RoPE types whose frequencies depend on the sequence length, and the lengths where they change (the
thresholds `transformers`' `dynamic_rope_update` compares against)."""

_MAX_CACHED_KEYS = 4096


class RotaryTables:
    """cos/sin `[N, D]` for positions of one model (see module docstring)."""

    def __init__(self, model: Any, dtype: torch.dtype, device: torch.device) -> None:
        self.config = model.config
        self.rotary = model.model.rotary_emb
        self.dtype, self.device = dtype, device
        rope_type = str(getattr(self.rotary, "rope_type", "default"))
        make_keys = LENGTH_DEPENDENT.get(rope_type)
        self.keys = make_keys(self.config) if make_keys is not None else RopeKeys()
        self._init_fn: Callable[..., tuple[torch.Tensor, float]] | None = None
        if make_keys is not None:
            from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

            self._init_fn = ROPE_INIT_FUNCTIONS[rope_type]
        self._table: tuple[torch.Tensor, torch.Tensor] | None = None
        self._frequencies: dict[int, tuple[torch.Tensor, float]] = {}

    def cos_sin(self, positions: torch.Tensor,
                lengths: Sequence[int] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin `[N, D]` of `positions` `[N]`; `lengths[i]` is token i's `rope_length` (needed only
        when the variant is length dependent)."""
        if self.keys.is_static:
            return self._from_table(positions)
        assert lengths is not None and len(lengths) == positions.shape[0]
        return self._per_length(positions, lengths)

    def _from_table(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        needed = int(positions.max().item()) + 1
        if self._table is None or self._table[0].shape[0] < needed:
            size = max(needed, 2 * (self._table[0].shape[0] if self._table else 1024))
            ids = torch.arange(size, device=self.device)[None]  # [1, P]
            dummy = torch.empty(1, dtype=self.dtype, device=self.device)
            cos, sin = self.rotary(dummy, ids)  # static variants: the module's forward has no side effect
            self._table = (cos[0], sin[0])
        cos_table, sin_table = self._table
        return cos_table[positions], sin_table[positions]

    def _per_length(self, positions: torch.Tensor, lengths: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
        slot_of: dict[int, int] = {}
        slots = [slot_of.setdefault(self.keys.key(n), len(slot_of)) for n in lengths]
        found = [self._frequencies_of(key) for key in slot_of]
        index = torch.tensor(slots, device=self.device)
        inv_freq = torch.stack([f for f, _ in found])[index]  # [N, D/2]
        scale = torch.tensor([s for _, s in found], dtype=torch.float32, device=self.device)[index]  # [N]
        # the same ops as the HF rotary forward: float positions times inverse frequencies, duplicated
        freqs = positions.float()[:, None] * inv_freq  # [N, D/2]
        emb = torch.cat((freqs, freqs), dim=-1)  # [N, D]
        cos = emb.cos() * scale[:, None]
        sin = emb.sin() * scale[:, None]
        return cos.to(self.dtype), sin.to(self.dtype)

    def _frequencies_of(self, key: int) -> tuple[torch.Tensor, float]:
        """Inverse frequencies `[D/2]` (float32) and attention scaling of `key`, as `transformers`
        computes them: at init (no length) for the base key, else for a length of that key (a 0-d
        tensor for dynamic NTK, as its forward passes `max(position_ids) + 1`; an int for longrope)."""
        hit = self._frequencies.get(key)
        if hit is not None:
            return hit
        assert self._init_fn is not None
        length = self.keys.length_of(key)
        if key == STATIC_KEY or length is None:
            inv_freq, scale = self._init_fn(self.config)
        elif self.keys.per_length:
            inv_freq, scale = self._init_fn(self.config, self.device, seq_len=torch.tensor(length, device=self.device))
        else:
            inv_freq, scale = self._init_fn(self.config, self.device, seq_len=length)
        if len(self._frequencies) >= _MAX_CACHED_KEYS:
            self._frequencies.clear()
        found = (inv_freq.to(device=self.device, dtype=torch.float32), float(scale))
        self._frequencies[key] = found
        return found
