"""Discrete Fourier transforms: the three core ATen FFT ops every `torch.fft.*` function, `stft` and `istft`
decompose to (`_fft_c2c`, `_fft_r2c`, `_fft_c2r`), on RLX's `Fft` op.

Complex values are carried as float pairs, shape S + [2] (`lower/complexes.py`). RLX's `Fft` transforms the
last axis of a float tensor laid out as one 2N block per row, [re_0..re_{N-1}, im_0..im_{N-1}]; each axis
of `dim` is moved there (a transpose to [..., 2, N], a reshape to [..., 2N]), transformed unnormalized, and
moved back. The normalization is one multiply at the end: `normalization` 0 none, 1 by 1/sqrt(n), 2 by 1/n,
n the product of the transformed sizes (torch's `fft_norm_mode`, aten/src/ATen/native/SpectralOpsUtils.h).
docs/design.md (az) records the choice of RLX's FFT and what was measured.
"""

from __future__ import annotations

import math

import numpy as np

from ...dtypes import complex_part
from ..builder import Builder
from ..call import Call, Value, norm_axis
from ..complexes import ComplexValue, known_parts, parts
from ..registry import lowers

# RLX's FFT algorithm (`rlx_ir::fft::FftAlgo` serde form): pocketfft's passes as SciPy/torch build them
# (`FftAlgo::SCIPY`), measured against RLX's "Native" (radix-2/4, Bluestein) and "dft" (a matmul by the DFT
# matrix, `_transform`): as accurate as torch's own FFT and the fastest at other lengths; docs/design.md (az).
ALGO: object = {"PocketFft": {"contraction": "Clang", "twiddles": "Platform"}}


# The pair axis (real, imaginary) in a layout's list of torch axes.
PAIR = -1


def _transform(b: Builder, block: Value, inverse: bool) -> Value:
    """Unnormalized 1-D DFT of every row of `block` (last axis 2n: [re_0..re_{n-1}, im_0..im_{n-1}])."""
    n = block.dims[-1] // 2
    if ALGO == "dft":  # measured alternative (docs/design.md (az)): one matmul by the 2n x 2n DFT matrix
        return b.matmul(block, b.const(_dft_matrix(n, inverse), block.dtype))
    op = {"Fft": {"inverse": inverse, "norm": "Backward", "algo": ALGO}}
    return b.emit(op, [block], block.dims, block.dtype)


def _c2c(
    b: Builder, x: Value | None, axes: list[int], inverse: bool, parts: tuple[Value, Value | None] | None = None
) -> Value:
    """Unnormalized DFT over torch `axes` of carried complex `x` (dims S + [2]), or of the complex value with
    parts `parts` (imaginary None: zero); the carried result. Each axis in turn is moved last with the pair
    axis just before it (one transpose) and its rows of 2n transformed; one transpose puts S + [2] back.
    Parts known from `complexes.pair` are moved as two real tensors and joined into rows directly."""
    if not axes:
        assert x is not None
        return x
    parts = parts or (known_parts(b, x) if x is not None else None)
    rank = len(parts[0].dims) if parts else x.rank - 1  # type: ignore[union-attr]
    first = axes[0]
    order = [a for a in range(rank) if a != first] + [first]  # the torch axis at each place of the rows
    if parts:
        re = b.transpose(parts[0], order)
        im = b.transpose(parts[1], order) if parts[1] is not None else b.expand(b.const(0, re.dtype), re.dims)
        rows = b.emit({"Concat": {"axis": rank - 1}}, [re, im], (*re.dims[:-1], 2 * re.dims[-1]), re.dtype)
    else:
        assert x is not None
        moved = b.transpose(x, [*order[:-1], rank, first])
        rows = b.reshape(moved, (*moved.dims[:-2], 2 * moved.dims[-1]))
    rows = _transform(b, rows, inverse)
    for axis in [*axes[1:], None]:
        now = [*order[:-1], PAIR, order[-1]]
        cur = b.reshape(rows, (*rows.dims[:-1], 2, rows.dims[-1] // 2))
        if axis is None:  # back to S + [2]
            return b.transpose(cur, [now.index(t) for t in [*range(rank), PAIR]])
        order = [a for a in order if a != axis] + [axis]
        moved = b.transpose(cur, [now.index(t) for t in [*order[:-1], PAIR, axis]])
        rows = _transform(b, b.reshape(moved, (*moved.dims[:-2], 2 * moved.dims[-1])), inverse)
    raise AssertionError("unreachable")


def _dft_matrix(n: int, inverse: bool) -> np.ndarray:
    """[re | im] @ M = the DFT of one 2n block: M = [[C, sS], [-sS, C]], C = cos(2 pi jk/n), S = sin(...),
    s = -1 forward, +1 inverse (angles reduced mod n exactly before the float64 cos/sin)."""
    jk = np.outer(np.arange(n), np.arange(n)) % n
    angle = 2 * np.pi * jk / n
    c, s = np.cos(angle), np.sin(angle) * (1 if inverse else -1)
    return np.block([[c, s], [-s, c]])


def _normalize(b: Builder, x: Value, normalization: int, n: int) -> Value:
    """Scale by torch's `fft_norm_mode`: 0 none, 1 by 1/sqrt(n), 2 by 1/n."""
    if normalization == 0:
        return x
    scale = 1 / math.sqrt(n) if normalization == 1 else 1 / n
    return b.binary("Mul", x, b.const(scale, x.dtype))


def _axes(call: Call, rank: int) -> list[int]:
    return [norm_axis(int(d), rank) for d in call["dim"]]


def _check_norm(call: Call) -> str | None:
    mode = call.get("normalization", 0)
    return None if mode in (0, 1, 2) else f"normalization={mode!r} is not one of torch's modes 0, 1, 2"


@lowers("aten._fft_c2c.default", "prims.fft_c2c.default", check=_check_norm, kind="reduction")
def fft_c2c(b: Builder, call: Call) -> Value:
    """Complex-to-complex DFT over `dim` (forward: exp(-2 pi i nk/N), else exp(+...)), normalized (prims: not)."""
    x = call.tensor("self")
    assert isinstance(x, ComplexValue)
    axes = _axes(call, len(x.shape))
    y = _c2c(b, x, axes, inverse=not call["forward"])
    return _normalize(b, y, call.get("normalization", 0), math.prod(x.shape[a] for a in axes))


@lowers("aten._fft_r2c.default", "prims.fft_r2c.default", check=_check_norm, kind="reduction")
def fft_r2c(b: Builder, call: Call) -> Value:
    """Real-to-complex forward DFT over `dim`, normalized; `onesided` keeps the first N//2 + 1 bins of the
    last axis of `dim` (the rest are conjugates of those)."""
    x = call.tensor("self")
    out = call.out_dtype
    axes = _axes(call, x.rank)
    y = _c2c(b, None, axes, inverse=False, parts=(b.cast(x, complex_part(out)), None))
    y = _normalize(b, y, call.get("normalization", 0), math.prod(x.dims[a] for a in axes))
    if call.get("onesided", True):
        y = b.narrow(y, axes[-1], 0, x.dims[axes[-1]] // 2 + 1)
    return y


def _check_c2r(call: Call) -> str | None:
    reason = _check_norm(call)
    if reason:
        return reason
    x = call.tensor("self")
    rank = x.rank - 1 if isinstance(x, ComplexValue) else x.rank
    last = norm_axis(int(call["dim"][-1]), rank)
    size, n = x.dims[last], int(call["last_dim_size"])
    if size < n // 2 + 1:  # torch's kernel takes n // 2 + 1 or n bins (then reads the first n // 2 + 1)
        return f"last_dim_size={n} needs {n // 2 + 1} input bins on dim {last}, the input has {size}"
    return None


@lowers("aten._fft_c2r.default", "prims.fft_c2r.default", check=_check_c2r, kind="reduction")
def fft_c2r(b: Builder, call: Call) -> Value:
    """Complex-to-real inverse DFT over `dim` of a one-sided spectrum (bins past n // 2 are not read): the
    other axes inverse-transformed in full, the last axis completed by Hermitian symmetry (bin k > n/2 is
    conj(bin n - k)) to
    `last_dim_size` = n bins, inverse-transformed, real part (so the imaginary parts of bin 0 and, for
    even n, bin n/2 are ignored, as pocketfft's c2r ignores them); normalized over the output sizes."""
    x = call.tensor("self")
    assert isinstance(x, ComplexValue)
    axes = _axes(call, len(x.shape))
    last, n = axes[-1], int(call["last_dim_size"])
    y = _c2c(b, x, axes[:-1], inverse=True)
    index = np.array([*range(n // 2 + 1), *(n - k for k in range(n // 2 + 1, n))], dtype=np.int64)
    dims = list(y.dims)
    dims[last] = n
    full = b.emit({"Gather": {"axis": last}}, [y, b.const(index, "int64")], dims, y.dtype)
    sign_dims = [1] * y.rank
    sign_dims[last], sign_dims[-1] = n, 2
    sign = np.ones(sign_dims[last] * 2, dtype=np.float64).reshape(n, 2)
    sign[n // 2 + 1 :, 1] = -1  # the completed bins are conjugates
    full = b.binary("Mul", full, b.const(sign.reshape(sign_dims), y.dtype))
    z = _c2c(b, ComplexValue(full.id, full.dims, full.dtype, x.complex), [last], inverse=True)
    re, _ = parts(b, ComplexValue(z.id, z.dims, z.dtype, x.complex))
    size = math.prod(x.shape[a] for a in axes[:-1]) * n
    return b.cast(_normalize(b, re, call.get("normalization", 0), size), call.out_dtype)
