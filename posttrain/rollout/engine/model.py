"""A Llama/Qwen2/Qwen3 forward over a paged KV cache, using a `transformers` model's own weights.

The weights are read from the HF module at every call (no copy), so a trainer that updates the same
module in place is seen immediately. The maths mirrors `transformers` op for op (RMSNorm in float32,
rotate-half RoPE; GQA; SwiGLU MLP; Qwen3's per-head q/k norms; biases where the config has them) so
greedy decoding matches `generate` token for token. RoPE cos/sin come from `rope.RotaryTables`: every
`rope_scaling` variant of `transformers` (linear, dynamic NTK, yarn with its attention factor, llama3,
longrope); the length-dependent ones (dynamic, longrope) as `transformers`' incremental decoding
computes them (`rope_keys`), without touching the HF module's cached frequencies.
One deliberate difference: on CPU, small-row projections are computed in the transposed form
(`project`), which rounds differently (about 1e-6) and runs faster.
Not supported: per-layer sliding windows of the HF model (Qwen2 `use_sliding_window`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

from posttrain.rollout.engine.packed import PackedWeights, linear, mlp_inner, packable
from posttrain.rollout.engine.rope import RotaryTables

SUPPORTED_MODEL_TYPES = ("llama", "qwen2", "qwen3")


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm exactly as `transformers` computes it (float32 statistics). In float32 that is torch's
    `F.rms_norm`: the same values bit for bit (tested), its elementwise steps dispatched from C++ (on
    CPU in torch 2.13 it is not one kernel; 20 against 22 us for `[32, 576]` in a hot loop)."""
    if x.dtype == torch.float32 and weight.dtype == torch.float32:
        return F.rms_norm(x, (x.shape[-1],), weight, eps)
    dtype = x.dtype
    x32 = x.to(torch.float32)
    x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
    return weight * x32.to(dtype)


# For 2 to this many rows a CPU projection computes `W @ x^T` rather than `x @ W^T` (F.linear): the
# former ran 2-4x faster at 2-4 rows and 1.2-1.6x at 8-64 in float32 on the CPUs measured; at one row
# the two tie and from about 128 rows F.linear is as fast (`posttrain bench rollout
# --workloads proj`; docs/rollout.md, "Decode projections").
_SMALL_PROJECTION_ROWS = 64


def project(linear: Any, x: torch.Tensor) -> torch.Tensor:
    """`linear(x)` for `x` `[N, in]`. Only a plain `nn.Linear` takes the `W @ x^T` form; any other
    module (a LoRA-wrapped projection, a quantised layer) is called as it is, so its forward applies."""
    small = x.device.type == "cpu" and 2 <= x.shape[0] <= _SMALL_PROJECTION_ROWS
    if not small or type(linear) is not torch.nn.Linear:
        return linear(x)
    out = torch.mm(linear.weight, x.t()).t()
    return (out + linear.bias if linear.bias is not None else out).contiguous()


def signed_sin(sin: torch.Tensor) -> torch.Tensor:
    """`sin` `[..., D]` with its first half negated, for `rotate`."""
    half = sin.shape[-1] // 2
    return torch.cat((-sin[..., :half], sin[..., half:]), dim=-1)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin_signed: torch.Tensor) -> torch.Tensor:
    """Rotate-half RoPE, `x * cos + rotate_half(x) * sin`, the same values bit for bit: `rotate_half(x)`
    is `x` rolled by half a head with its first half negated, and the negation moves onto the sine
    (`signed_sin`, once per step), so a rotation is a roll and three elementwise ops instead of a
    negation, a concatenation and three."""
    return x * cos + x.roll(x.shape[-1] // 2, -1) * sin_signed


class CausalLMWeights:
    """Views of a HF causal LM's modules plus the shapes the runner needs."""

    def __init__(self, model: Any) -> None:
        config = model.config
        if config.model_type not in SUPPORTED_MODEL_TYPES:
            raise ValueError(f"native engine supports {SUPPORTED_MODEL_TYPES}, got {config.model_type!r}; "
                             "use HFEngine for other architectures")
        self.model = model
        self.decoder = model.model
        self.num_layers = config.num_hidden_layers
        self.num_heads = config.num_attention_heads
        self.num_kv_heads = config.num_key_value_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        self.eps = config.rms_norm_eps
        self.has_qk_norm = config.model_type == "qwen3"
        first = next(model.parameters())
        self.dtype, self.device = first.dtype, first.device
        self.rotary = RotaryTables(model, self.dtype, self.device)
        self.rope_keys = self.rotary.keys
        self.packed = PackedWeights(model) if packable(model) else None
        """Fused, prepacked projection weights (CPU, plain `nn.Linear` layers or LoRA layers merged), else None."""

    def refresh(self) -> None:
        """Before each step: bring the packed weights up to date with the module's parameters, or drop
        them when a projection can no longer be packed (the modules are then called)."""
        if self.packed is not None and not self.packed.refresh():
            self.packed = None

    def mark_updated(self) -> None:
        """The module's weights were just loaded (`update_weights`): repack before the next step."""
        if self.packed is not None:
            self.packed.mark_stale()

    def rope(self, positions: torch.Tensor,
             lengths: Sequence[int] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and `signed_sin` `[N, D]` for `positions` `[N]` (what `qkv` takes); `lengths` are the
        tokens' `rope_length`s, needed only when `rope_keys` is not static (dynamic NTK, longrope)."""
        cos, sin = self.rotary.cos_sin(positions, lengths)
        return cos, signed_sin(sin)

    def embed(self, token_ids: torch.Tensor) -> torch.Tensor:
        return self.decoder.embed_tokens(token_ids)  # [N, E]

    def qkv(self, layer: int, x: torch.Tensor, cos: torch.Tensor,
            sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Normed, projected, rotated q `[N, H, D]`, k and v `[N, Hkv, D]` of layer `layer`; `cos`, `sin`
        as `rope` returns them (the sine signed)."""
        block = self.decoder.layers[layer]
        attn = block.self_attn
        h = rms_norm(x, block.input_layernorm.weight, self.eps)
        n, d, heads = x.shape[0], self.head_dim, self.num_heads
        cos, sin = cos[:, None, :], sin[:, None, :]  # [N, 1, D]
        if self.packed is not None:
            packed = self.packed.layers[layer]
            qkv = linear(h, packed.qkv, packed.qkv_bias)  # [N, (H+2Hkv)*D]
            split = (heads + self.num_kv_heads) * d
            qk, v = qkv[:, :split].view(n, -1, d), qkv[:, split:].view(n, -1, d)  # [N, H+Hkv, D], [N, Hkv, D]
            if not self.has_qk_norm:  # one rotation for the query and key heads together
                qk = rotate(qk, cos, sin)
                return qk[:, :heads], qk[:, heads:], v
            q, k = qk[:, :heads], qk[:, heads:]
        else:
            q = project(attn.q_proj, h).view(n, -1, d)
            k = project(attn.k_proj, h).view(n, -1, d)
            v = project(attn.v_proj, h).view(n, -1, d)
        if self.has_qk_norm:
            q = rms_norm(q, attn.q_norm.weight, self.eps)
            k = rms_norm(k, attn.k_norm.weight, self.eps)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        return q, k, v

    def finish_layer(self, layer: int, x: torch.Tensor, attn_out: torch.Tensor) -> torch.Tensor:
        """Output projection, residual, SwiGLU MLP, residual; `attn_out` is `[N, H*D]`."""
        block = self.decoder.layers[layer]
        mlp = block.mlp
        if self.packed is not None:  # residual adds folded into the GEMMs
            packed = self.packed.layers[layer]
            x = linear(attn_out, packed.o, packed.o_bias, residual=x)
            inner = mlp_inner(rms_norm(x, block.post_attention_layernorm.weight, self.eps), packed, mlp.act_fn)
            return linear(inner, packed.down, residual=x)
        x = x + project(block.self_attn.o_proj, attn_out)
        h = rms_norm(x, block.post_attention_layernorm.weight, self.eps)
        return x + project(mlp.down_proj, mlp.act_fn(project(mlp.gate_proj, h)) * project(mlp.up_proj, h))

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """Final norm and LM head: `[M, E]` -> float32 `[M, V]`."""
        h = rms_norm(x, self.decoder.norm.weight, self.eps)
        if self.packed is not None:
            return linear(h, self.packed.lm_head).float()
        return project(self.model.lm_head, h).float()


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """SDPA with an explicit mask (boolean or additive): q `[B, H, Tq, D]`, k/v `[B, Hkv, S, D]`, mask `[B, 1, Tq, S]`."""
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=q.shape[1] != k.shape[1])


# The CPU flash kernel behind SDPA, which also returns each query's log-sum-exp (SDPA does not).
CPU_FLASH_ATTENTION = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)
_CPU_FLASH = CPU_FLASH_ATTENTION


def can_attend_after_history(device: torch.device) -> bool:
    """Whether `attend_after_history` runs on `device` (CPU, where the kernel above exists)."""
    return device.type == "cpu" and _CPU_FLASH is not None


def attend_after_history(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, history: int) -> torch.Tensor:
    """Exact causal attention of a chunk that follows `history` cached positions, without a mask.

    q `[1, H, Tq, D]` are positions `history .. history+Tq-1`; k/v `[1, Hkv, history+Tq, D]` hold every
    position up to the chunk's last. Each query sees all of the history and the chunk's keys up to its
    own, so the two parts are computed separately (the history unmasked, with the query heads of a KV
    head folded into one query block; the chunk as a square causal block) and merged by their
    log-sum-exps. This equals one masked SDPA call up to rounding, without building or reading a
    `[Tq, history+Tq]` mask. CPU only (`can_attend_after_history`).
    """
    assert _CPU_FLASH is not None
    b, h, tq, d = q.shape
    hkv = k.shape[1]
    group = h // hkv
    k_new, v_new = k[:, :, history:], v[:, :, history:]
    if history == 0:
        return F.scaled_dot_product_attention(q, k_new, v_new, is_causal=True, enable_gqa=group > 1)
    if group > 1:
        k_new, v_new = k_new.repeat_interleave(group, 1), v_new.repeat_interleave(group, 1)
    out_new, lse_new = _CPU_FLASH(q, k_new, v_new, 0.0, True)  # [B, H, Tq, D], [B, H, Tq]
    out_old, lse_old = _CPU_FLASH(q.reshape(b, hkv, group * tq, d), k[:, :, :history], v[:, :, :history], 0.0, False)
    out_old, lse_old = out_old.reshape(b, h, tq, d), lse_old.reshape(b, h, tq)
    top = torch.maximum(lse_old, lse_new)
    w_old, w_new = (lse_old - top).exp_()[..., None], (lse_new - top).exp_()[..., None]
    return ((out_old * w_old + out_new * w_new) / (w_old + w_new)).to(q.dtype)
