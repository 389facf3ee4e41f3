"""Per-output parity metrics (`compare_output`), judged by the budgets of `budgets.py`.

A float output passes when shapes and dtypes match, NaN/±inf sit at the same positions, cosine
similarity of the finite values is at least `min_cosine`, and every finite element is within its
budget. The budget has two parts:

- **the output's scale**: `atol + rtol * max|reference|`, right for well-conditioned bulk error;
- **the element's own magnitude**: `atol + rtol * |reference_i|`. An element beyond it but within the
  scale budget (an *outlier*: a small element far off in its own terms, such as a running sum that
  lost the digits torch kept) is judged against PyTorch's own float64 run of the program (the
  *judge*, `verify/judge.py`): it passes when RLX is within its own budget of the float64 value plus
  `JUDGE_FACTOR` times PyTorch's own error there (or PyTorch's median error over the output, whichever
  is larger): an ill-conditioned element (cancellation) that PyTorch itself computes only roughly
  passes, one that PyTorch gets right and RLX does not fails. Without a judge (none given, float64
  outputs, or the float64 run impossible) outliers are judged by the scale budget, and the row's
  `notes` say so.

Integer and bool outputs must match exactly; they are compared in their own dtype, never through a
float (int64 above 2**53 would round). A float output whose value is exactly determined (its producing
op is value-exact and its inputs exactly known, `verify/exactness.py`) is judged bit for bit instead
(`verify/bitexact.py`: signed zeros differ, NaN equals NaN). Float values are compared in float64,
which holds every float dtype exactly, and cosine is computed on values scaled by their largest
magnitude (no overflow at 1e300). An output that is entirely NaN fails, unless PyTorch's is NaN at
exactly the same positions (a note then says the example inputs may not exercise the model).

Every result names how many elements differ (integers/bool: are not equal; floats: lie outside the
budget or differ in NaN/inf) and the first of them, as a multi-dimensional index with RLX's and
PyTorch's values.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..budgets import JUDGE_FACTOR, JUDGED, Budget, budget_for, is_exact
from ..complex_edge import compared
from .bitexact import CRITERION, bit_differences, bits_text


@dataclass
class OutputParity:
    """Parity of one output against PyTorch.

    `mismatches` counts the elements that differ (None when the shapes differ and
    elements cannot be paired); `first_mismatch` is the row-major first of them as
    a multi-dimensional index, with RLX's value (`first_actual`) and PyTorch's
    (`first_expected`) there.
    """

    name: str
    ok: bool
    shape: list[int]
    expected_shape: list[int]
    dtype: str
    expected_dtype: str
    count: int
    nonfinite_match: bool
    max_abs_error: float
    max_rel_error: float
    cosine: float
    allowed_abs_error: float
    reasons: list[str] = field(default_factory=list)
    mismatches: int | None = 0
    first_mismatch: list[int] | None = None
    first_actual: bool | int | float | None = None
    first_expected: bool | int | float | None = None
    # Elements within the scale budget but beyond their own magnitude's (see the module docstring),
    # how they were judged ("float64": against PyTorch's float64 run; "scale": by the output's scale,
    # no judge), and remarks for the report.
    outliers: int = 0
    judged_by: str = ""
    notes: list[str] = field(default_factory=list)
    # A Python value forward returns (None, a constant, a size computed at the binding): the bundle's
    # value as Python prints it, compared with eager PyTorch's by equality; None for a tensor output.
    python_value: str | None = None
    # How the elements were judged: "budget" (a float output's budgets), "bit-exact" (a float output
    # whose value is exactly determined: every bit pattern equal) or "exact" (integers and bool).
    criterion: str = ""

    def shown(self) -> tuple[str, list[str]]:
        """What the output is, for the report: (`float32 [2, 3]` or `Python int`, error columns
        `max abs`, `max rel`, `cosine`, `differing elements`); a Python value has no error columns."""
        if self.python_value is not None:
            verdict = "equal to" if self.ok else "differs from"
            return f"Python {self.expected_dtype}", ["-", "-", "-", f"{self.python_value}, {verdict} eager PyTorch's"]
        return f"{self.dtype} {self.shape}", [
            f"{self.max_abs_error:.3g}",
            f"{self.max_rel_error:.3g}",
            f"{self.cosine:.8f}",
            self.mismatch_text(),
        ]

    @property
    def wants_judge(self) -> bool:
        """Whether a float64 judge would decide this row: outliers judged by scale for lack of one."""
        return self.outliers > 0 and self.judged_by == "scale" and self.expected_dtype in JUDGED

    def mismatch_text(self) -> str:
        """`N differ, first at [i, j]: RLX a vs PyTorch b` (or why elements cannot be compared)."""
        if self.mismatches is None:
            return "elements not comparable (shapes differ)"
        if not self.mismatches or self.first_mismatch is None:
            return "0 differ" + (" in bits" if self.criterion == CRITERION else "")
        if self.criterion == CRITERION and isinstance(self.first_actual, float):
            expected = float(self.first_expected) if isinstance(self.first_expected, (int, float)) else math.nan
            return (
                f"{self.mismatches} differ in bits, first at {self.first_mismatch}: "
                f"RLX {bits_text(self.first_actual, self.dtype)} vs PyTorch {bits_text(expected, self.expected_dtype)}"
            )
        return (
            f"{self.mismatches} differ, first at {self.first_mismatch}: "
            f"RLX {_fmt(self.first_actual, self.dtype)} vs PyTorch {_fmt(self.first_expected, self.expected_dtype)}"
        )


def _fmt(value: bool | int | float | None, dtype: str) -> str:
    """A value as its dtype prints it (shortest repr that round-trips in that dtype)."""
    if isinstance(value, float) and dtype in ("float32", "bfloat16"):
        return str(np.float32(value))
    if isinstance(value, float) and dtype == "float16":
        return str(np.float16(value))
    return str(value)


def _scalar(arr: np.ndarray, index: tuple[int, ...]) -> bool | int | float:
    """One element as a plain Python value (exact: ints stay ints)."""
    value = arr[index].item()
    return value if isinstance(value, (bool, int, float)) else float(value)


def _exact_equal(a: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Elementwise exact equality of integer/bool (or mismatched-dtype) arrays, no float rounding."""
    ints = "biu"
    if a.dtype.kind in ints and e.dtype.kind in ints:
        common = np.result_type(a.dtype, e.dtype)
        if common.kind in ints:  # e.g. int32 vs int64 -> int64: exact
            return np.asarray(a.astype(common) == e.astype(common))
    if a.dtype.kind == "f" and e.dtype.kind == "f":  # widening a float is exact
        common = np.result_type(a.dtype, e.dtype)
        a, e = a.astype(common), e.astype(common)
        return np.asarray((a == e) | (np.isnan(a) & np.isnan(e)))
    # Mixed kinds (a dtype mismatch, which fails anyway): Python compares int and float exactly.
    return np.asarray(a.astype(object) == e.astype(object), dtype=bool)


def _first(bad: np.ndarray) -> tuple[int, ...] | None:
    """Multi-dimensional index of the row-major first True, or None."""
    if not bad.any():
        return None
    return tuple(int(i) for i in np.unravel_index(int(np.argmax(bad.ravel())), bad.shape))


def _exact_errors(a: np.ndarray, e: np.ndarray) -> tuple[float, float]:
    """Max abs and max rel error of differing integer/bool elements, from exact differences."""
    max_abs = max_rel = 0.0
    for x, y in zip(a.tolist(), e.tolist(), strict=True):
        try:
            d = abs(int(x) - int(y))
        except (ValueError, OverflowError):  # NaN/inf on the float side of a dtype mismatch
            return math.inf, math.inf
        max_abs = max(max_abs, float(d))
        max_rel = max(max_rel, float(d) / max(abs(float(y)), 1e-12))
    return max_abs, max_rel


# Elements per chunk when comparing: the metrics need float64 temporaries, so a large output
# (Llama's 128 x 32000 logits) is compared a chunk at a time to bound the verifier's memory.
_CHUNK = 1 << 18


def _chunks(actual: np.ndarray, expected: np.ndarray) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """(offset, actual, expected) float64 chunks of the row-major elements."""
    flat_a, flat_e = actual.reshape(-1), expected.reshape(-1)
    for start in range(0, flat_a.size, _CHUNK):
        yield (
            start,
            flat_a[start : start + _CHUNK].astype(np.float64),
            flat_e[start : start + _CHUNK].astype(np.float64),
        )


@dataclass
class _FloatStats:
    """Whole-output metrics gathered chunk by chunk (float64 holds every dtype here exactly)."""

    nonfinite_match: bool = True
    a_nan: int = 0
    a_inf: int = 0
    e_nan: int = 0
    e_inf: int = 0
    scale: float = 0.0  # largest |expected| where both are finite
    max_abs: float = 0.0
    max_rel: float = 0.0
    cosine: float = 1.0


def _float_stats(actual: np.ndarray, expected: np.ndarray) -> _FloatStats:
    """NaN/inf agreement, error maxima and cosine (on values divided by their largest magnitude, where
    both are finite), in two passes over float64 chunks."""
    st = _FloatStats()
    a_max = 0.0
    for _, a, e in _chunks(actual, expected):
        a_nan, e_nan, a_inf, e_inf = np.isnan(a), np.isnan(e), np.isinf(a), np.isinf(e)
        st.a_nan, st.e_nan = st.a_nan + int(a_nan.sum()), st.e_nan + int(e_nan.sum())
        st.a_inf, st.e_inf = st.a_inf + int(a_inf.sum()), st.e_inf + int(e_inf.sum())
        st.nonfinite_match &= bool(
            np.array_equal(a_nan, e_nan) and np.array_equal(a_inf, e_inf) and np.array_equal(a[a_inf], e[e_inf])
        )
        finite = ~(a_nan | e_nan | a_inf | e_inf)
        if finite.any():
            af, ef = a[finite], e[finite]
            diff = np.abs(af - ef)
            st.scale = max(st.scale, float(np.abs(ef).max()))
            a_max = max(a_max, float(np.abs(af).max()))
            st.max_abs = max(st.max_abs, float(diff.max()))
            st.max_rel = max(st.max_rel, float((diff / np.maximum(np.abs(ef), 1e-12)).max()))
    norm = max(a_max, st.scale)
    if norm == 0.0:
        return st
    dot = sum_a = sum_e = 0.0
    for _, a, e in _chunks(actual, expected):
        finite = np.isfinite(a) & np.isfinite(e)
        af, ef = a[finite] / norm, e[finite] / norm
        dot, sum_a, sum_e = dot + float(np.dot(af, ef)), sum_a + float(np.dot(af, af)), sum_e + float(np.dot(ef, ef))
    st.cosine = 0.0 if sum_a == 0.0 or sum_e == 0.0 else dot / math.sqrt(sum_a) / math.sqrt(sum_e)
    return st


def _float_mismatches(
    actual: np.ndarray, expected: np.ndarray, allowed: float, budget: Budget
) -> tuple[np.ndarray, np.ndarray]:
    """Flat indices of the elements off by the output's scale (beyond `allowed`, or a NaN/inf that moved)
    and of the outliers: elements within `allowed` but beyond their own budget `atol + rtol * |e|`."""
    bad_at, outlier_at = [], []
    for start, a, e in _chunks(actual, expected):
        finite = np.isfinite(a) & np.isfinite(e)
        diff = np.where(finite, np.abs(a - e), 0.0)
        a_nan, e_nan = np.isnan(a), np.isnan(e)
        moved = (a_nan != e_nan) | ((np.isinf(a) | np.isinf(e)) & (a != e))  # NaN vs NaN is not a move
        bad = moved | (diff > allowed)
        own = ~bad & (diff > budget.atol + budget.rtol * np.abs(np.where(finite, e, 0.0)))
        bad_at.append(start + np.flatnonzero(bad))
        outlier_at.append(start + np.flatnonzero(own))
    none = np.empty(0, dtype=np.intp)  # an empty output has no chunks
    return (np.concatenate(bad_at) if bad_at else none), (np.concatenate(outlier_at) if outlier_at else none)


def _judge_outliers(
    actual: np.ndarray, expected: np.ndarray, judge: np.ndarray, outliers: np.ndarray, budget: Budget
) -> tuple[np.ndarray, str]:
    """The outliers (flat indices) RLX gets wrong against the float64 `judge`, and a note on the worst."""
    e64 = expected.reshape(-1).astype(np.float64)
    j64 = judge.reshape(-1).astype(np.float64)
    both = np.isfinite(e64) & np.isfinite(j64)
    torch_error = np.abs(e64 - j64)
    floor = float(np.median(torch_error[both])) if both.any() else 0.0
    a, e, j = (arr.reshape(-1)[outliers].astype(np.float64) for arr in (actual, expected, judge))
    ours, theirs = np.abs(a - j), np.abs(e - j)
    limit = budget.atol + budget.rtol * np.abs(j) + JUDGE_FACTOR * np.maximum(theirs, floor)
    judged = np.isfinite(j)  # where float64 is not finite it cannot judge: the scale does
    wrong = judged & ~(ours <= limit)
    if not judged.any():
        return (
            outliers[:0],
            f"{len(outliers)} elements beyond their own magnitude's budget: PyTorch's float64 run is not "
            "finite there; judged by the output's scale",
        )
    worst = int(np.argmax(np.where(judged, ours / np.maximum(limit, np.finfo(np.float64).tiny), -1.0)))
    note = (
        f"{len(outliers)} elements beyond their own magnitude's budget judged against PyTorch's float64 run: "
        f"{int(wrong.sum())} wrong; the worst is {ours[worst]:.3g} from float64 where PyTorch is "
        f"{theirs[worst]:.3g} (median PyTorch error {floor:.3g})"
    )
    return outliers[wrong], note


def _unpaired(base: dict[str, Any], reasons: list[str]) -> OutputParity:
    """The failing row of an output whose shape differs from PyTorch's: no element can be paired."""
    return OutputParity(
        **base,
        ok=False,
        nonfinite_match=False,
        max_abs_error=math.inf,
        max_rel_error=math.inf,
        cosine=0.0,
        allowed_abs_error=0.0,
        reasons=reasons,
        mismatches=None,
    )


def _nonfinite_findings(stats: _FloatStats, size: int, reasons: list[str], notes: list[str]) -> None:
    """Append what NaN/inf say: positions that differ, an output entirely NaN (a failure, or a note when
    PyTorch's is NaN at the same positions)."""
    if not stats.nonfinite_match:
        reasons.append(
            f"NaN/inf positions differ (RLX {stats.a_nan} NaN {stats.a_inf} inf, "
            f"PyTorch {stats.e_nan} NaN {stats.e_inf} inf)"
        )
    if size and stats.a_nan == size:
        if stats.nonfinite_match:  # PyTorch's is NaN everywhere too: nothing differs, but nothing was checked
            notes.append(
                "PyTorch's output is NaN everywhere too (same positions): the example inputs may not exercise "
                "the model; try other inputs (verify_inputs)"
            )
        else:
            reasons.append("output is entirely NaN")


def compare_output(
    name: str,
    actual: np.ndarray,
    expected: np.ndarray,
    actual_dtype: str,
    expected_dtype: str,
    judge: np.ndarray | None = None,
    *,
    no_judge: str = "",
    bit_exact: bool = False,
) -> OutputParity:
    """All metrics for one output; `ok` applies the expected dtype's budget (module docstring), or with
    `bit_exact` (a float output whose value is exactly determined, `verify/exactness.py`) bit equality.

    `actual` is RLX's result, `expected` PyTorch's; the dtype names are torch-ir names (bfloat16
    arrays hold their values as float32, since numpy has no bfloat16; a complex output is compared as its
    float pairs, `complex_edge.compared`). `judge` is the same output computed by PyTorch in float64 (any
    float array of `expected`'s shape), used only for outliers: elements within the output's scale budget
    but beyond their own magnitude's. Without it, outliers are judged by the scale and the row says so
    (`no_judge`: why there is none).
    """
    actual, expected, judge, actual_dtype, expected_dtype, notes = compared(
        actual, expected, judge, actual_dtype, expected_dtype
    )
    budget, reasons = budget_for(expected_dtype), list[str]()
    if actual_dtype != expected_dtype:
        reasons.append(f"dtype {actual_dtype} != {expected_dtype}")
    base: dict[str, Any] = {
        "name": name,
        "shape": list(actual.shape),
        "expected_shape": list(expected.shape),
        "dtype": actual_dtype,
        "expected_dtype": expected_dtype,
        "count": int(actual.size),
    }
    if tuple(actual.shape) != tuple(expected.shape):  # even with equal element counts, or all zeros
        reasons.append(f"shape {list(actual.shape)} != {list(expected.shape)}")
        return _unpaired(base, reasons)
    outliers, judged_by = 0, ""
    criterion = "exact" if is_exact(expected_dtype) else CRITERION if bit_exact else "budget"
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        stats = _float_stats(actual, expected)
        nonfinite_match, cosine = stats.nonfinite_match, stats.cosine
        if is_exact(expected_dtype):
            bad = ~_exact_equal(actual, expected)
            max_abs, max_rel = _exact_errors(actual[bad], expected[bad])
            allowed = 0.0
            mismatches, first = int(bad.sum()), _first(bad)
        elif criterion == CRITERION:  # no budget, no outliers: every bit pattern as PyTorch's
            max_abs, max_rel, allowed = stats.max_abs, stats.max_rel, 0.0
            mismatches, first = bit_differences(actual, expected)
        else:
            allowed = budget.atol + budget.rtol * stats.scale
            max_abs, max_rel = stats.max_abs, stats.max_rel
            bad_at, outlier_at = _float_mismatches(actual, expected, allowed, budget)
            outliers = len(outlier_at)
            if outliers:
                judged_by, wrong_at, note = _judge(
                    actual, expected, expected_dtype, judge, outlier_at, budget, no_judge
                )
                notes.append(note)
                if len(wrong_at):
                    reasons.append(
                        f"{len(wrong_at)} elements wrong in their own magnitude (beyond {budget.atol:g} + "
                        f"{budget.rtol:g} * |PyTorch| and PyTorch's own float64 error), first at "
                        f"{[int(i) for i in np.unravel_index(int(wrong_at.min()), actual.shape)]}"
                    )
                bad_at = np.union1d(bad_at, wrong_at)
            mismatches = len(bad_at)
            first = tuple(int(i) for i in np.unravel_index(int(bad_at.min()), actual.shape)) if mismatches else None
    _nonfinite_findings(stats, actual.size, reasons, notes)
    reasons += _verdict(criterion, mismatches, actual.size, expected_dtype, max_abs, allowed, cosine)
    return OutputParity(
        **base,
        ok=not reasons,
        nonfinite_match=nonfinite_match,
        max_abs_error=max_abs,
        max_rel_error=max_rel,
        cosine=cosine,
        allowed_abs_error=allowed,
        reasons=reasons,
        mismatches=mismatches,
        first_mismatch=list(first) if first is not None else None,
        first_actual=_scalar(actual, first) if first is not None else None,
        first_expected=_scalar(expected, first) if first is not None else None,
        outliers=outliers,
        judged_by=judged_by,
        notes=notes,
        criterion=criterion,
    )


def _verdict(
    criterion: str, mismatches: int, size: int, dtype: str, max_abs: float, allowed: float, cosine: float
) -> list[str]:
    """Why an output fails by its `criterion` ("exact", "bit-exact" or "budget"; none when it passes)."""
    if criterion == "exact":
        return [f"{mismatches} of {size} elements differ ({dtype} must match exactly)"] if mismatches else []
    if criterion == CRITERION:
        why = "judged bit-exact: value-exact ops on exactly known inputs, PyTorch's result is the only right one"
        return [f"{mismatches} of {size} elements differ in bits ({why})"] if mismatches else []
    reasons = [f"max abs error {max_abs:.3g} > allowed {allowed:.3g}"] if max_abs > allowed else []
    min_cosine = budget_for(dtype).min_cosine
    return reasons + ([] if cosine >= min_cosine else [f"cosine {cosine:.8f} < {min_cosine}"])  # NaN fails too


def _judge(
    actual: np.ndarray,
    expected: np.ndarray,
    dtype: str,
    judge: np.ndarray | None,
    outlier_at: np.ndarray,
    budget: Budget,
    no_judge: str,
) -> tuple[str, np.ndarray, str]:
    """(how the outliers were judged, the flat indices of those that are wrong, a note for the report)."""
    a, e = actual.reshape(-1)[outlier_at], expected.reshape(-1)[outlier_at]
    rel = float(np.max(np.abs(a.astype(np.float64) - e) / np.maximum(np.abs(e.astype(np.float64)), 1e-300)))
    if judge is not None and dtype in JUDGED and np.shape(judge) == expected.shape:
        wrong_at, note = _judge_outliers(actual, expected, np.asarray(judge), outlier_at, budget)
        return "float64", wrong_at, note
    if dtype not in JUDGED:
        why = "float64 has no wider judge"
    elif judge is not None:
        why = f"the float64 run's shape {list(np.shape(judge))} is not the output's {list(expected.shape)}"
    else:
        why = no_judge or "no float64 run was given"
    note = (
        f"{len(outlier_at)} elements differ by more than their own magnitude's budget (relative error up to "
        f"{rel:.3g}); judged by the output's scale only: {why}"
    )
    return "scale", outlier_at[:0], note
