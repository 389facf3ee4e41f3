"""The bit-exact criterion: which float elements of RLX's value differ in bits from PyTorch's.

A value whose producing op is value-exact and whose inputs are exactly known (`verify/exactness.py`)
has one right answer: PyTorch's bit pattern. Two elements are equal when their bit patterns are
(so -0.0 and +0.0 differ), except that NaN equals NaN whatever its payload and sign (PyTorch and RLX
are free to produce any NaN). Used by the output verdict (`compare.compare_output`) and per-node
parity (`metrics.measure`); the judgement itself never depends on the front end.
"""

from __future__ import annotations

import struct

import numpy as np

# Elements per chunk (float64 temporaries stay bounded for large outputs).
_CHUNK = 1 << 18

# The bit pattern of an element, as hex digits of its dtype's width (bfloat16 is held as float32).
_PACK = {"float64": (">d", ">Q", 16), "float32": (">f", ">I", 8), "float16": (">e", ">H", 4)}

CRITERION = "bit-exact"


def _same(a: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Elementwise: equal bit patterns (NaN vs NaN equal). Both widened to float64, which keeps
    every float dtype's value, sign of zero and NaN-ness."""
    a, e = a.astype(np.float64), e.astype(np.float64)
    return ((a == e) & (np.signbit(a) == np.signbit(e))) | (np.isnan(a) & np.isnan(e))


def bit_differences(actual: np.ndarray, expected: np.ndarray) -> tuple[int, tuple[int, ...] | None]:
    """How many elements of `actual` differ in bits from `expected` (same shape, float arrays of the
    same dtype; bfloat16 values held as float32), and the multi-dimensional index of the row-major
    first of them (None when none differs)."""
    flat_a, flat_e = np.asarray(actual).reshape(-1), np.asarray(expected).reshape(-1)
    count, first = 0, None
    for start in range(0, flat_a.size, _CHUNK):
        differ = ~_same(flat_a[start : start + _CHUNK], flat_e[start : start + _CHUNK])
        found = int(differ.sum())
        if found and first is None:
            first = start + int(np.argmax(differ))
        count += found
    where = None if first is None else tuple(int(i) for i in np.unravel_index(first, np.shape(actual)))
    return count, where


def bits_text(value: float, dtype: str) -> str:
    """`value` as its dtype prints it with its bit pattern: `-0.0 (0x80000000)`, `-8388609.0 (0xcb000001)`."""
    pack, unpack, digits = _PACK.get("float32" if dtype == "bfloat16" else dtype, _PACK["float64"])
    (bits,) = struct.unpack(unpack, struct.pack(pack, value))
    if dtype == "bfloat16":
        bits, digits = bits >> 16, 4
    typed = np.float64(value) if dtype == "float64" else np.float16(value) if dtype == "float16" else np.float32(value)
    if typed == 0 or not np.isfinite(typed) or 1e-4 <= abs(float(typed)) < 1e16:
        shown = np.format_float_positional(typed, unique=True, trim="0")
    else:
        shown = np.format_float_scientific(typed, unique=True, trim="0")
    return f"{shown} (0x{bits:0{digits}x})"
