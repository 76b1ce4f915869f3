"""The runner's projections equal `nn.Linear` on the module's own weights, whichever form they take."""

from __future__ import annotations

import pytest
import torch

from posttrain.rollout.engine import model as native_model
from posttrain.rollout.engine.model import project


@pytest.mark.parametrize("rows", [1, 2, 4, 31, 64, 65, 300])
@pytest.mark.parametrize("bias", [False, True])
def test_projection_equals_linear(rows: int, bias: bool) -> None:
    torch.manual_seed(rows)
    linear = torch.nn.Linear(48, 80, bias=bias)
    x = torch.randn(rows, 48)
    got = project(linear, x)
    assert got.shape == (rows, 80) and got.is_contiguous()
    assert (got - linear(x)).abs().max().item() < 1e-5


def test_projection_sees_in_place_weight_updates() -> None:
    """No copy of the weights is kept: an optimizer step on the module is seen at the next call."""
    linear = torch.nn.Linear(16, 16)
    x = torch.randn(3, 16)
    before = project(linear, x)
    with torch.no_grad():
        linear.weight.add_(1.0)
    assert (project(linear, x) - before).abs().min().item() > 0
    assert (project(linear, x) - linear(x)).abs().max().item() < 1e-5


@pytest.mark.parametrize("rows", [1, native_model._SMALL_PROJECTION_ROWS + 1])
def test_one_row_and_large_inputs_use_linear_itself(rows: int) -> None:
    linear = torch.nn.Linear(8, 8)
    x = torch.randn(rows, 8)
    assert torch.equal(project(linear, x), torch.nn.functional.linear(x, linear.weight, linear.bias))


class _Adapted(torch.nn.Linear):
    """A projection whose forward adds to what its weight computes (as a LoRA wrapper does)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x) + 1.0


@pytest.mark.parametrize("rows", [1, 4, 300])
def test_modules_other_than_plain_linear_run_their_own_forward(rows: int) -> None:
    layer = _Adapted(8, 8)
    x = torch.randn(rows, 8)
    assert torch.equal(project(layer, x), layer(x))


@pytest.mark.parametrize("scale", [1e-3, 1.0, 300.0])
def test_fused_rms_norm_equals_the_transformers_formula_bit_for_bit(scale: float) -> None:
    """The float32 fast path of `rms_norm` (torch's `F.rms_norm`) gives exactly the values of the
    formula `transformers` uses, at small, unit and large activations."""
    from posttrain.rollout.engine.model import rms_norm

    gen = torch.Generator().manual_seed(int(scale * 1000))
    for rows, width in ((1, 576), (32, 576), (7, 896), (800, 64)):
        x = torch.randn(rows, width, generator=gen) * scale
        weight = torch.randn(width, generator=gen)
        x32 = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5)
        assert torch.equal(rms_norm(x, weight, 1e-5), weight * x32)


def test_rotation_by_roll_equals_rotate_half_bit_for_bit() -> None:
    """`rotate` (a roll, with the sign on the sine) gives exactly `x * cos + rotate_half(x) * sin`, the
    formula `transformers` applies, for query and key shaped inputs at real positions."""
    from posttrain.rollout.engine.model import rotate, signed_sin

    def rotate_half(x: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        return torch.cat((-x[..., half:], x[..., :half]), dim=-1)

    gen = torch.Generator().manual_seed(0)
    for rows, heads, dim in ((1, 9, 64), (32, 12, 64), (300, 2, 128), (5, 4, 16)):
        x = torch.randn(rows, heads, dim, generator=gen) * 3
        positions = torch.randint(0, 40_000, (rows,), generator=gen).float()
        inv_freq = 1.0 / 10_000 ** (torch.arange(0, dim, 2).float() / dim)
        angles = positions[:, None] * inv_freq
        emb = torch.cat((angles, angles), -1)
        cos, sin = emb.cos()[:, None], emb.sin()[:, None]
        assert torch.equal(rotate(x, cos, signed_sin(sin)), x * cos + rotate_half(x) * sin)
