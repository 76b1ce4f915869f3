"""Packed CPU projections: equal to the module's own forward, and never stale after a weight change."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F

from posttrain.rollout import NativeEngine, NativeEngineConfig
from posttrain.rollout.engine import cpu_kernels
from posttrain.rollout.engine.packed import ONEDNN, PackedWeights, linear, mlp_inner, packable
from tests.rollout.conftest import ARCHS, full_logits, prompt, tiny_model

NO_CACHE = NativeEngineConfig(block_size=4, prefix_caching=False)  # so every call recomputes its prompt


def _max_error(engine: NativeEngine, model: Any, seed: int) -> float:
    ids, continuation = prompt(11, seed=seed), prompt(5, seed=seed + 100)
    got = engine.teacher_forced_logits(ids, continuation)  # [5, V]
    want = full_logits(model, ids + continuation)[len(ids) - 1 : -1]
    return (got - want).abs().max().item()


@pytest.mark.parametrize("arch", ARCHS)
def test_packed_forward_equals_the_modules_forward(arch: str) -> None:
    model = tiny_model(arch)
    engine = NativeEngine(model, NO_CACHE)
    assert engine.weights.packed is not None  # CPU, plain nn.Linear layers: the packed path runs
    assert _max_error(engine, model, seed=1) < 1e-4


def test_an_in_place_optimizer_step_is_seen_at_the_next_call() -> None:
    model = tiny_model("qwen2", seed=3)
    engine = NativeEngine(model, NO_CACHE)
    assert _max_error(engine, model, seed=2) < 1e-4
    packed = engine.weights.packed
    assert packed is not None
    before = packed.layers[0].qkv
    assert packed.refresh() and packed.layers[0].qkv is before  # nothing changed: no repack
    ids = prompt(16, seed=2)
    old_logits = full_logits(model, ids)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    model(torch.tensor([prompt(8)])).logits.logsumexp(-1).sum().backward()
    optimizer.step()  # in place, no update_weights call
    assert (full_logits(model, ids) - old_logits).abs().max().item() > 1e-2  # stale weights would show
    assert _max_error(engine, model, seed=2) < 1e-4
    assert packed.layers[0].qkv is not before


def test_writes_through_param_data_are_seen_after_update_weights() -> None:
    model = tiny_model("llama", seed=4)
    engine = NativeEngine(model, NO_CACHE)
    assert _max_error(engine, model, seed=3) < 1e-4
    with torch.no_grad():
        for p in model.parameters():
            p.data.mul_(1.1)  # bypasses the version counters the packed weights watch
    engine.update_weights(model.state_dict())
    assert _max_error(engine, model, seed=3) < 1e-4


class _Adapted(torch.nn.Linear):
    """A projection whose forward adds to what its weight computes (as a LoRA wrapper does)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x) + 0.5


def test_a_wrapper_injected_after_the_engine_was_built_runs_its_own_forward() -> None:
    model = tiny_model("qwen2", seed=5)
    engine = NativeEngine(model, NO_CACHE)
    assert engine.weights.packed is not None
    attn = model.model.layers[1].self_attn
    wrapped = _Adapted(attn.v_proj.in_features, attn.v_proj.out_features)
    wrapped.load_state_dict(attn.v_proj.state_dict())
    attn.v_proj = wrapped
    assert not packable(model)
    assert _max_error(engine, model, seed=4) < 1e-4  # the wrapper's +0.5 is in both
    assert engine.weights.packed is None


FORMS = ["plain", *(["onednn"] if ONEDNN else []), *(["panels"] if cpu_kernels.available() else [])]


@pytest.mark.parametrize("form", FORMS)
def test_packed_layers_apply_the_fused_weights(form: Any) -> None:
    model = tiny_model("qwen2", seed=6)
    packed = PackedWeights(model, form=form)
    assert packed.layers[0].qkv.dim() == (3 if form == "panels" else 2)
    attn, mlp = model.model.layers[0].self_attn, model.model.layers[0].mlp
    layer = packed.layers[0]
    x, residual = torch.randn(5, 64), torch.randn(5, 64)
    qkv = torch.cat([attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight])
    bias = torch.cat([attn.q_proj.bias, attn.k_proj.bias, attn.v_proj.bias])  # Qwen2 has q/k/v biases
    assert (linear(x, layer.qkv, layer.qkv_bias) - F.linear(x, qkv, bias)).abs().max().item() < 1e-5
    assert layer.gate_up_pairs == (form == "panels")  # SiLU and the product in the GEMM's epilogue
    inner = F.silu(F.linear(x, mlp.gate_proj.weight)) * F.linear(x, mlp.up_proj.weight)
    assert (mlp_inner(x, layer, mlp.act_fn) - inner).abs().max().item() < 1e-5
    if not layer.gate_up_pairs:
        gate_up = torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight])
        assert (linear(x, layer.gate_up) - F.linear(x, gate_up)).abs().max().item() < 1e-5
    down = linear(torch.randn(5, 128), layer.down, residual=residual)
    assert down.shape == (5, 64)
    out = linear(x, layer.o, residual=residual)
    assert (out - (residual + F.linear(x, attn.o_proj.weight))).abs().max().item() < 1e-5
    assert (linear(x, packed.lm_head) - model.lm_head(x)).abs().max().item() < 1e-5


@pytest.mark.parametrize("form", FORMS)
def test_each_form_engine_equals_the_modules(form: Any) -> None:
    model = tiny_model("llama", seed=7)
    engine = NativeEngine(model, NO_CACHE)
    engine.weights.packed = PackedWeights(model, form=form)
    assert _max_error(engine, model, seed=5) < 1e-4


def _lora(model: Any, dropout: float = 0.0) -> Any:
    from peft import LoraConfig, inject_adapter_in_model

    config = LoraConfig(r=4, lora_alpha=8, lora_dropout=dropout, target_modules="all-linear", init_lora_weights=False)
    return inject_adapter_in_model(config, model)


@pytest.mark.parametrize("arch", ARCHS)
def test_lora_layers_are_packed_merged_and_follow_each_adapter_step(arch: str) -> None:
    model = tiny_model(arch, seed=8)
    engine = NativeEngine(model, NO_CACHE)  # built before the adapters, as a run builds it
    _lora(model)  # random B as well as A: the adapters change the output from the start
    assert packable(model)
    assert _max_error(engine, model, seed=6) < 1e-4
    assert engine.weights.packed is not None  # merged, not dropped
    adapters = [p for n, p in model.named_parameters() if "lora_" in n]
    assert adapters
    optimizer = torch.optim.SGD(adapters, lr=0.05)
    model(torch.tensor([prompt(8)])).logits.logsumexp(-1).sum().backward()
    optimizer.step()  # only the adapters move, in place
    assert _max_error(engine, model, seed=6) < 1e-4


def test_disabling_the_adapters_repacks_the_base_weights() -> None:
    from peft.tuners.lora.layer import LoraLayer

    model = tiny_model("llama", seed=9)
    engine = NativeEngine(model, NO_CACHE)
    _lora(model)
    assert _max_error(engine, model, seed=7) < 1e-4
    layers = [m for m in model.modules() if isinstance(m, LoraLayer)]
    for layer in layers:
        layer.enable_adapters(False)
    assert _max_error(engine, model, seed=7) < 1e-4  # the base model alone, on both sides
    for layer in layers:
        layer.enable_adapters(True)
    assert _max_error(engine, model, seed=7) < 1e-4


def test_lora_with_dropout_keeps_the_modules_forward() -> None:
    model = tiny_model("qwen2", seed=10)
    _lora(model, dropout=0.1)
    assert not packable(model)  # its training-mode forward is not a merged weight
    model.eval()
    engine = NativeEngine(model, NO_CACHE)
    assert engine.weights.packed is None
    assert _max_error(engine, model, seed=8) < 1e-4
