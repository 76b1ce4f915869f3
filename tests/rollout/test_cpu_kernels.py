"""The engine's AVX-512 GEMM: products equal torch's, any thread count gives the same bits, and a
machine without the kernel falls back to oneDNN."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from posttrain.rollout.engine import cpu_kernels
from posttrain.rollout.engine.packed import ONEDNN, default_form

needs_kernel = pytest.mark.skipif(not cpu_kernels.available(), reason="no AVX-512 or no C compiler here")


@pytest.fixture
def fresh_library(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """`cpu_kernels` decides again (its load is cached per process), building into an empty cache."""
    monkeypatch.setenv("POSTTRAIN_CACHE", str(tmp_path))
    cpu_kernels._library.cache_clear()
    yield
    cpu_kernels._library.cache_clear()


@needs_kernel
@pytest.mark.parametrize("rows", [1, 5, 8, 9, 17, 32, 64, 300])
@pytest.mark.parametrize("width,depth", [(16, 1), (48, 33), (80, 576), (960, 576)])
def test_products_equal_torch_with_bias_and_residual(rows: int, width: int, depth: int) -> None:
    generator = torch.Generator().manual_seed(rows * 1000 + width + depth)
    weight = torch.randn(width, depth, generator=generator) / depth**0.5
    x = torch.randn(rows, depth, generator=generator)
    bias, residual = torch.randn(width, generator=generator), torch.randn(rows, width, generator=generator)
    packed = cpu_kernels.pack(weight)
    assert packed.shape == (width // 16, depth, 16)
    exact = x.double() @ weight.double().t()
    for b, r in [(None, None), (bias, None), (None, residual), (bias, residual)]:
        want = exact + (b.double() if b is not None else 0) + (r.double() if r is not None else 0)
        got = cpu_kernels.linear(x, packed, b, r)
        assert got.dtype == torch.float32 and got.shape == (rows, width)
        torch.testing.assert_close(got.double(), want, atol=2e-5, rtol=1e-5)


@needs_kernel
def test_thread_count_does_not_change_a_bit() -> None:
    """Each output is summed by one thread in k order, so 1 and 2 threads agree exactly."""
    weight, x = torch.randn(3072, 576), torch.randn(32, 576)
    packed = cpu_kernels.pack(weight)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = cpu_kernels.linear(x, packed)
        torch.set_num_threads(2)
        two = cpu_kernels.linear(x, packed)
    finally:
        torch.set_num_threads(before)
    assert torch.equal(one, two)


@needs_kernel
def test_strided_input_and_empty_batch() -> None:
    weight = torch.randn(48, 64)
    packed = cpu_kernels.pack(weight)
    wide = torch.randn(6, 128)
    torch.testing.assert_close(cpu_kernels.linear(wide[:, ::2], packed), wide[:, ::2] @ weight.t(), atol=1e-5, rtol=1e-5)
    assert cpu_kernels.linear(torch.randn(0, 64), packed).shape == (0, 48)
    with pytest.raises(ValueError, match="columns"):
        cpu_kernels.linear(torch.randn(2, 63), packed)


def test_packable_needs_float32_and_whole_panels() -> None:
    assert cpu_kernels.packable(torch.zeros(32, 7))
    assert not cpu_kernels.packable(torch.zeros(40, 7))  # 40 columns: not whole panels of 16
    assert not cpu_kernels.packable(torch.zeros(32, 7, dtype=torch.bfloat16))
    assert not cpu_kernels.packable(torch.zeros(32))


@needs_kernel
def test_built_once_into_the_cache(fresh_library: None, tmp_path: Path) -> None:
    assert cpu_kernels.available()
    built = list((tmp_path / "kernels").glob("cpu_kernels-*.so"))
    assert len(built) == 1
    stamp = built[0].stat().st_mtime_ns
    cpu_kernels._library.cache_clear()
    assert cpu_kernels.available()
    assert [p.stat().st_mtime_ns for p in (tmp_path / "kernels").glob("cpu_kernels-*.so")] == [stamp]


@pytest.mark.parametrize("setting", [{"POSTTRAIN_CPU_KERNELS": "0"}, {"CC": "/nonexistent/cc"}, {"CC": "false"}])
def test_without_the_kernel_projections_use_onednn(fresh_library: None, monkeypatch: pytest.MonkeyPatch,
                                                   setting: dict[str, str]) -> None:  # fmt: skip
    for name, value in setting.items():
        monkeypatch.setenv(name, value)
    assert not cpu_kernels.available()
    assert default_form() == ("onednn" if ONEDNN else "plain")


@needs_kernel
@pytest.mark.parametrize("vocab", [1, 15, 256, 49152, 5 * 256 + 7])
def test_block_sums_are_the_float64_sums_of_each_block(vocab: int) -> None:
    weights = torch.rand(5, vocab, generator=torch.Generator().manual_seed(vocab))
    got = cpu_kernels.block_sums(weights, 256)
    blocks = -(-vocab // 256)
    padded = torch.nn.functional.pad(weights.double(), (0, blocks * 256 - vocab))
    torch.testing.assert_close(got, padded.view(5, blocks, 256).sum(-1), atol=0, rtol=1e-14)


@needs_kernel
@pytest.mark.parametrize("rows", [1, 7, 32, 100])
def test_swiglu_is_silu_of_the_gate_times_up(rows: int) -> None:
    generator = torch.Generator().manual_seed(rows)
    inter, depth = 64, 48
    gate, up = torch.randn(inter, depth, generator=generator), torch.randn(inter, depth, generator=generator)
    x = torch.randn(rows, depth, generator=generator) * 4  # gates up to about +-100: both tails of SiLU
    pairs = cpu_kernels.pack_pairs(torch.cat([gate, up]))
    got = cpu_kernels.swiglu(x, pairs)
    g, u = x.double() @ gate.double().t(), x.double() @ up.double().t()
    assert float(g.abs().max()) > 60
    want = torch.nn.functional.silu(g) * u
    torch.testing.assert_close(got.double(), want, atol=1e-4, rtol=1e-5)
    assert not torch.isnan(got).any()
