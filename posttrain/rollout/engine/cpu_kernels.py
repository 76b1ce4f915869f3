"""The native engine's own CPU kernels (`cpu_kernels.c`, AVX-512, float32), built on first use: the
projections' GEMM (`linear`), the same GEMM with SwiGLU's SiLU and product in its epilogue
(`swiglu`), and the sampler's float64 block sums (`block_sums`).

Why: a decode step multiplies a few dozen rows by every weight matrix, so each product streams its
weight from memory once and does little work per weight; oneDNN's prepacked linear reached under
half the two cores' multiply-add rate there (136 of about 320 GFLOP/s). The kernel here keeps a block of rows times three 16-column
panels in registers through the whole sum and prefetches the next panels while it runs. Over all of
SmolLM2-135M's projections it ran 1.34-1.73x faster than oneDNN's prepacked linear from 1 to 64 rows,
1.21x at 128 and 1.06x at 256 (`posttrain bench rollout --models smollm2 --workloads proj`;
docs/rollout.md, "Packed projections").

How: the C source is compiled with the system C compiler (`$CC`, else `cc` or `gcc`, which `make`
installs; `-O3 -march=native -fopenmp`) into `$POSTTRAIN_CACHE/kernels/`, keyed by the source, the
flags, the compiler and this CPU's model and feature flags, and loaded with ctypes. OpenMP resolves to the `libgomp` torch has already loaded, so
the kernel's threads are torch's (`torch.get_num_threads()` of them). Where there is no compiler, no
AVX-512 or the build fails, `available()` is False and the engine keeps oneDNN; the reason is logged
once. `POSTTRAIN_CPU_KERNELS=0` turns the kernel off.

Guarantees: `linear` equals `x @ W^T (+ bias) (+ residual)` up to float32 rounding: each output is
the sum over k in order, by fused multiply-adds, then the bias, then the residual (tested against
torch for row counts from 1 to several hundred, odd widths, with and without bias and residual), and
one thread computes each output, so the thread count changes no bit.
Not here: other dtypes (float32 only), output widths that are not a multiple of 16 (`packable` says).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import logging
import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path

import torch

from posttrain.config import cache_root

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_suffix(".c")
FLAGS = ("-O3", "-march=native", "-fopenmp", "-shared", "-fPIC", "-std=c11")
LANES = 16
"""Output columns per panel: `packable` widths are multiples of it."""


@functools.cache
def _library() -> ctypes.CDLL | None:
    """The compiled kernel, or None (and why, logged once) where it cannot be had."""
    if os.environ.get("POSTTRAIN_CPU_KERNELS", "1") == "0":
        return None
    if platform.machine() not in ("x86_64", "AMD64") or "avx512f" not in _cpu_flags():
        log.info("cpu_kernels: no AVX-512 on this CPU; projections use oneDNN")
        return None
    named = os.environ.get("CC")
    compiler = shutil.which(named) if named else shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        log.warning("cpu_kernels: no C compiler (%s) found; projections use oneDNN", named or "cc, gcc")
        return None
    try:
        path = _build(compiler)
        lib = ctypes.CDLL(str(path))
    except (OSError, subprocess.CalledProcessError) as error:
        log.warning("cpu_kernels: build or load failed (%s); projections use oneDNN", error)
        return None
    pointer, size = ctypes.c_void_p, ctypes.c_long
    lib.gemm.argtypes = [pointer, size, size, pointer, size, pointer, pointer, pointer, ctypes.c_int]
    lib.gemm.restype = None
    lib.pack.argtypes = [pointer, size, size, pointer, ctypes.c_int]
    lib.pack.restype = None
    lib.gemm_swiglu.argtypes = [pointer, size, size, pointer, size, pointer, ctypes.c_int]
    lib.gemm_swiglu.restype = None
    lib.block_sums.argtypes = [pointer, size, size, size, pointer, ctypes.c_int]
    lib.block_sums.restype = None
    return lib


def _cpu_flags() -> str:
    """This CPU's model name and feature flags (Linux), else the platform's processor string."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.processor()
    wanted = [line for line in lines if line.startswith(("model name", "flags"))]
    return "\n".join(dict.fromkeys(wanted))


def _build(compiler: str) -> Path:
    """The shared library for this source, flags, compiler and CPU, compiled unless already cached."""
    version = subprocess.run([compiler, "--version"], capture_output=True, text=True, check=False).stdout
    key = hashlib.sha256("\0".join([SOURCE.read_text(), *FLAGS, version, _cpu_flags()]).encode()).hexdigest()
    directory = cache_root() / "kernels"
    path = directory / f"cpu_kernels-{key[:16]}.so"
    if path.exists():
        return path
    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=directory) as scratch:  # built aside, then renamed into place
        built = Path(scratch) / path.name
        subprocess.run([compiler, *FLAGS, "-o", str(built), str(SOURCE)], check=True, capture_output=True)
        os.replace(built, path)
    return path


def available() -> bool:
    """Whether the kernel is built and loaded (AVX-512, a C compiler, not turned off)."""
    return _library() is not None


def packable(weight: torch.Tensor) -> bool:
    """Whether `pack` takes `weight`: a float32 `[out, in]` CPU matrix, `out` a multiple of 16."""
    return (weight.dim() == 2 and weight.dtype == torch.float32 and weight.device.type == "cpu"
            and weight.shape[0] % LANES == 0 and weight.shape[0] > 0)  # fmt: skip


def pack(weight: torch.Tensor) -> torch.Tensor:
    """`weight` `[N, K]` in panels `[N / 16, K, 16]` (`linear` takes it). Requires `available()`."""
    lib = _library()
    assert lib is not None and packable(weight)
    weight = weight.detach().contiguous()
    out = torch.empty(weight.shape[0] // LANES, weight.shape[1], LANES)
    lib.pack(weight.data_ptr(), weight.shape[0], weight.shape[1], out.data_ptr(), torch.get_num_threads())
    return out


def linear(x: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None = None,
           residual: torch.Tensor | None = None) -> torch.Tensor:
    """`x @ W^T (+ bias) (+ residual)` for float32 `x` `[M, K]` and `packed` from `pack`: `[M, N]`."""
    lib = _library()
    assert lib is not None
    rows, width = x.shape[0], packed.shape[0] * LANES
    if x.shape[1] != packed.shape[1]:
        raise ValueError(f"x has {x.shape[1]} columns, the weight {packed.shape[1]}")
    x = x.contiguous()
    out = torch.empty(rows, width)
    if rows == 0:
        return out
    bias = bias.contiguous() if bias is not None else None
    residual = residual.contiguous() if residual is not None else None
    lib.gemm(x.data_ptr(), rows, x.shape[1], packed.data_ptr(), width,
             bias.data_ptr() if bias is not None else None, residual.data_ptr() if residual is not None else None,
             out.data_ptr(), torch.get_num_threads())  # fmt: skip
    return out


def pack_pairs(weight: torch.Tensor) -> torch.Tensor:
    """A gate|up weight `[2I, K]` (gate rows first) in panels with the gate's and the up projection's
    alternating (`swiglu` takes it); `I` a multiple of 16."""
    packed = pack(weight)  # [2I/16, K, 16]: the gate's panels, then the up projection's
    half = packed.shape[0] // 2
    return torch.stack([packed[:half], packed[half:]], 1).reshape(packed.shape)


def swiglu(x: torch.Tensor, pairs: torch.Tensor) -> torch.Tensor:
    """`silu(x Wg^T) * (x Wu^T)` `[M, I]` for float32 `x` `[M, K]` and `pairs` from `pack_pairs`, in
    one pass: each pair of panels' sums go through SiLU and the product in registers. SiLU is `g / (1 +
    exp(-g))` with the kernel's own `exp` (within 1 ulp of the correctly rounded value)."""
    lib = _library()
    assert lib is not None
    if x.shape[1] != pairs.shape[1]:
        raise ValueError(f"x has {x.shape[1]} columns, the weight {pairs.shape[1]}")
    width = pairs.shape[0] * LANES
    x = x.contiguous()
    out = torch.empty(x.shape[0], width // 2)
    if x.shape[0]:
        lib.gemm_swiglu(x.data_ptr(), x.shape[0], x.shape[1], pairs.data_ptr(), width, out.data_ptr(),
                        torch.get_num_threads())  # fmt: skip
    return out


def block_sums(weights: torch.Tensor, block: int) -> torch.Tensor:
    """Per row of float32 `weights` `[R, V]`, the float64 sums of its blocks of `block` entries (the last
    block may be shorter): `[R, ceil(V / block)]`, as `weights.view(R, -1, block).sum(-1,
    dtype=torch.float64)` up to the order of float64 additions, without a float64 copy of `weights`."""
    lib = _library()
    assert lib is not None and weights.dtype == torch.float32 and weights.dim() == 2
    weights = weights.contiguous()
    rows, vocab = weights.shape
    out = torch.empty(rows, -(-vocab // block), dtype=torch.float64)
    lib.block_sums(weights.data_ptr(), rows, vocab, block, out.data_ptr(), torch.get_num_threads())
    return out
