"""Packed projection weights for the CPU forward: per layer, q|k|v and gate|up concatenated, and every
projection (and the LM head) prepacked once for the GEMM that applies it.

Why: a decode step multiplies a few dozen rows by every weight matrix, and at that size the GEMM
spends much of its time rearranging the weight into the blocked layout its kernel reads, on every
call. Prepacking does that once: oneDNN's blocked layout (`torch.ops.mkldnn._reorder_linear_weight`,
the weight prepacking `torch.compile` uses on CPU) where the build has it, else a transposed `[in,
out]` copy for a plain `x @ W`. Fusing q/k/v and gate/up halves the projection calls per layer, and
the residual adds ride in the GEMMs. Measured on SmolLM2-135M (docs/rollout.md, "W7"). Results differ
from `F.linear` by rounding (about 1e-6).

Guarantees: the packed tensors always equal the module's current weights. Before each step the
runner calls `refresh`, which compares every source parameter's storage and in-place version counter
(`Tensor._version`, bumped by optimizer steps, `copy_`, `load_state_dict`) with those it packed, and
repacks when any changed; so weights updated in place (an optimizer step), through `update_weights`
(which also forces a repack: writes through `param.data` bypass the counters) or by replacing a
parameter's data are seen at the next step. A projection replaced by a wrapper (LoRA injected after
the engine was built) makes `refresh` report the packed weights unusable.
Costs: one more copy of the projection weights and the LM head (540 MB for SmolLM2-135M) and one
repack per weight update.
Not here: layers that are not plain `nn.Linear` (a LoRA wrapper, a quantised layer), which keep their
own forward (`packable` is False and the model's modules are called), and non-CPU devices.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

ONEDNN = bool(torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_reorder_linear_weight")
              and hasattr(torch.ops.mkldnn, "_linear_pointwise"))
"""Whether this torch build has oneDNN's prepacked linear (standard x86 and aarch64 CPU wheels do)."""


def prepack(weight: torch.Tensor, onednn: bool) -> torch.Tensor:
    """A `[out, in]` weight as `linear` takes it: oneDNN's blocked layout, or the transpose `[in, out]`."""
    weight = weight.detach().contiguous()
    return torch.ops.mkldnn._reorder_linear_weight(weight) if onednn else weight.t().contiguous()


def linear(x: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None = None,
           residual: torch.Tensor | None = None) -> torch.Tensor:
    """`x @ W^T (+ bias) (+ residual)` for `x` `[N, in]` and `packed` from `prepack` (either form)."""
    if packed.layout == torch._mkldnn:  # type: ignore[attr-defined]
        if residual is not None:
            return torch.ops.mkldnn._linear_pointwise.binary(x, residual, packed, bias, "add")
        return torch.ops.mkldnn._linear_pointwise(x, packed, bias, "none", [], "")
    out = torch.mm(x, packed) if bias is None else torch.addmm(bias, x, packed)
    return out if residual is None else out.add_(residual)


@dataclass
class PackedLayer:
    """One decoder layer's prepacked projections: q|k|v (with the fused q/k/v bias when the layer has
    biases), o, gate|up and down."""

    qkv: torch.Tensor
    qkv_bias: torch.Tensor | None
    o: torch.Tensor
    o_bias: torch.Tensor | None
    gate_up: torch.Tensor
    down: torch.Tensor


def _linears(decoder: Any) -> list[list[Any]]:
    return [[layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj, layer.self_attn.o_proj,
             layer.mlp.gate_proj, layer.mlp.up_proj, layer.mlp.down_proj] for layer in decoder.layers]


def packable(model: Any) -> bool:
    """Whether every projection and the LM head is a plain `nn.Linear` on the CPU, without a bias in
    the MLP and the LM head (Llama, Qwen2 and Qwen3 have none there)."""
    layers = _linears(model.model)
    modules = [m for layer in layers for m in layer] + [model.lm_head]
    if any(type(m) is not torch.nn.Linear or m.weight.device.type != "cpu" for m in modules):
        return False
    return all(m.bias is None for m in [m for layer in layers for m in layer[4:]] + [model.lm_head])


def _signature(tensors: list[torch.Tensor]) -> tuple[tuple[int, int], ...]:
    return tuple((t.data_ptr(), t._version) for t in tensors)


class PackedWeights:
    """Prepacked, fused copies of a model's projections, kept equal to its parameters (`refresh`)."""

    def __init__(self, model: Any, onednn: bool = ONEDNN) -> None:
        self.model = model
        self.onednn = onednn
        self.layers: list[PackedLayer] = []
        self.lm_head = torch.empty(0)
        self._modules: list[int] = []
        self._sources: list[torch.Tensor] = []
        self._signature: tuple[tuple[int, int], ...] = ()
        self._stale = True
        self.refresh()

    def refresh(self) -> bool:
        """Repack if any source parameter changed since the last pack. False when a projection is no
        longer a plain `nn.Linear` (a wrapper was put in its place): the packed weights are then unusable."""
        linears = _linears(self.model.model)
        modules = [id(m) for layer in linears for m in layer] + [id(self.model.lm_head)]
        if modules != self._modules:
            if not packable(self.model):
                return False
            self._modules = modules
            self._sources = [p for layer in linears for m in layer for p in (m.weight, m.bias) if p is not None]
            self._sources.append(self.model.lm_head.weight)
            self._signature = ()
        signature = _signature(self._sources)
        if signature != self._signature or self._stale:
            with torch.no_grad():
                self.layers = [_pack(layer, self.onednn) for layer in linears]
                self.lm_head = prepack(self.model.lm_head.weight, self.onednn)
            self._signature, self._stale = signature, False
        return True

    def mark_stale(self) -> None:
        """Repack at the next `refresh` whatever the version counters say (after `update_weights`:
        writes through `param.data` do not bump them)."""
        self._stale = True


def _pack(linears: list[Any], onednn: bool) -> PackedLayer:
    q, k, v, o, gate, up, down = linears

    def pack(*modules: Any) -> torch.Tensor:
        return prepack(torch.cat([m.weight.detach() for m in modules]), onednn)

    biases = [m.bias for m in (q, k, v)]
    qkv_bias = None
    if any(b is not None for b in biases):
        qkv_bias = torch.cat([b.detach() if b is not None else m.weight.new_zeros(m.out_features)
                              for b, m in zip(biases, (q, k, v), strict=True)])
    o_bias = o.bias.detach() if o.bias is not None else None
    return PackedLayer(pack(q, k, v), qkv_bias, pack(o), o_bias, pack(gate, up), pack(down))
