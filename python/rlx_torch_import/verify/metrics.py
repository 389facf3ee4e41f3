"""Per-node metrics: one RLX value's errors against PyTorch's (`measure`), and the local and cumulative
verdicts drawn from them (`local_error`, `cumulative_error`; `verify/nodes.py` explains both).

PyTorch's value is prepared once (`Expected`) and measured against any number of RLX values (the
local and the cumulative one): flat in the working precision (float32 for the float32 and half
dtypes), cut into `CHUNK`-element pieces that stay in the CPU cache, each piece's magnitudes kept.
A piece where RLX's value is bit-equal costs one subtraction; the metrics that need more (ULP,
relative error, cosine) are computed only on pieces that differ, the squared norm of PyTorch's
piece (for the cosine) only when needed and only once. Results are those of the element-wise
formulas in `_measure_float`, which also takes every value holding NaN or infinity and float64
values (working precision float64, whose products could overflow without scaling).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..budgets import budget_for
from ..dtypes import RECORDS
from ..lower.registry import VALUE_EXACT_KINDS
from .bitexact import bit_differences
from .report import NodeError

_EPS = {r.name: r.eps for r in RECORDS.values() if r.eps is not None}

# Elements per piece: 64 Ki float32 values (256 KiB), so a piece and its temporaries stay in cache.
CHUNK = 1 << 16

# How much coarser than float32 a half dtype's ULP is (its values are measured in float32).
_ULP_FACTOR = {"bfloat16": 2.0**16, "float16": 2.0**13}
_TINY32 = float(np.finfo(np.float32).tiny)


@dataclass(frozen=True)
class Measured:
    """One comparison's raw numbers (computed once, judged by two budgets)."""

    shape_ok: bool
    exact_equal: bool
    nonfinite_same: bool
    max_abs: float
    max_rel: float
    ulp: float
    cosine: float
    top: float  # largest finite |expected|
    # Elements whose bit patterns differ (`bitexact.bit_differences`; NaN equals NaN): None when the
    # comparison was not asked for (`measure(..., bits=True)`).
    bits_differ: int | None = None


class Expected:
    """PyTorch's value of one node (an array of torch-ir `dtype`), prepared once for `measure`.

    Float32 and half values are held flat as float32, in `CHUNK`-element pieces with their
    magnitudes; `finite` says whether every element is finite (else `measure` takes the
    element-wise path). Spacing (one ULP), relative-error denominators and squared norms of a
    piece are computed the first time a comparison needs them, then kept."""

    def __init__(self, value: Any, dtype: str) -> None:
        self.value = np.asarray(value)
        self.dtype = dtype
        self.shape = self.value.shape
        self.chunked = dtype in _EPS and dtype != "float64"
        self.top = 0.0
        self.finite = True
        self.pieces: list[np.ndarray] = []
        self.mags: list[np.ndarray] = []
        self._spacing: dict[int, np.ndarray] = {}
        self._denominator: dict[int, np.ndarray] = {}
        self._square: dict[int, float] = {}
        if not self.chunked:
            return
        flat = self.value.astype(np.float32, copy=False).reshape(-1)
        self.pieces = [flat[s : s + CHUNK] for s in range(0, flat.size, CHUNK)]
        self.mags = [np.abs(p) for p in self.pieces]
        tops = [float(m.max()) for m in self.mags]
        self.finite = all(math.isfinite(t) for t in tops)
        self.top = max(tops, default=0.0) if self.finite else 0.0

    def spacing(self, i: int) -> np.ndarray:
        """Piece `i`'s ULP in its dtype (float32 spacing scaled for halves), at least float32's tiny."""
        if i not in self._spacing:
            ulp = np.spacing(self.mags[i]) * np.float32(_ULP_FACTOR.get(self.dtype, 1.0))
            self._spacing[i] = np.maximum(ulp, np.float32(_TINY32))
        return self._spacing[i]

    def denominator(self, i: int) -> np.ndarray:
        """Piece `i`'s magnitudes with 1 where they are 0 (the relative error's denominator)."""
        if i not in self._denominator:
            mag = self.mags[i]
            self._denominator[i] = np.where(mag > 0, mag, np.float32(1.0))
        return self._denominator[i]

    def square(self, i: int) -> float:
        """The squared norm of piece `i`, accumulated in float64."""
        if i not in self._square:
            self._square[i] = float(np.einsum("i,i->", self.pieces[i], self.pieces[i], dtype=np.float64))
        return self._square[i]


def measure(actual: Any, expected: Expected | Any, dtype: str | None = None, *, bits: bool = False) -> Measured:
    """Errors of `actual` against `expected` (an `Expected`, or an array of torch-ir `dtype`) in the
    dtype's working precision (float32 for the float32 and half dtypes, float64 for float64;
    integers and bool by equality); with `bits` (a float value judged bit-exact), also how many
    elements differ in bits (`Measured.bits_differ`)."""
    ref = expected if isinstance(expected, Expected) else Expected(expected, str(dtype))
    a = np.asarray(actual)
    if a.shape != ref.shape:
        return Measured(False, False, False, math.inf, math.inf, math.inf, 0.0, 0.0)
    found = _measure(a, ref)
    if bits and ref.dtype in _EPS:
        found = replace(found, bits_differ=bit_differences(a, ref.value)[0])
    return found


def _measure(a: np.ndarray, ref: Expected) -> Measured:
    """`measure` of an array of `ref`'s shape."""
    if ref.dtype not in _EPS:
        e = ref.value
        equal = bool(np.array_equal(a, e))
        diff = 0.0 if equal else float(np.abs(a.astype(np.float64) - e.astype(np.float64)).max())
        return Measured(True, equal, True, diff, 0.0 if equal else math.inf, 0.0, 1.0 if equal else 0.0, 0.0)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):  # ULP/relative of huge values is inf
        if ref.chunked and ref.finite:
            found = _measure_chunks(a.astype(np.float32, copy=False).reshape(-1), ref)
            if found is not None:
                return found
        return _measure_float(a, ref.value, ref.dtype)


def _measure_chunks(a: np.ndarray, ref: Expected) -> Measured | None:
    """`measure` of a flat float32 `a` against a finite chunked `ref`, piece by piece; None when `a`
    holds a non-finite element or a difference overflows (the element-wise path decides those)."""
    max_abs = ulp = rel = 0.0
    dot = own = 0.0  # a.e and a.a over the pieces that differ
    same: list[int] = []
    for i, piece in enumerate(ref.pieces):
        start = i * CHUNK
        got = a[start : start + piece.size]
        diff = np.subtract(got, piece)
        np.abs(diff, out=diff)
        worst = float(diff.max())
        if not math.isfinite(worst):
            return None
        if worst == 0.0:
            same.append(i)
            continue
        max_abs = max(max_abs, worst)
        ulp = max(ulp, float((diff / ref.spacing(i)).max()))
        rel = max(rel, float((diff / ref.denominator(i)).max()))
        dot += float(np.einsum("i,i->", got, piece, dtype=np.float64))
        own += float(np.einsum("i,i->", got, got, dtype=np.float64))
    if max_abs == 0.0:
        return Measured(True, True, True, 0.0, 0.0, 0.0, 1.0, ref.top)
    for i in same:  # bit-equal pieces: a.e = a.a = e.e there
        dot += ref.square(i)
        own += ref.square(i)
    norm = sum(ref.square(i) for i in range(len(ref.pieces)))
    nx, ny = math.sqrt(own), math.sqrt(norm)
    cosine = 1.0 if nx == ny == 0.0 else dot / (nx * ny) if nx and ny else 0.0
    return Measured(True, False, True, max_abs, rel, ulp, cosine, ref.top)


def _measure_float(a: np.ndarray, e: np.ndarray, dtype: str) -> Measured:
    """`measure` element-wise over whole arrays: every value with NaN or infinity (their positions and
    values must match), and float64 values (scaled before the cosine's products)."""
    work = np.float64 if dtype == "float64" else np.float32
    a, e = a.astype(work, copy=False).ravel(), e.astype(work, copy=False).ravel()
    finite_a, finite_e = np.isfinite(a), np.isfinite(e)
    nonfinite_same = bool(
        np.array_equal(finite_a, finite_e) and np.array_equal(a[~finite_a], e[~finite_e], equal_nan=True)
    )
    both = finite_a & finite_e
    if not both.all():
        a, e = a[both], e[both]
    if not a.size:
        return Measured(True, nonfinite_same, nonfinite_same, 0.0, 0.0, 0.0, 1.0, 0.0)
    diff = np.abs(a - e)
    mag = np.abs(e)
    top = float(mag.max())
    max_abs = float(diff.max())
    if max_abs == 0.0:
        return Measured(True, nonfinite_same, nonfinite_same, 0.0, 0.0, 0.0, 1.0, top)
    spacing = np.spacing(mag) * _ULP_FACTOR.get(dtype, 1.0)
    ulp = float((diff / np.maximum(spacing, np.finfo(work).tiny)).max())
    max_rel = float((diff / np.where(mag > 0, mag, 1.0)).max())
    scale = max(top, float(np.abs(a).max())) or 1.0
    x, y = (a / scale).astype(np.float64), (e / scale).astype(np.float64)
    nx, ny = math.sqrt(float(np.einsum("i,i->", x, x))), math.sqrt(float(np.einsum("i,i->", y, y)))
    cosine = 1.0 if nx == ny == 0.0 else float(np.einsum("i,i->", x, y)) / (nx * ny) if nx and ny else 0.0
    return Measured(True, False, nonfinite_same, max_abs, max_rel, ulp, cosine, top)


def _bit_exact(m: Measured) -> NodeError:
    """The bit-exact verdict of a measured float value (`measure(..., bits=True)`)."""
    if m.bits_differ is None:
        raise ValueError("a bit-exact verdict needs measure(..., bits=True)")
    return NodeError(m.max_abs, m.max_rel, m.ulp, m.cosine, 0.0, m.bits_differ == 0, True, m.bits_differ)


def local_error(m: Measured, dtype: str, kind: str, k: int, scale: float) -> NodeError:
    """The local (reference-fed) verdict: exact for integers and bool, bit-exact for the value-exact
    kinds (`lower.registry.VALUE_EXACT_KINDS`: fed PyTorch's own inputs, PyTorch's result is the only
    right one; `m` measured with `bits`); otherwise max abs error within
    eps * (16 elementwise | 16 + 2K contraction/reduction) * `scale`."""
    if not m.shape_ok:
        return NodeError(math.inf, math.inf, math.inf, 0.0, 0.0, False)
    if dtype not in _EPS:
        ok = m.nonfinite_same and m.max_abs == 0.0
        return NodeError(m.max_abs, m.max_rel, m.ulp, m.cosine, 0.0, bool(ok))
    if kind in VALUE_EXACT_KINDS:
        return _bit_exact(m)
    factor = 16.0 if kind == "elementwise" else 16.0 + 2.0 * k
    allowed = factor * _EPS[dtype] * scale + _TINY32
    return NodeError(m.max_abs, m.max_rel, m.ulp, m.cosine, allowed, bool(m.nonfinite_same and m.max_abs <= allowed))


def cumulative_error(m: Measured, dtype: str, *, bit_exact: bool = False) -> NodeError:
    """The cumulative verdict: the output budget of the dtype (`budgets.budget_for`), or bit equality for
    a float value that is exactly determined (`bit_exact`, `verify/exactness.py`; `m` measured with `bits`)."""
    if not m.shape_ok:
        return NodeError(math.inf, math.inf, math.inf, 0.0, 0.0, False)
    if bit_exact and dtype in _EPS:
        return _bit_exact(m)
    budget = budget_for(dtype)
    allowed = budget.atol + budget.rtol * m.top
    if dtype not in _EPS:
        return NodeError(m.max_abs, m.max_rel, 0.0, m.cosine, 0.0, bool(m.exact_equal))
    ok = m.nonfinite_same and m.max_abs <= allowed and m.cosine >= budget.min_cosine
    return NodeError(m.max_abs, m.max_rel, m.ulp, m.cosine, allowed, bool(ok))
