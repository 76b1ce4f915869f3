"""Packed projection weights for the CPU forward: per layer, q|k|v and gate|up concatenated, and every
projection (and the LM head) prepacked once for the GEMM that applies it.

Why: a decode step multiplies a few dozen rows by every weight matrix, and at that size the GEMM
spends much of its time rearranging the weight into the blocked layout its kernel reads, on every
call. Prepacking does that once, in one of three forms (`Form`): the panels of the engine's own
AVX-512 kernel (`cpu_kernels`, the default where it builds: 1.34-1.73x oneDNN from 1 to 64 rows on
SmolLM2-135M, with SwiGLU's SiLU and product in the gate|up product), oneDNN's blocked layout
(`torch.ops.mkldnn._reorder_linear_weight`, the weight prepacking `torch.compile` uses on CPU) where
the build has it, else a transposed `[in, out]` copy for a plain `x @ W`. Fusing q/k/v and gate/up
halves the projection calls per layer, and the residual adds ride in the GEMMs. Measured on SmolLM2-135M (docs/rollout.md, "W7"). Results differ
from `F.linear` by rounding (about 1e-6).

Guarantees: the packed tensors always equal the module's current weights. Before each step the
runner calls `refresh`, which compares every source parameter's storage and in-place version counter
(`Tensor._version`, bumped by optimizer steps, `copy_`, `load_state_dict`) with those it packed, and
repacks when any changed; so weights updated in place (an optimizer step), through `update_weights`
(which also forces a repack: writes through `param.data` bypass the counters) or by replacing a
parameter's data are seen at the next step.
LoRA: a projection wrapped by peft's LoRA `Linear` (plain `nn.Linear` base, vanilla adapters without
dropout, DoRA or adapter bias) is packed merged, `W + scaling * B @ A` per active adapter, so generation
under LoRA runs one product per projection instead of three (rounding differs from the unmerged forward
by about 1e-6); its adapter weights, the active adapters and the disabled/merged flags are watched like
the base weights, so each optimizer step of the adapters is seen at the next call. A projection replaced
by any other wrapper makes `refresh` report the packed weights unusable.
Costs: one more copy of the projection weights and the LM head (540 MB for SmolLM2-135M) and one
repack per weight update.
Not here: layers that are neither (a quantised layer, LoRA with dropout or DoRA), which keep their own
forward (`packable` is False and the model's modules are called), and non-CPU devices.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import torch

from posttrain.rollout.engine import cpu_kernels

Form = Literal["panels", "onednn", "plain"]
"""How `prepack` lays a weight out: `cpu_kernels` panels `[out/16, in, 16]`, oneDNN's blocked layout, or
the transpose `[in, out]`."""

ONEDNN = bool(torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_reorder_linear_weight")
              and hasattr(torch.ops.mkldnn, "_linear_pointwise"))
"""Whether this torch build has oneDNN's prepacked linear (standard x86 and aarch64 CPU wheels do)."""


def default_form() -> Form:
    """The fastest form this machine has: panels where `cpu_kernels` builds, else oneDNN, else plain."""
    return "panels" if cpu_kernels.available() else "onednn" if ONEDNN else "plain"


def prepack(weight: torch.Tensor, form: Form) -> torch.Tensor:
    """A `[out, in]` weight as `linear` takes it, in `form`; a weight the panels do not take (not
    float32, `out` not a multiple of 16) gets oneDNN's layout (or the transpose) instead."""
    weight = weight.detach().contiguous()
    if form == "panels" and cpu_kernels.packable(weight):
        return cpu_kernels.pack(weight)
    if form != "plain" and ONEDNN:
        return torch.ops.mkldnn._reorder_linear_weight(weight)
    return weight.t().contiguous()


def linear(x: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None = None,
           residual: torch.Tensor | None = None) -> torch.Tensor:
    """`x @ W^T (+ bias) (+ residual)` for `x` `[N, in]` and `packed` from `prepack` (any form)."""
    if packed.dim() == 3:  # panels
        return cpu_kernels.linear(x, packed, bias, residual)
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
    gate_up_pairs: bool = False
    """`gate_up` in `cpu_kernels.pack_pairs` form: `mlp_inner` runs SiLU and the product in the GEMM."""


def mlp_inner(x: torch.Tensor, layer: PackedLayer, act: Any) -> torch.Tensor:
    """`act(x Wg^T) * (x Wu^T)` `[N, I]` (SwiGLU's inner activations) from a packed layer."""
    if layer.gate_up_pairs:
        return cpu_kernels.swiglu(x, layer.gate_up)
    gate_up = linear(x, layer.gate_up)  # [N, 2I]: gate, then up
    inter = gate_up.shape[1] // 2
    return act(gate_up[:, :inter]) * gate_up[:, inter:]  # type: ignore[no-any-return]


def _linears(decoder: Any) -> list[list[Any]]:
    return [[layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj, layer.self_attn.o_proj,
             layer.mlp.gate_proj, layer.mlp.up_proj, layer.mlp.down_proj] for layer in decoder.layers]


def _is_lora(module: Any) -> bool:
    return hasattr(module, "base_layer") and hasattr(module, "lora_A") and hasattr(module, "get_delta_weight")


def _active_adapters(module: Any) -> list[str]:
    """The LoRA adapters `module`'s forward adds (none while adapters are disabled or merged in)."""
    if module.disable_adapters or module.merged:
        return []
    return [a for a in module.active_adapters if a in module.lora_A]


def _mergeable(module: Any) -> bool:
    """A plain `nn.Linear` on the CPU, or peft's LoRA `Linear` over one whose forward equals its merged
    weight: vanilla adapters (no DoRA or other variant), no dropout, no adapter bias."""
    if type(module) is torch.nn.Linear:
        return bool(module.weight.device.type == "cpu")
    if not _is_lora(module) or type(module.base_layer) is not torch.nn.Linear:
        return False
    if module.disable_adapters and module.merged:  # its next forward unmerges: leave it to the module
        return False
    variants = getattr(module, "lora_variant", {})
    return module.base_layer.weight.device.type == "cpu" and all(
        a not in variants and type(module.lora_dropout[a]) is torch.nn.Identity
        and module.lora_B[a].bias is None and not getattr(module, "fan_in_fan_out", False)
        for a in _active_adapters(module)
    )


def _weight(module: Any) -> torch.Tensor:
    """The `[out, in]` weight `module`'s forward applies: a LoRA layer's with its active adapters merged."""
    if type(module) is torch.nn.Linear:
        return module.weight.detach()
    weight = module.base_layer.weight.detach()
    for adapter in _active_adapters(module):
        weight = weight + module.get_delta_weight(adapter).detach()
    return weight


def _base(module: Any) -> Any:
    """The `nn.Linear` holding `module`'s base weight and bias (itself unless a LoRA layer)."""
    return module if type(module) is torch.nn.Linear else module.base_layer


def _bias(module: Any) -> torch.Tensor | None:
    bias = _base(module).bias
    return bias.detach() if bias is not None else None


def _sources(module: Any) -> list[torch.Tensor]:
    """The parameters `_weight` and `_bias` read."""
    if type(module) is torch.nn.Linear:
        return [p for p in (module.weight, module.bias) if p is not None]
    base = module.base_layer
    out = [p for p in (base.weight, base.bias) if p is not None]
    for adapter in _active_adapters(module):
        out += [module.lora_A[adapter].weight, module.lora_B[adapter].weight]
    return out


def _mode(module: Any) -> tuple[Any, ...]:
    """What besides parameters decides a LoRA layer's weight: its active adapters and their scaling."""
    if not _is_lora(module):
        return ()
    return tuple((a, float(module.scaling[a])) for a in _active_adapters(module))


def packable(model: Any) -> bool:
    """Whether every projection and the LM head is a plain `nn.Linear` on the CPU or a LoRA layer over
    one that can be merged (`_mergeable`), without a bias in the MLP and the LM head (Llama, Qwen2 and
    Qwen3 have none there)."""
    layers = _linears(model.model)
    modules = [m for layer in layers for m in layer] + [model.lm_head]
    if not all(_mergeable(m) for m in modules):
        return False
    return all(_bias(m) is None for m in [m for layer in layers for m in layer[4:]] + [model.lm_head])


def _signature(tensors: list[torch.Tensor]) -> tuple[tuple[int, int], ...]:
    return tuple((t.data_ptr(), t._version) for t in tensors)


class PackedWeights:
    """Prepacked, fused copies of a model's projections, kept equal to its parameters (`refresh`)."""

    def __init__(self, model: Any, form: Form | None = None) -> None:
        self.model = model
        self.form = form or default_form()
        self.layers: list[PackedLayer] = []
        self.lm_head = torch.empty(0)
        self._modules: list[int] = []
        self._modes: list[tuple[Any, ...]] = []
        self._sources: list[torch.Tensor] = []
        self._signature: tuple[tuple[int, int], ...] = ()
        self._stale = True
        self.refresh()

    def refresh(self) -> bool:
        """Repack if any source parameter (or a LoRA layer's active adapters) changed since the last
        pack. False when a projection can no longer be packed (a wrapper other than a mergeable LoRA
        layer was put in its place): the packed weights are then unusable."""
        linears = _linears(self.model.model)
        modules = [m for layer in linears for m in layer] + [self.model.lm_head]
        modes = [_mode(m) for m in modules]
        if [id(m) for m in modules] != self._modules or modes != self._modes:
            if not packable(self.model):
                return False
            self._modules, self._modes = [id(m) for m in modules], modes
            self._sources = [p for m in modules for p in _sources(m)]
            self._signature = ()
        signature = _signature(self._sources)  # a change of modes reset the signature above
        if signature != self._signature or self._stale:
            with torch.no_grad():
                silu = getattr(self.model.config, "hidden_act", None) in ("silu", "swish")
                self.layers = [_pack(layer, self.form, silu) for layer in linears]
                self.lm_head = prepack(_weight(self.model.lm_head), self.form)
            self._signature, self._stale = signature, False
        return True

    def mark_stale(self) -> None:
        """Repack at the next `refresh` whatever the version counters say (after `update_weights`:
        writes through `param.data` do not bump them)."""
        self._stale = True


def _pack(linears: list[Any], form: Form, silu: bool) -> PackedLayer:
    """One layer's packed projections; with `form` panels and a SiLU MLP, gate|up in pairs."""
    q, k, v, o, gate, up, down = linears

    def pack(*modules: Any) -> torch.Tensor:
        return prepack(torch.cat([_weight(m) for m in modules]), form)

    biases = [_bias(m) for m in (q, k, v)]
    qkv_bias = None
    if any(b is not None for b in biases):
        qkv_bias = torch.cat([b if b is not None else _base(m).weight.new_zeros(_base(m).out_features)
                              for b, m in zip(biases, (q, k, v), strict=True)])
    gate_up = torch.cat([_weight(gate), _weight(up)])
    pairs = form == "panels" and silu and cpu_kernels.packable(gate_up) and gate_up.shape[0] % (2 * cpu_kernels.LANES) == 0
    gate_up = cpu_kernels.pack_pairs(gate_up) if pairs else prepack(gate_up, form)
    return PackedLayer(pack(q, k, v), qkv_bias, pack(o), _bias(o), gate_up, pack(down), pairs)
