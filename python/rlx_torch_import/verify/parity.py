"""Per-output parity metrics and the pass budget by dtype.

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
float (int64 above 2**53 would round). Float values are compared in float64, which holds every float
dtype exactly, and cosine is computed on values scaled by their largest magnitude (no overflow at
1e300). An output that is entirely NaN fails, unless PyTorch's is NaN at exactly the same positions
(a note then says the example inputs may not exercise the model).

Every result names how many elements differ (integers/bool: are not equal; floats: lie outside the
budget or differ in NaN/inf) and the first of them, as a multi-dimensional index with RLX's and
PyTorch's values.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import safetensors_io
from ..errors import BundleError
from ..layout import TORCH_IR, input_key, output_key, set_prefix, sweep_prefix
from ..symbolic import Dim, evaluate_shape, values_of

if TYPE_CHECKING:
    from ..torchir import TorchIR


# Names come from the user's model (module paths, output names, node names): in a report each is one
# line, `|`-safe for a table cell, and at most this long (the full text is in report.json).
_NAME_CHARS = 200


def _short(text: object) -> str:
    """`text` on one line (newlines and other control characters escaped), cut to _NAME_CHARS."""
    flat = "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))
    return flat if len(flat) <= _NAME_CHARS else f"{flat[:_NAME_CHARS]}... ({len(flat) - _NAME_CHARS} more)"


def _md(text: object) -> str:
    """`text` for a markdown table cell or inline span: one line, `|` escaped, cut to _NAME_CHARS."""
    return _short(text).replace("|", "\\|").replace("`", "'")


@dataclass(frozen=True)
class Budget:
    """How far a result may be from PyTorch and still pass."""

    atol: float
    rtol: float
    min_cosine: float


# The one table of float budgets: the generated Rust crates get theirs from here
# (emit/crate.py writes it into src/host.rs).
_BUDGETS = {
    "float64": Budget(atol=1e-9, rtol=1e-7, min_cosine=0.9999999),
    "float32": Budget(atol=1e-4, rtol=1e-4, min_cosine=0.99999),
    "float16": Budget(atol=2e-3, rtol=2e-3, min_cosine=0.999),
    "bfloat16": Budget(atol=1.6e-2, rtol=1.6e-2, min_cosine=0.995),
}
# Integers and bool: every element equal. Cosine is reported but not judged (it is
# computed in float64 and can round below 1.0 for identical large integers).
EXACT = Budget(atol=0.0, rtol=0.0, min_cosine=-1.0)


# A float output whose outliers a float64 run can judge (a float64 output has no wider judge).
_JUDGED = ("float32", "float16", "bfloat16")
# How many times PyTorch's own error (against float64) RLX may be off at an outlier, beyond the
# element's own budget. Two float32 computations of one ill-conditioned value differ by a similar,
# random amount; 16 keeps such pairs passing (the ratio of two such errors exceeds 16 rarely, and the
# median floor covers elements PyTorch happens to get exactly), while a lost digit is off by far more.
JUDGE_FACTOR = 16.0


def float_budgets() -> dict[str, Budget]:
    """The float dtypes' budgets (a copy); every other dtype is exact."""
    return dict(_BUDGETS)


def budget_for(dtype: str) -> Budget:
    """The pass budget for an output of this torch-ir dtype (exact for integers and bool)."""
    return _BUDGETS.get(dtype, EXACT)


def is_exact(dtype: str) -> bool:
    """Whether outputs of this dtype must match element for element (integers and bool)."""
    return dtype not in _BUDGETS


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
        return self.outliers > 0 and self.judged_by == "scale" and self.expected_dtype in _JUDGED

    def mismatch_text(self) -> str:
        """`N differ, first at [i, j]: RLX a vs PyTorch b` (or why elements cannot be compared)."""
        if self.mismatches is None:
            return "elements not comparable (shapes differ)"
        if not self.mismatches or self.first_mismatch is None:
            return "0 differ"
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


def compare_output(
    name: str,
    actual: np.ndarray,
    expected: np.ndarray,
    actual_dtype: str,
    expected_dtype: str,
    judge: np.ndarray | None = None,
    *,
    no_judge: str = "",
) -> OutputParity:
    """All metrics for one output; `ok` applies the expected dtype's budget (module docstring).

    `actual` is RLX's result, `expected` PyTorch's; the dtype names are torch-ir names (bfloat16
    arrays hold their values as float32, since numpy has no bfloat16). `judge` is the same output
    computed by PyTorch in float64 (any float array of `expected`'s shape), used only for outliers:
    elements within the output's scale budget but beyond their own magnitude's. Without it, outliers
    are judged by the scale and the row says so (`no_judge`: why there is none).
    """
    actual, expected = np.asarray(actual), np.asarray(expected)
    budget = budget_for(expected_dtype)
    reasons: list[str] = []
    notes: list[str] = []
    if actual_dtype != expected_dtype:
        reasons.append(f"dtype {actual_dtype} != {expected_dtype}")
    base = {
        "name": name,
        "shape": list(actual.shape),
        "expected_shape": list(expected.shape),
        "dtype": actual_dtype,
        "expected_dtype": expected_dtype,
        "count": int(actual.size),
    }
    if tuple(actual.shape) != tuple(expected.shape):  # even with equal element counts, or all zeros
        reasons.append(f"shape {list(actual.shape)} != {list(expected.shape)}")
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
    outliers, judged_by = 0, ""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        stats = _float_stats(actual, expected)
        nonfinite_match, cosine = stats.nonfinite_match, stats.cosine
        if is_exact(expected_dtype):
            bad = ~_exact_equal(actual, expected)
            max_abs, max_rel = _exact_errors(actual[bad], expected[bad])
            allowed = 0.0
            mismatches, first = int(bad.sum()), _first(bad)
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
    if not nonfinite_match:
        reasons.append(
            f"NaN/inf positions differ (RLX {stats.a_nan} NaN {stats.a_inf} inf, "
            f"PyTorch {stats.e_nan} NaN {stats.e_inf} inf)"
        )
    if actual.size and stats.a_nan == actual.size:
        if nonfinite_match:  # PyTorch's is NaN everywhere too: nothing differs, but nothing was checked
            notes.append(
                "PyTorch's output is NaN everywhere too (same positions): the example inputs may not exercise "
                "the model; try other inputs (verify_inputs)"
            )
        else:
            reasons.append("output is entirely NaN")
    if is_exact(expected_dtype):
        if mismatches:
            reasons.append(f"{mismatches} of {actual.size} elements differ ({expected_dtype} must match exactly)")
    elif max_abs > allowed:
        reasons.append(f"max abs error {max_abs:.3g} > allowed {allowed:.3g}")
    if not is_exact(expected_dtype) and not cosine >= budget.min_cosine:  # NaN fails too
        reasons.append(f"cosine {cosine:.8f} < {budget.min_cosine}")
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
    )


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
    if judge is not None and dtype in _JUDGED and np.shape(judge) == expected.shape:
        wrong_at, note = _judge_outliers(actual, expected, np.asarray(judge), outlier_at, budget)
        return "float64", wrong_at, note
    if dtype not in _JUDGED:
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


def check_reference(ir: TorchIR, path: Path) -> dict[str, safetensors_io.RawTensor]:
    """Read reference.safetensors (`safetensors_io.read`) and check it against torch-ir: every
    tensor verification will read is there with the declared dtype and shape: `input.<name>` and
    `output.<name>` (a dynamic program's at the example sizes), `sweep.<i>.input/output.<name>` for
    each sweep point eager PyTorch ran at (shapes at the point's binding), and
    `set.<k>.input/output.<name>` for each extra input set it ran on (dtype, and rank and static
    dims; the sizes a set gives are checked when it runs). Other tensors are ignored.

    Raises BundleError naming the file, the tensor, and the expected vs found dtype and shape."""
    ref = safetensors_io.read(path)
    source = ir.origin or TORCH_IR

    def expect(key: str, what: str, dtype: str, shape: Sequence[Dim]) -> None:
        declared = f"{dtype}{list(shape)}"
        t = ref.get(key)
        if t is None:
            some = ", ".join(sorted(ref)[:8]) + (", ..." if len(ref) > 8 else "")
            raise BundleError(
                f"{path}: no tensor {key!r} ({source} {what}: {declared}); the file holds {some or 'no tensors'}"
            )
        fits = len(t.shape) == len(shape) and all(
            isinstance(d, str) or d == n for d, n in zip(shape, t.shape, strict=True)
        )
        if t.dtype != dtype or not fits:
            raise BundleError(f"{path}: tensor {key!r} is {t.dtype}{list(t.shape)}; {source} {what} is {declared}")

    def check_point(prefix: str, binding: dict[str, int] | None, label: str) -> None:
        for i, s in enumerate(ir.inputs):
            shape = s.shape if binding is None else evaluate_shape(s.shape, binding)
            expect(input_key(s.name, prefix), f"inputs[{i}] ({label})", s.dtype, shape)
        for i, o in enumerate(ir.outputs):
            shape = o.shape if binding is None else evaluate_shape(o.shape, binding)
            expect(output_key(o.name, prefix), f"outputs[{i}] ({label})", o.dtype, shape)

    check_point("", values_of(ir.symbols), "the example")
    for i, point in enumerate(ir.sweep):
        if "error" not in point:
            check_point(sweep_prefix(i), dict(point["binding"]), f"at sweep[{i}], {point['label']}")
    for k, entry in enumerate(ir.input_sets):
        if "error" not in entry:
            check_point(set_prefix(k), None, f"in input_sets[{k}], {entry['label']}")
    return ref


@dataclass
class SweepRow:
    """Verification at one sweep point of a dynamic program: the binding (symbol label ->
    size), each output's parity against eager PyTorch at those sizes, and RLX's compile and
    run time there (milliseconds; the compile is 0 when the binding was already compiled)."""

    label: str
    binding: dict[str, int]
    ok: bool
    outputs: list[OutputParity] = field(default_factory=list)
    compile_ms: float = 0.0
    run_ms: float = 0.0

    def failures(self) -> str:
        return "; ".join(f"{o.name}: {', '.join(o.reasons)}" for o in self.outputs if not o.ok)

    def notes(self) -> list[str]:
        return [f"{o.name}: {n}" for o in self.outputs for n in o.notes]


@dataclass
class NodeError:
    """One way of comparing a node's RLX value with PyTorch's: max abs / max rel error, the
    largest error in ULP of the reference value (floats; 0 for exact dtypes), cosine, the
    budget's allowed absolute error, and the verdict."""

    max_abs: float
    max_rel: float
    ulp: float
    cosine: float
    allowed_abs: float
    ok: bool


@dataclass
class NodeParity:
    """Per-node parity of one tensor value an ATen node of the exported program produced.

    `cumulative`: RLX fed with the model inputs; `local`: the node's own RLX computation fed
    with PyTorch's values of its inputs (reference-fed), so its error is the op's alone.
    Either is None with `note` saying why there is no RLX value (fused away, not a tensor,
    ...). `kind` is the op's numerical character the budget follows ("exact", "movement",
    "elementwise", "reduction"); `reduction` the reduction length budgets scale with."""

    index: int
    node: str
    value: str
    aten: str
    module_path: str
    source: str
    shape: list[int]
    dtype: str
    kind: str
    reduction: int = 1
    local: NodeError | None = None
    cumulative: NodeError | None = None
    note: str = ""


@dataclass
class InputSetRow:
    """Verification on one extra input set (`verify_inputs`): its label (`file:<name>`,
    `auto:<what>`), what it exercises, and each output's parity against eager PyTorch."""

    label: str
    description: str
    ok: bool
    outputs: list[OutputParity] = field(default_factory=list)

    def failures(self) -> str:
        return "; ".join(f"{o.name}: {', '.join(o.reasons)}" for o in self.outputs if not o.ok)

    def notes(self) -> list[str]:
        return [f"{o.name}: {n}" for o in self.outputs for n in o.notes]


# More per-node rows than this: report.md lists only the failing nodes and the first divergence.
_MARKDOWN_NODES = 40


def node_failed(n: NodeParity) -> bool:
    """Whether a node's local or cumulative error is over its budget."""
    return any(e is not None and not e.ok for e in (n.local, n.cumulative))


def is_node(n: NodeParity, other: NodeParity | None) -> bool:
    """Whether `n` is the same value of the graph as `other` (e.g. the first divergence)."""
    return other is not None and n.index == other.index and n.value == other.value


@dataclass
class ParityReport:
    """Result of one conversion: `ok` is True only when every output passed (or verify was off).

    `outputs` is the check at the example inputs; a dynamic program also has one `sweep`
    row per sweep point (`symbolic.sweep_points`), and `ok` needs every row to pass."""

    name: str
    ok: bool
    verified: bool
    out_dir: str
    outputs: list[OutputParity] = field(default_factory=list)
    timings_s: dict[str, float] = field(default_factory=dict)
    op_histogram: dict[str, int] = field(default_factory=dict)
    aten_histogram: dict[str, int] = field(default_factory=dict)
    decomposition: str = "high"
    auto_decomposed_ops: list[str] = field(default_factory=list)
    rlx_version: str = ""
    torch_version: str = ""
    # Where RLX ran (`devices.DeviceInfo.description`: "cpu", "cuda: NVIDIA H200"; "" when nothing
    # was verified) and the RLX settings in effect for it (CUDA: strict float32, docs/design.md ad).
    device: str = "cpu"
    device_settings: list[str] = field(default_factory=list)
    # Dynamic programs: symbol label -> [min, max] (max None: unbounded), and one row per sweep point.
    symbols: dict[str, list[int | None]] = field(default_factory=dict)
    sweep: list[SweepRow] = field(default_factory=list)
    # The sizes the symbolic graph was generalized from, and sweep points whose own lowering differs.
    probes: list[dict[str, int]] = field(default_factory=list)
    unreproduced: list[dict[str, int]] = field(default_factory=list)
    # What the front end fixed or left out (torch-ir `constant_inputs`, `control_flow`, `dropped`):
    # one line each, e.g. "input scale = 3.0 baked in", "cond: both branches inlined; ...".
    notes: list[str] = field(default_factory=list)
    # Per-node parity (verify/nodes.py), in graph order; empty when not computed.
    nodes: list[NodeParity] = field(default_factory=list)
    # The first node whose local (reference-fed) error is over its budget, or None; with
    # `drift` saying where a cumulative error grows when every node is locally within budget.
    first_divergence: NodeParity | None = None
    drift: str = ""
    # Extra input sets verified beside the example (`verify_inputs`), one row each.
    input_sets: list[InputSetRow] = field(default_factory=list)

    def to_json(self) -> str:
        def clean(x: Any) -> Any:
            if isinstance(x, float) and not math.isfinite(x):
                return str(x)
            if isinstance(x, dict):
                return {k: clean(v) for k, v in x.items()}
            if isinstance(x, list):
                return [clean(v) for v in x]
            return x

        return json.dumps(clean(asdict(self)), indent=1, allow_nan=False) + "\n"

    def summary(self) -> str:
        """A few lines for a terminal."""
        head = "PASS" if self.ok else "FAIL"
        if not self.verified:
            head = "NOT VERIFIED"
        on = f" on {_short(self.device)}" if self.device else ""
        lines = [f"{head} {_short(self.name)} ({self.decomposition}){on} -> {self.out_dir}"]
        if self.auto_decomposed_ops:
            lines.append(f"  auto-decomposed: {', '.join(self.auto_decomposed_ops)}")
        lines += [f"  note: {n}" for n in self.notes]
        for o in self.outputs:
            mark = "ok " if o.ok else "BAD"
            if o.python_value is not None:
                text = f"= {o.python_value} (Python {o.expected_dtype}, {'as' if o.ok else 'not as'} eager PyTorch)"
            else:
                text = (
                    f"{o.dtype}{o.shape}: max_abs={o.max_abs_error:.3g} max_rel={o.max_rel_error:.3g} "
                    f"cosine={o.cosine:.8f} {o.mismatch_text()}"
                )
            lines.append(f"  {mark} {_short(o.name)} {text}" + ("" if o.ok else "  <- " + "; ".join(o.reasons)))
            lines += [f"      note: {n}" for n in o.notes]
        if self.sweep:
            bad = [r for r in self.sweep if not r.ok]
            lines.append(
                f"  sweep over {', '.join(self.symbols)}: {len(self.sweep) - len(bad)}/{len(self.sweep)} points pass"
            )
            for r in bad:
                at = ", ".join(f"{k}={v}" for k, v in r.binding.items())
                lines.append(f"  BAD {r.label} ({at}): {r.failures()}")
            lines += [f"  note at {r.label}: {n}" for r in self.sweep for n in r.notes()]
        if self.input_sets:
            passed = sum(r.ok for r in self.input_sets)
            lines.append(f"  input sets: {passed}/{len(self.input_sets)} pass")
        lines += [f"  BAD input set {r.label}: {r.failures()}" for r in self.input_sets if not r.ok]
        lines += [f"  note on input set {r.label}: {n}" for r in self.input_sets for n in r.notes()]
        return "\n".join(lines)

    def _device_text(self) -> str:
        """`, device cuda: NVIDIA H200 with RLX_CUDA_PARITY=1, ...` (nothing when nothing ran)."""
        if not self.device:
            return ""
        settings = f" with {', '.join(map(_md, self.device_settings))}" if self.device_settings else ""
        return f", device {_md(self.device)}{settings}"

    def markdown(self) -> str:
        def row(o: OutputParity) -> str:
            what, (max_abs, max_rel, cosine, differ) = o.shown()
            allowed = "-" if o.python_value is not None else f"{o.allowed_abs_error:.3g}"
            return (
                f"| {_md(o.name)} | {'pass' if o.ok else 'FAIL'} | {_md(what)} | {max_abs} | {allowed} | {max_rel} | "
                f"{cosine} | {_md(differ)} | {_md('; '.join(o.reasons))} |"
            )

        rows = "\n".join(row(o) for o in self.outputs)
        return (
            f"# Parity report: {_md(self.name)}\n\n"
            f"Verdict: **{'not verified' if not self.verified else 'PASS' if self.ok else 'FAIL'}** "
            f"(decomposition `{self.decomposition}`, torch {self.torch_version}, RLX {self.rlx_version}"
            f"{self._device_text()})\n\n"
            + (f"Auto-decomposed: {', '.join(self.auto_decomposed_ops)}\n\n" if self.auto_decomposed_ops else "")
            + "".join(f"- {n}\n" for n in self.notes)
            + ("\n" if self.notes else "")
            + "| output | verdict | dtype shape | max abs | allowed abs | max rel | cosine | differing elements "
            "| reasons |\n"
            "|---|---|---|---|---|---|---|---|---|\n"
            + rows
            + "\n"
            + "".join(f"\n- `{_md(o.name)}`: {_md(n)}" for o in self.outputs for n in o.notes)
            + ("\n" if any(o.notes for o in self.outputs) else "")
            + self._sweep_markdown()
            + self._input_sets_markdown()
            + self._nodes_markdown()
        )

    def _input_sets_markdown(self) -> str:
        if not self.input_sets:
            return ""
        rows = "\n".join(
            f"| {_md(r.label)} | {_md(r.description)} | {'pass' if r.ok else 'FAIL'} | "
            f"{max((o.max_abs_error for o in r.outputs), default=0.0):.3g} | "
            f"{min((o.cosine for o in r.outputs), default=1.0):.8f} | "
            f"{_md('; '.join([r.failures(), *(f'note: {n}' for n in r.notes())]).strip('; '))} |"
            for r in self.input_sets
        )
        return (
            "\n## Extra input sets\n\n"
            "| input set | what it exercises | verdict | max abs | min cosine | failing outputs |\n"
            "|---|---|---|---|---|---|\n" + rows + "\n"
        )

    def _nodes_markdown(self) -> str:
        d = self.first_divergence
        if not self.nodes and d is None and not self.drift:
            return ""

        def errs(e: NodeError | None, note: str) -> str:
            if e is None:
                return f"{note or 'no RLX value'} |" + " |" * 5
            return (
                f"{e.max_abs:.3g} | {e.max_rel:.3g} | {e.ulp:.3g} | {e.cosine:.8f} | {e.allowed_abs:.3g} | "
                f"{'pass' if e.ok else 'FAIL'} |"
            )

        failing = sum(node_failed(n) for n in self.nodes)
        shown = self.nodes
        head = f"{len(self.nodes)} values, {failing} over budget" if self.nodes else "No per-node values recorded"
        if len(self.nodes) > _MARKDOWN_NODES:
            shown = [n for n in self.nodes if node_failed(n) or is_node(n, d)]
            head += (
                f"; {len(shown)} shown (failing nodes and the first divergence; every node is in report.json "
                "and report.html)"
            )
        lines = [
            f"\n## Per-node parity\n\n{head}. local: the op fed PyTorch's inputs; cumulative: fed the model inputs.\n"
        ]
        if d is not None:
            lim = f" (local max abs {d.local.max_abs:.3g} > {d.local.allowed_abs:.3g})" if d.local is not None else ""
            where = f" in `{_md(d.module_path)}`" if d.module_path else ""
            lines.append(
                f"**First divergence**: #{d.index} `{_md(d.node)}` (`{d.aten}`{where}, {_md(d.source)}){lim}\n"
            )
        if self.drift:
            lines.append(f"**Drift**: {self.drift}\n")
        if not shown:
            return "\n".join(lines) + "\n"
        metrics = ("max abs", "max rel", "ULP", "cosine", "budget", "verdict")
        lines.append(
            "| # | node | ATen op | module path | source | shape | dtype | "
            + " | ".join(f"{kind} {m}" for kind in ("local", "cumulative") for m in metrics)
            + " |\n|"
            + "---|" * 19
        )
        for n in shown:
            mark = "**" if is_node(n, d) else ""
            cells = f"| {n.index} | {mark}{_md(n.node)}{mark} | {n.aten} | {_md(n.module_path)} | {_md(n.source)} "
            cells += f"| {n.shape} "
            cells += f"| {n.dtype} |"
            if n.local is None and n.cumulative is None:
                cells += f" {n.note or 'no RLX value'} |" + " |" * 11
            else:
                cells += f" {errs(n.local, n.note)} {errs(n.cumulative, n.note)}"
            lines.append(cells)
        return "\n".join(lines) + "\n"

    def _sweep_markdown(self) -> str:
        if not self.sweep:
            return ""
        ranges = ", ".join(f"{k} in {lo}..{'inf' if hi is None else hi}" for k, (lo, hi) in self.symbols.items())
        rows = "\n".join(
            f"| {r.label} | {', '.join(f'{k}={v}' for k, v in r.binding.items())} | {'pass' if r.ok else 'FAIL'} | "
            f"{max((o.max_abs_error for o in r.outputs), default=0.0):.3g} | "
            f"{min((o.cosine for o in r.outputs), default=1.0):.8f} | {r.compile_ms:.1f} | {r.run_ms:.2f} | "
            f"{_md('; '.join([r.failures(), *(f'note: {n}' for n in r.notes())]).strip('; '))} |"
            for r in self.sweep
        )
        probes = "; ".join(", ".join(f"{k}={v}" for k, v in b.items()) for b in self.probes)
        odd = "; ".join(", ".join(f"{k}={v}" for k, v in b.items()) for b in self.unreproduced)
        return (
            f"\n## Sweep over the dynamic dims ({ranges})\n\n"
            "One row per sweep point: eager PyTorch at those sizes is the reference. Each symbol moves alone "
            "(the others at their example sizes: typical), then all together (all=min, all=max, alternating).\n\n"
            + (
                f"The symbolic graph was generalized from the lowerings at {probes}, and checked against the "
                "lowering at every sweep point of sizes >= 2.\n\n"
                if probes
                else ""
            )
            + (
                f"At {odd} the lowering itself differs (a size equal to another dim changes a choice); "
                "the rows there compare the symbolic graph with PyTorch.\n\n"
                if odd
                else ""
            )
            + "| point | binding | verdict | max abs | min cosine | compile ms | run ms | failing outputs |\n"
            "|---|---|---|---|---|---|---|---|\n" + rows + "\n"
        )
