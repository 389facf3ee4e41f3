"""Where RLX 0.2.19's CUDA backend differs from its CPU backend, how rlx-torch-import handles each,
and a probe per row that runs the raw op on the GPU (`rlx-torch-import defects --device cuda`).

The bundle is one graph for every device (it is verified on the CPU and may be re-verified on CUDA
with `verify --device cuda`), so these are not graph rewrites in `lower/rlx/workarounds.py`: each is
handled where the device is chosen, in the Rust core (`src/device.rs`): a refusal naming the node or
input (`DeviceError`, exit 7), or an RLX setting put in effect for every CUDA compile. Found by
reading rlx-cuda 0.2.19 (`arena.rs`, `backend/helpers.rs`, `config.rs`) and by the static probe of
every op sample (`scripts/probe_cuda_kernels.py`, no GPU needed); each probe confirms its row on a GPU.
Rows are written into docs/rlx-defects.md by `make docs`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from ... import _core
from .harness import run_raw

# The core's switch for the probes: skip the device checks that would refuse the raw graph (src/device.rs).
_RAW_DEVICE = _core.PROBE_RAW_DEVICE_ENV


@contextmanager
def _raw(settings: dict[str, str] | None = None) -> Iterator[None]:
    """Run a probe with the core's device refusals off and RLX's CUDA `settings` as given."""
    saved = {k: os.environ.get(k) for k in [_RAW_DEVICE, *(settings or {})]}
    os.environ[_RAW_DEVICE] = "1"
    for key, value in (settings or {}).items():
        os.environ[key] = value  # the core keeps the environment's value over its strict default
        _core.set_rlx_env(key, value)
    try:
        yield
    finally:
        for key, old in saved.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old
            if key.startswith("RLX_") and key != _RAW_DEVICE:
                _core.set_rlx_env(key, old)


def _failed(e: Exception) -> str:
    return f"RLX failed: {str(e).splitlines()[0][:160]}"


def _probe_float64() -> str | None:
    x = np.array([1.0 + 2.0**-40, 3.0], np.float64)
    try:
        with _raw():
            got = run_raw({"Binary": "Sub"}, [(x, "F64"), (np.ones(2), "F64")], (2,), "F64", device="cuda")
    except (RuntimeError, ValueError) as e:
        return _failed(e)
    want = x - 1.0
    return None if np.array_equal(got, want) else f"1 + 2**-40 - 1 gives {got[0]!r} (float64: {want[0]!r})"


def _probe_integers() -> str | None:
    x = np.array([2**24 + 1, 123_456_789, -5], np.int64)
    try:
        with _raw():
            got = run_raw({"Binary": "Add"}, [(x, "I64"), (np.zeros(3, np.int64), "I64")], (3,), "I64", device="cuda")
    except (RuntimeError, ValueError) as e:
        return _failed(e)
    return None if np.array_equal(got, x) else f"x + 0 gives {got.tolist()} for x = {x.tolist()}"


def _relative_error(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.max(np.abs(got - want)) / np.max(np.abs(want)))


def _probe_tf32() -> str | None:
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((128, 512)).astype(np.float32), rng.standard_normal((512, 128)).astype(np.float32)
    want = a.astype(np.float64) @ b.astype(np.float64)
    try:
        with _raw({"RLX_CUDA_PARITY": "0"}):
            got = run_raw("MatMul", [(a, "F32"), (b, "F32")], (128, 128), "F32", device="cuda")
    except (RuntimeError, ValueError) as e:
        return _failed(e)
    err = _relative_error(got.astype(np.float64), want)
    return f"float32 MatMul off by {err:.2g} of its largest value (strict float32: ~1e-6)" if err > 1e-5 else None


def _attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float) -> np.ndarray:
    s = q.astype(np.float64) @ k.astype(np.float64).transpose(0, 2, 1) * scale
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v.astype(np.float64)


def _probe_attention() -> str | None:
    rng = np.random.default_rng(4)
    q, k, v = (rng.standard_normal((96, 128, 64)).astype(np.float32) for _ in range(3))
    op = {
        "Attention": {
            "num_heads": 1,
            "head_dim": 64,
            "v_head_dim": None,
            "mask_kind": "None",
            "score_scale": 0.125,
            "attn_logit_softcap": None,
        }
    }
    try:
        with _raw({"RLX_CUDA_ATTENTION": "auto"}):
            got = run_raw(op, [(q, "F32"), (k, "F32"), (v, "F32")], q.shape, "F32", device="cuda")
    except (RuntimeError, ValueError) as e:
        return _failed(e)
    err = _relative_error(got.astype(np.float64), _attention(q, k, v, 0.125))
    return f"float32 Attention off by {err:.2g} of its largest value (strict float32: ~1e-6)" if err > 1e-5 else None


@dataclass(frozen=True)
class CudaDefect:
    """One way RLX's CUDA backend differs from its CPU backend; `probe()` says how (on a GPU), or None."""

    key: str
    what: str
    handling: str
    probe: Callable[[], str | None]


CUDA_DEFECTS: tuple[CudaDefect, ...] = (
    CudaDefect(
        "cuda-float64",
        "every value is stored in a float32 arena (rlx-cuda `arena.rs`): float64 inputs, weights, constants and "
        "results are computed in float32, including the float64 routes of CPU workarounds (integer pooling, "
        "integer activations, exact scatter-add)",
        "a graph with any float64 node is refused for cuda, naming the node (`device::check_graph`); the static "
        "probe finds it in 121 of 934 op-sample graphs, the float64 samples and integer routes through float64",
        _probe_float64,
    ),
    CudaDefect(
        "cuda-integers",
        "integer inputs, parameters and constants are widened to float32 on upload and read back with `as`, "
        "so integers float32 does not hold exactly (most of those past 2**24 in magnitude) change",
        "such an integer constant refuses the graph, such an input or parameter is refused when it is bound "
        "(`device::check_graph` / `check_value`), naming it; integers computed inside the graph past 2**24 are "
        "caught by parity (4 op-sample graphs hold such constants)",
        _probe_integers,
    ),
    CudaDefect(
        "cuda-tf32",
        "float32 GEMM runs in TF32 by default (cuBLASLt `CUBLAS_COMPUTE_32F_FAST_TF32`; 10-bit mantissa "
        "products), outside the float32 budget on real models (1.6e-4 to 1.2e-3 on five models on an H200, "
        "as reported in issue 14; not measured here yet)",
        "`RLX_CUDA_PARITY=1` for every CUDA compile unless the environment sets it: full float32 GEMM (RLX's "
        "own tiled kernel), FMA convolution restricted to GEMM algorithms (docs/design.md, decision ad)",
        _probe_tf32,
    ),
    CudaDefect(
        "cuda-attention-wmma",
        "the fused Attention kernel switches to a tensor-core variant (WMMA; `attention_wmma.cu` casts Q, K, V and "
        "the probabilities to half on load) when batch x heads x queries >= 12288 and head_dim <= 64",
        "`RLX_CUDA_ATTENTION=scalar` for every CUDA compile unless the environment sets it",
        _probe_attention,
    ),
)


def main() -> int:
    """Run every CUDA probe on the GPU; print which differences are still there (exit 1 when one is gone)."""
    from ...devices import check_device

    info = check_device("cuda")  # DeviceError (exit 7) when the build or machine has no CUDA
    print(f"RLX {_core.rlx_version()} on {info.description}")
    gone = 0
    for d in CUDA_DEFECTS:
        found = d.probe()
        gone += found is None
        print(f"{'present' if found else 'GONE   '}  {d.key:22s} {found or 'no longer needed: ' + d.handling}")
    return 1 if gone else 0
