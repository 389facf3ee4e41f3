"""Every known RLX CPU defect: what is wrong, where it was seen, the workaround, and a probe.

This table is the index of `lower/workarounds.py`, the one layer that knows RLX's
defects. Each row names the RLX op kinds and dtypes it hits (`hits`, checked on
every lowered program by `workarounds.audit`, so no op family can emit a raw op
on a known-defect path) and carries a `probe`: a tiny graph that runs the raw RLX
op and compares it with numpy. `tests/test_rlx_defects.py` runs every probe and
fails when a defect is gone, naming the workaround that can then be dropped (the
check an RLX upgrade needs). `docs/rlx-defects.md` is generated from this table.

Rows marked `accepted` have no workaround (cost or semantics documented); the
parity verdict still reports their effect (e.g. NaN positions).
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import _core
from ..dtypes import HALF_DTYPES, INT_DTYPES, NARROW_DTYPES, RECORDS, round_half
from ..program import op_name

# RLX serde dtype -> numpy dtype (bool and narrow integers cross the boundary as F32, see `run_raw`).
_NP = {r.rlx: r.numpy for r in RECORDS.values() if r.name not in HALF_DTYPES}
_BOUNDARY = frozenset(r.rlx for r in RECORDS.values() if r.carrier == r.rlx)
NARROW = frozenset(RECORDS[d].rlx for d in NARROW_DTYPES)
INTS = frozenset(RECORDS[d].rlx for d in INT_DTYPES)
# The ops RLX 0.2.19 keeps I32 in integer form for (rlx-cpu int_storage.rs `integer_safe`); every other
# op touching I32 is legalized through f32, exact only below 2**24.
I32_SAFE = frozenset({"Input", "Param", "Constant", "Cast", "Reshape", "Narrow", "Transpose", "Concat", "Expand"})
MOVES = frozenset(
    {"Transpose", "Slice", "Narrow", "Concat", "Expand", "Gather", "GatherElements", "Reverse", "Roll", "Tile"}
    | {"Pad", "Trilu", "ScatterElements", "ScatterNd", "Where"}
)


def run_raw(
    op: Any,
    inputs: Sequence[tuple[Any, str]],
    out_dims: Sequence[int],
    out_dtype: str,
    *,
    consts: bool = False,
    device: str = "cpu",
) -> np.ndarray:
    """Run one raw RLX op (rlx-ir serde form) on numpy inputs given as (array, RLX dtype).

    Bool/narrow-integer inputs and outputs cross the graph boundary as F32 with a Cast inside
    (RLX cannot pass them natively, see `boundary-narrow`). With `consts`, the inputs are
    Constant nodes instead of graph inputs (to reach constant folding). Returns the output in
    `out_dtype`'s numpy dtype, computed on RLX's `device`. Raises RuntimeError when RLX fails.
    """
    from ..program import Program, Provenance, RlxNode, ValueDecl

    where = Provenance("probe", "probe")
    program = Program("probe")
    feed, names = [], []
    for i, (array, dtype) in enumerate(inputs):
        arr = np.asarray(array)
        carrier = dtype if dtype in _BOUNDARY else "F32"
        data = np.ascontiguousarray(arr.astype(_NP[carrier]))
        name = f"in{i}"
        if consts:
            node = RlxNode(name, {"Constant": {"data": list(data.tobytes())}}, (), arr.shape, carrier, where)
            program.nodes.append(node)
        else:
            program.inputs.append(ValueDecl(name, tuple(arr.shape), carrier))
            feed.append((name, data.reshape(-1).view(np.uint8), carrier))
        if carrier != dtype:
            program.nodes.append(RlxNode(f"c{i}", {"Cast": {"to": dtype}}, (name,), arr.shape, dtype, where))
            name = f"c{i}"
        names.append(name)
    program.nodes.append(RlxNode("op", op, tuple(names), tuple(out_dims), out_dtype, where))
    out, carrier = "op", out_dtype if out_dtype in _BOUNDARY else "F32"
    if carrier != out_dtype:
        program.nodes.append(RlxNode("out", {"Cast": {"to": "F32"}}, ("op",), tuple(out_dims), "F32", where))
        out = "out"
    program.outputs.append(out)
    model = _core.CompiledModel(_core.program_to_hir_json(program.to_core_json()), device)
    ((data, dtype, dims),) = model.run(feed)
    return np.frombuffer(data, dtype=_NP[dtype]).reshape(dims).astype(_NP[out_dtype])


def _differs(got: np.ndarray, want: np.ndarray) -> str | None:
    """None when equal (NaN positions included), else a short description."""
    want = np.asarray(want)
    if got.shape == want.shape and np.array_equal(got, want, equal_nan=got.dtype.kind == "f"):
        return None
    return f"got {got.ravel()[:6].tolist()}, expected {want.ravel()[:6].tolist()}"


def _first(*checks: Callable[[], str | None]) -> str | None:
    """The first wrong result among several raw-op checks."""
    for check in checks:
        found = check()
        if found:
            return found
    return None


def _same(op: Any, inputs: Sequence[tuple[Any, str]], want: Any, out_dtype: str, *, consts: bool = False) -> str | None:
    """Run `op` and compare exactly with `want` (None when RLX is right)."""
    want = np.asarray(want)
    try:
        got = run_raw(op, inputs, want.shape, out_dtype, consts=consts)
    except (RuntimeError, _core.CheckError) as e:  # CheckError: a kernel the core refuses (src/safety.rs)
        return f"RLX failed: {str(e).splitlines()[0][:160]}"
    return _differs(got, want)


# ── probes: each returns how RLX is wrong, or None when it computes the op right ──────────────

_RNG = np.random.default_rng(7)
_F64 = _RNG.standard_normal((3, 8)) * 100 + np.pi
_BIG64 = np.array([2**53 + 1, -(2**53) - 3, 7, 2**40 + 5, -9, 0], dtype=np.int64)
_BIG32 = np.array([2**30 + 1, -(2**29) - 3, 7, 2**24 + 1, -9, 0], dtype=np.int32)
_NAN = np.array([[1.0, np.nan, 3.0], [1.0, 2.0, 3.0]])


def _probe_compare_f64() -> str | None:
    a = np.array([1.0, 2.0, 1e-300, np.nan, np.inf, np.inf, -1.0, 5.0])
    b = np.array([1.0, 2.5, 0.0, 1.0, np.inf, -np.inf, np.nan, 5.0 + 1e-12])
    return _first(
        lambda: _same({"Compare": "Eq"}, [(a, "F64"), (b, "F64")], np.equal(a, b), "Bool"),
        lambda: _same({"Compare": "Lt"}, [(a, "F64"), (b, "F64")], np.less(a, b), "Bool"),
    )


def _probe_compare_narrow() -> str | None:
    lo = np.array([2**24, 2**30, -5, 5], np.int32)
    return _first(
        lambda: _same({"Compare": "Lt"}, [(lo, "I32"), (lo + 1, "I32")], np.ones(4, bool), "Bool"),
        lambda: _same({"Compare": "Lt"}, [(lo[2:].astype(np.int16), "I16"), (lo[:1:-1].astype(np.int16), "I16")],
                      lo[2:] < lo[:1:-1], "Bool"),
    )  # fmt: skip


def _probe_binary_narrow() -> str | None:
    return _first(
        lambda: _same({"Binary": "Add"}, [(_BIG32, "I32"), (np.ones(6, np.int32), "I32")], _BIG32 + 1, "I32"),
        lambda: _same({"Binary": "Add"}, [(np.array([100, -100]), "I8"), (np.array([5, 5]), "I8")],
                      np.array([105, -95]), "I8"),
    )  # fmt: skip


def _probe_where_narrow() -> str | None:
    cond = np.array([True, False, True, False, True, True])
    return _first(
        lambda: _same("Where", [(cond, "Bool"), (cond, "Bool"), (~cond, "Bool")], np.ones(6, bool), "Bool"),
        lambda: _same("Where", [(cond, "Bool"), (_BIG32, "I32"), (_BIG32[::-1].copy(), "I32")],
                      np.where(cond, _BIG32, _BIG32[::-1]), "I32"),
    )  # fmt: skip


def _probe_move_narrow() -> str | None:
    arr = np.array([[1, -2, 3], [100, -100, 0]])
    return _first(
        lambda: _same({"Slice": {"axis": 1, "start": 0, "len": 2, "step": 2}}, [(arr, "I8")], arr[:, ::2], "I8"),
        lambda: _same({"Gather": {"axis": 1}}, [(arr != 0, "Bool"), (np.array([2, 0]), "I64")], arr[:, [2, 0]] != 0,
                      "Bool"),
        lambda: _same({"Transpose": {"perm": [1, 0]}}, [(arr * 300, "I16")], (arr * 300).T, "I16"),
    )  # fmt: skip


def _probe_move_i32() -> str | None:
    return _same({"Reverse": {"axes": [0]}}, [(_BIG32, "I32")], _BIG32[::-1], "I32")


def _probe_trilu() -> str | None:
    m = _BIG64.reshape(2, 3)
    inf = np.array([[1.0, np.inf, np.nan], [1.0, 2.0, 3.0]], np.float32)
    return _first(
        lambda: _same({"Trilu": {"upper": False, "diagonal": 0}}, [(m, "I64")], np.tril(m), "I64"),
        lambda: _same({"Trilu": {"upper": True, "diagonal": 0}}, [(_F64, "F64")], np.triu(_F64), "F64"),
        lambda: _same({"Trilu": {"upper": False, "diagonal": 0}}, [(inf, "F32")], np.tril(inf), "F32"),
    )


def _probe_gather_index() -> str | None:
    table = np.arange(40, dtype=np.float32).reshape(10, 4)
    idx = np.array([1, 5, 9, 0])
    return _same({"Gather": {"axis": 0}}, [(table, "F32"), (idx, "I16")], table[idx], "F32")


def _probe_gather_elements() -> str | None:
    idx = np.array([[2, 0], [1, 1]])
    data = _F64[:2, :3]
    return _first(
        lambda: _same({"GatherElements": {"axis": 1}}, [(data, "F64"), (idx, "I64")],
                      np.take_along_axis(data, idx, 1), "F64"),
        lambda: _same({"GatherElements": {"axis": 1}}, [(data.astype(np.float32), "F32"), (idx, "I64")],
                      np.take_along_axis(data.astype(np.float32), idx, 1), "F32"),
    )  # fmt: skip


def _scatter_case() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    data, idx, src = np.zeros((2, 4)), np.array([[0, 2, 1], [3, 0, 0]]), _F64[:2, :3]
    want = data.copy()
    for i in range(2):
        for j in range(3):
            want[i, idx[i, j]] += src[i, j]
    return data, idx, src, want


def _probe_scatter_f64() -> str | None:
    data, idx, src, want = _scatter_case()
    op = {"ScatterElements": {"axis": 1, "reduction": "Add"}}
    return _same(op, [(data, "F64"), (idx, "I64"), (src, "F64")], want, "F64")


def _probe_scatter_nonfinite() -> str | None:
    data = np.array([[-np.inf, np.inf, np.nan, 40.0]], np.float32)
    op = {"ScatterElements": {"axis": 1, "reduction": "None"}}
    want = np.array([[3.0, np.inf, -5.0, 40.0]], np.float32)
    return _same(op, [(data, "F32"), (np.array([[0, 2, 0]]), "I64"), (np.array([[1.0, -5.0, 3.0]]), "F32")], want,
                 "F32")  # fmt: skip


def _probe_scatter_i64() -> str | None:
    data, idx, _, _ = _scatter_case()
    src = (np.arange(6).reshape(2, 3) * (2**40 + 1)).astype(np.int64)
    want = data.astype(np.int64)
    for i in range(2):
        for j in range(3):
            want[i, idx[i, j]] = src[i, j]
    op = {"ScatterElements": {"axis": 1, "reduction": "None"}}
    return _same(op, [(data, "I64"), (idx, "I64"), (src, "I64")], want, "I64")


def _reduce(op: str, x: np.ndarray, dtype: str, axes: list[int]) -> Callable[[], str | None]:
    fn = {"Sum": np.sum, "Mean": np.mean, "Max": np.max, "Min": np.min, "Prod": np.prod}[op]
    spec = {"Reduce": {"op": op, "axes": axes, "keep_dim": False}}
    return lambda: _same(spec, [(x, dtype)], fn(x, axis=tuple(axes)), dtype)


def _probe_reduce_f64() -> str | None:
    small = _F64 / 100
    return _first(*(_reduce(op, small, "F64", [1]) for op in ("Mean", "Max", "Min", "Prod")))


def _probe_reduce_int() -> str | None:
    return _reduce("Sum", _BIG64.reshape(2, 3), "I64", [1])()


def _probe_reduce_nan() -> str | None:
    return _reduce("Max", _NAN.astype(np.float32), "F32", [1])()


def _probe_binary_nan() -> str | None:
    a, b = np.array([1.0, np.nan, 3.0], np.float32), np.array([np.nan, 2.0, 1.0], np.float32)
    return _same({"Binary": "Max"}, [(a, "F32"), (b, "F32")], np.maximum(a, b), "F32")


def _probe_activation_int() -> str | None:
    return _first(
        lambda: _same({"Activation": "Abs"}, [(_BIG64, "I64")], np.abs(_BIG64), "I64"),
        lambda: _same({"Activation": "Neg"}, [(_BIG32, "I32")], -_BIG32, "I32"),
    )


def _probe_scan_f64() -> str | None:
    return _same({"Cumsum": {"axis": -1, "exclusive": False}}, [(_F64 / 100, "F64")], np.cumsum(_F64 / 100, 1), "F64")


def _probe_cumprod() -> str | None:
    ints = np.array([[3, 5, 2**20], [7, -2, 2**30]])
    return _first(
        lambda: _same({"CumProd": {"axis": -1, "exclusive": False}}, [(ints, "I64")], np.cumprod(ints, 1), "I64"),
        lambda: _same({"CumProd": {"axis": -1, "exclusive": False}}, [(_F64 / 100, "F64")],
                      np.cumprod(_F64 / 100, 1), "F64"),
    )  # fmt: skip


def _probe_scan_axis() -> str | None:
    x = _F64.astype(np.float32)
    return _same({"Cumsum": {"axis": 0, "exclusive": False}}, [(x, "F32")], np.cumsum(x, 0), "F32")


def _probe_sort_f64() -> str | None:
    return _same({"Sort": {"axis": 1, "descending": False}}, [(_F64, "F64")], np.sort(_F64, 1), "F64")


def _probe_sort_nan() -> str | None:
    x = np.array([[3.0, np.nan, 1.0, -np.inf, 2.0]], np.float32)
    return _same({"Sort": {"axis": 1, "descending": False}}, [(x, "F32")], np.sort(x, 1), "F32")


def _probe_topk_f64() -> str | None:
    """TopK corrupted memory on float64 (0.2.17), so it runs in a child process."""
    code = (
        "import numpy as np\n"
        "from rlx_torch_import.lower.defects import run_raw\n"
        "x = np.random.default_rng(0).standard_normal((4, 9))\n"
        "got = run_raw({'TopK': {'k': 3}}, [(x, 'F64')], (4, 3), 'F32')\n"
        "want = np.argsort(-x, 1, kind='stable')[:, :3]\n"
        "print('ok' if np.array_equal(got, want) else "
        "f'got {got.ravel()[:6].tolist()}, expected {want.ravel()[:6].astype(float).tolist()}')\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    if run.returncode != 0:
        return f"the process died (exit {run.returncode})"
    return None if run.stdout.strip() == "ok" else run.stdout.strip()


def _probe_topk_ties() -> str | None:
    ties = np.array([[1.0, 2.0, 1.0, 2.0, 0.0, 2.0]], np.float32)
    return _same({"TopK": {"k": 3}}, [(ties, "F32")], np.array([[3.0, 5.0, 1.0]]), "F32")  # torch's order


def _probe_argmax() -> str | None:
    return _first(
        lambda: _same({"ArgMax": {"axis": 1, "keep_dim": False}}, [(_F64, "F64")], _F64.argmax(1), "F32"),
        lambda: _same({"ArgMax": {"axis": 1, "keep_dim": False}}, [(_NAN.astype(np.float32), "F32")],
                      np.array([1, 2]), "F32"),
    )  # fmt: skip


def _probe_matmul_int() -> str | None:
    a, b = np.arange(6).reshape(2, 3), np.arange(6).reshape(3, 2) - 2
    return _same("MatMul", [(a, "I64"), (b, "I64")], a @ b, "I64")


def _probe_conv_f64() -> str | None:
    x, w = _RNG.standard_normal((1, 1, 3, 3)), _RNG.standard_normal((1, 1, 2, 2))
    want = np.array([[[[np.sum(x[0, 0, i : i + 2, j : j + 2] * w[0, 0]) for j in range(2)] for i in range(2)]]])
    op = {"Conv": {"kernel_size": [2, 2], "stride": [1, 1], "padding": [0, 0], "dilation": [1, 1], "groups": 1}}
    return _close(op, [(x, "F64"), (w, "F64")], want, "F64")


def _probe_conv_transpose_f64() -> str | None:
    x, w = _RNG.standard_normal((1, 1, 2, 2)), _RNG.standard_normal((1, 1, 2, 2))
    want = np.zeros((1, 1, 3, 3))
    for i in range(2):
        for j in range(2):
            want[0, 0, i : i + 2, j : j + 2] += x[0, 0, i, j] * w[0, 0]
    geometry = {"stride": [1, 1], "padding": [0, 0], "dilation": [1, 1], "output_padding": [0, 0], "groups": 1}
    return _close({"ConvTranspose2d": {"kernel_size": [2, 2], **geometry}}, [(x, "F64"), (w, "F64")], want, "F64")


def _probe_conv3d_f64() -> str | None:
    x, w = _RNG.standard_normal((1, 1, 3, 3, 3)), _RNG.standard_normal((1, 1, 2, 2, 2))
    want = np.zeros((1, 1, 2, 2, 2))
    for i, j, k in np.ndindex(2, 2, 2):
        want[0, 0, i, j, k] = np.sum(x[0, 0, i : i + 2, j : j + 2, k : k + 2] * w[0, 0])
    op = {"Conv3d": {"stride": [1, 1, 1], "padding": [0, 0, 0], "dilation": [1, 1, 1], "groups": 1}}
    return _close(op, [(x, "F64"), (w, "F64")], want, "F64")


def _probe_conv_transpose3d_f64() -> str | None:
    x, w = _RNG.standard_normal((1, 1, 2, 2, 2)), _RNG.standard_normal((1, 1, 2, 2, 2))
    want = np.zeros((1, 1, 3, 3, 3))
    for i, j, k in np.ndindex(2, 2, 2):
        want[0, 0, i : i + 2, j : j + 2, k : k + 2] += x[0, 0, i, j, k] * w[0, 0]
    geometry = {"stride": [1] * 3, "padding": [0] * 3, "dilation": [1] * 3, "output_padding": [0] * 3, "groups": 1}
    return _close({"ConvTranspose3d": geometry}, [(x, "F64"), (w, "F64")], want, "F64")


def _probe_norm_f64() -> str | None:
    x = _RNG.standard_normal((2, 2, 3))
    g, b, m, v = (np.array(p) for p in ([1.5, 0.5], [0.1, -0.2], [0.3, -0.1], [0.8, 1.7]))
    xl = x.transpose(0, 2, 1)
    bn = (xl - m) / np.sqrt(v + 1e-5) * g + b
    flat = x.reshape(2, 2, -1)
    gn = (flat - flat.mean(-1, keepdims=True)) / np.sqrt(flat.var(-1, keepdims=True) + 1e-5)
    gn = gn.reshape(x.shape) * g[:, None] + b[:, None]
    x4 = x.reshape(2, 2, 3, 1)
    return _first(
        lambda: _close({"BatchNormInference": {"eps": 1e-5}}, [(xl, "F64")] + [(p, "F64") for p in (g, b, m, v)], bn,
                       "F64"),
        lambda: _close({"GroupNorm": {"num_groups": 2, "eps": 1e-5}}, [(x4, "F64"), (g, "F64"), (b, "F64")],
                       gn.reshape(x4.shape), "F64"),
    )  # fmt: skip


def _probe_pool_f64() -> str | None:
    x = _RNG.standard_normal((1, 1, 4, 4))
    want = x.reshape(1, 1, 2, 2, 2, 2).max(axis=(3, 5))
    op = {"Pool": {"kind": "Max", "kernel_size": [2, 2], "stride": [2, 2], "padding": [0, 0]}}
    return _close(op, [(x, "F64")], want, "F64")


def _probe_pool_nan() -> str | None:
    x = np.array([[[[1.0, np.nan], [3.0, 4.0]]]], np.float32)
    op = {"Pool": {"kind": "Max", "kernel_size": [2, 2], "stride": [2, 2], "padding": [0, 0]}}
    return _same(op, [(x, "F32")], np.array([[[[np.nan]]]], np.float32), "F32")


def _relative(op: Any, x: np.ndarray, want: np.ndarray, limit: float) -> str | None:
    """Run a float32 activation; None when every result is within `limit` relative error of `want`."""
    try:
        got = run_raw(op, [(x, "F32")], x.shape, "F32")
    except (RuntimeError, _core.CheckError) as e:  # CheckError: a kernel the core refuses (src/safety.rs)
        return f"RLX failed: {str(e).splitlines()[0][:160]}"
    worst = float(np.max(np.abs(got - want) / np.abs(want)))
    return None if worst < limit else f"relative error up to {worst:.2g} (got {got.tolist()}, expected {want.tolist()})"


def _probe_elu_small() -> str | None:
    x = np.array([-1e-8, -1e-5, -0.5, 2.0], np.float32)
    want = np.where(x > 0, x, np.expm1(x.astype(np.float64)))
    return _relative({"Activation": "Elu"}, x, want, 1e-6)


def _probe_exp_range() -> str | None:
    """Exp past RLX's clamp (subnormal results, 0, inf) and of NaN, exactly as IEEE float32 gives them."""
    x = np.array([-200.0, -100.0, -90.0, -np.inf, 88.72, 89.0, np.inf, np.nan, 0.0], np.float32)
    with np.errstate(over="ignore"):
        want = np.exp(x.astype(np.float64)).astype(np.float32)
    try:
        got = run_raw({"Activation": "Exp"}, [(x, "F32")], x.shape, "F32")
    except (RuntimeError, _core.CheckError) as e:  # CheckError: a kernel the core refuses (src/safety.rs)
        return f"RLX failed: {str(e).splitlines()[0][:160]}"
    close = np.isclose(got, want, rtol=1e-5, atol=0.0, equal_nan=True) | (got == want)
    return None if close.all() else f"got {got.tolist()}, expected {want.tolist()}"


def _probe_sigmoid_range() -> str | None:
    """Sigmoid where exp(-x) leaves RLX's clamp: IEEE float32 gives 1 / (1 + inf) = 0 below -88.7."""
    x = np.array([-200.0, -100.0, -89.0, -88.0, 0.0, 5.0], np.float32)
    with np.errstate(over="ignore"):
        want = (np.float32(1) / (np.float32(1) + np.exp(-x))).astype(np.float32)
    try:
        got = run_raw({"Activation": "Sigmoid"}, [(x, "F32")], x.shape, "F32")
    except (RuntimeError, _core.CheckError) as e:  # CheckError: a kernel the core refuses (src/safety.rs)
        return f"RLX failed: {str(e).splitlines()[0][:160]}"
    close = np.isclose(got, want, rtol=1e-5, atol=0.0, equal_nan=True)
    return None if close.all() else f"got {got.tolist()}, expected {want.tolist()}"


def _probe_tanh_nan() -> str | None:
    x = np.array([np.nan, 0.5, -np.inf, np.inf] * 4, np.float32)
    try:
        got = run_raw({"Activation": "Tanh"}, [(x, "F32")], x.shape, "F32")
    except (RuntimeError, _core.CheckError) as e:  # CheckError: a kernel the core refuses (src/safety.rs)
        return f"RLX failed: {str(e).splitlines()[0][:160]}"
    return None if np.array_equal(np.isnan(got), np.isnan(x)) else f"tanh(NaN) gave {got[0]}"


def _exp(op: Any, ins: Sequence[str], out: str) -> bool:
    return _kind(op) == "Activation" and op.get("Activation") == "Exp" and "F32" in ins


def _probe_erf_tail() -> str | None:
    """Erf near -1 and Gelu below -3, judged relative to the value (float32 keeps ~7 digits there)."""
    x = np.array([-3.0, -4.0, -5.0], np.float32)
    want = 0.5 * x.astype(np.float64) * np.array([math.erfc(-v / math.sqrt(2.0)) for v in x.astype(np.float64)])
    return _relative({"Activation": "Gelu"}, x, want, 1e-5)


def _probe_relu_nan() -> str | None:
    x = np.array([1.0, np.nan, -2.0], np.float32)
    return _same({"Activation": "Relu"}, [(x, "F32")], np.array([1.0, np.nan, 0.0], np.float32), "F32")


def _probe_constant_narrow() -> str | None:
    x = np.array([3, -7, 100], np.int8)
    return _same({"Binary": "Add"}, [(x, "I8"), (x, "I8")], x + x, "I8", consts=True)


def _probe_boundary_narrow() -> str | None:
    from ..program import Program, Provenance, RlxNode, ValueDecl

    program = Program("probe", inputs=[ValueDecl("x", (4,), "F32")], outputs=["gt"])
    program.nodes.append(RlxNode("zero", {"Constant": {"data": [0, 0, 0, 0]}}, (), (), "F32", Provenance("p", "p")))
    program.nodes.append(RlxNode("gt", {"Compare": "Gt"}, ("x", "zero"), (4,), "Bool", Provenance("p", "p")))
    try:  # the core refuses a Bool graph output while the defect is in its crash table (src/safety.rs)
        model = _core.CompiledModel(_core.program_to_hir_json(program.to_core_json()))
        x = np.array([1.0, -1.0, 0.0, 2.5], np.float32)
        ((data, dtype, _),) = model.run([("x", x.view(np.uint8), "F32")])
    except (RuntimeError, _core.CheckError) as e:
        return f"RLX failed: {str(e).splitlines()[0][:160]}"
    data = bytes(data)  # the core lends its output bytes through the buffer protocol
    if dtype == "Bool" and list(data) == [1, 0, 0, 1]:
        return None
    return f"a Bool output comes back as {dtype}, bytes {list(data)[:16]} (expected Bool 1, 0, 0, 1)"


def _probe_transpose_output() -> str | None:
    from ..program import Program, Provenance, RlxNode, ValueDecl

    where = Provenance("p", "p")
    program = Program("probe", inputs=[ValueDecl("x", (2, 3), "F32")], outputs=["mm", "t"])
    program.nodes.append(RlxNode("t", {"Transpose": {"perm": [1, 0]}}, ("x",), (3, 2), "F32", where))
    program.nodes.append(RlxNode("mm", "MatMul", ("x", "t"), (2, 2), "F32", where))
    x = np.arange(1.0, 7.0, dtype=np.float32).reshape(2, 3)
    try:
        model = _core.CompiledModel(_core.program_to_hir_json(program.to_core_json()))
        _, (data, _, dims) = model.run([("x", x.reshape(-1).view(np.uint8), "F32")])
    except (RuntimeError, _core.CheckError) as e:
        return f"RLX failed: {str(e).splitlines()[0][:160]}"
    return _differs(np.frombuffer(data, np.float32).reshape(dims), x.T)


def _probe_round_fold() -> str | None:
    ties = np.array([0.5, 1.5, 2.5, -0.5, -2.5], np.float32)
    return _same({"Activation": "Round"}, [(ties, "F32")], np.round(ties), "F32", consts=True)


def _probe_round_to_format() -> str | None:
    x = np.array([70000.0, 65520.0, np.inf, -np.inf, 1.0], np.float32)
    fmt = {"exp_bits": 5, "man_bits": 10, "bias": 15, "max_normal": 65504.0}
    want = np.array([np.inf, np.inf, np.inf, -np.inf, 1.0], np.float32)
    wrong = _same({"RoundToFormat": {"format": fmt, "scaling": "None"}}, [(x, "F32")], want, "F32")
    tiny = np.array([1e-39, -3e-40, 2.0**-133, 1.0], np.float32)  # float32 subnormals: bfloat16 keeps them
    bf16 = {"exp_bits": 8, "man_bits": 7, "bias": 127, "max_normal": 3.3895313892515355e38}
    flushed = _same(
        {"RoundToFormat": {"format": bf16, "scaling": "None"}}, [(tiny, "F32")], round_half(tiny, "bfloat16"), "F32"
    )
    return "; ".join(f"{what}: {w}" for what, w in (("overflow", wrong), ("subnormal", flushed)) if w) or None


def _close(op: Any, inputs: Sequence[tuple[Any, str]], want: Any, out_dtype: str) -> str | None:
    """Like `_same`, for results that are rounded differently (relative error 1e-9)."""
    want = np.asarray(want)
    try:
        got = run_raw(op, inputs, want.shape, out_dtype)
    except (RuntimeError, _core.CheckError) as e:  # CheckError: a kernel the core refuses (src/safety.rs)
        return f"RLX failed: {str(e).splitlines()[0][:160]}"
    if np.allclose(got, want, rtol=1e-9, atol=1e-12, equal_nan=True):
        return None
    return f"got {got.ravel()[:6].tolist()}, expected {want.ravel()[:6].tolist()}"


# ── the table ─────────────────────────────────────────────────────────────────────────────────


Hits = Callable[[Any, Sequence[str], str], bool]


@dataclass(frozen=True)
class Defect:
    """One RLX CPU defect. `hits(op, input_dtypes, out_dtype)` (RLX dtypes) says whether a raw node of
    this shape would meet it; `probe()` returns how RLX is wrong today, or None once it is fixed."""

    key: str
    what: str
    seen: str
    workaround: str
    hits: Hits
    probe: Callable[[], str | None]
    accepted: bool = False
    nan_only: bool = False  # only matters when an operand may hold NaN (the audit skips NaN-free operands)


def _kind(op: Any) -> str:
    return op_name(op).split(".")[0]


def _is(*kinds: str, dtypes: frozenset[str] | None = None, at: Sequence[int] | None = None) -> Hits:
    """A raw op of one of `kinds` whose operands (positions `at`, default all) include one of `dtypes`."""

    def hits(op: Any, ins: Sequence[str], out: str) -> bool:
        if _kind(op) not in kinds:
            return False
        picked = [ins[i] for i in at if i < len(ins)] if at is not None else list(ins)
        return dtypes is None or any(d in dtypes for d in picked)

    return hits


def _compare_f64(op: Any, ins: Sequence[str], out: str) -> bool:
    return _kind(op) == "Compare" and "F64" in ins


def _reduce_hits(op: Any, ins: Sequence[str], out: str) -> bool:
    if _kind(op) != "Reduce" or not ins:
        return False
    red = op["Reduce"]["op"]
    return (ins[0] == "F64" and red != "Sum") or ins[0] in INTS


# Operand positions holding the data an op moves (the others are indices or conditions).
DATA_POSITIONS = {
    "Gather": (0,),
    "GatherElements": (0,),
    "ScatterElements": (0, 2),
    "ScatterNd": (0, 2),
    "Where": (1, 2),
}


def _data_dtypes(op: Any, ins: Sequence[str]) -> list[str]:
    return [ins[i] for i in DATA_POSITIONS.get(_kind(op), range(len(ins))) if i < len(ins)]


def _i32_moves(op: Any, ins: Sequence[str], out: str) -> bool:
    kind = _kind(op)
    return kind in MOVES and kind not in I32_SAFE and "I32" in (*_data_dtypes(op, ins), out)


def _narrow_moves(op: Any, ins: Sequence[str], out: str) -> bool:
    return _kind(op) in MOVES and any(d in NARROW for d in _data_dtypes(op, ins))


def _index_dtype(op: Any, ins: Sequence[str], out: str) -> bool:
    """Gather/scatter indices other than I64 (and F32, which the element kernels read exactly)."""
    kind = _kind(op)
    if kind not in ("Gather", "GatherElements", "ScatterElements", "ScatterNd") or len(ins) < 2:
        return False
    return ins[1] != "I64" and not (kind != "Gather" and ins[1] == "F32")


def _gather_elements(op: Any, ins: Sequence[str], out: str) -> bool:
    return _kind(op) == "GatherElements" and len(ins) == 2 and (ins[0], ins[1]) not in (("F32", "F32"), ("I64", "I64"))


def _elu(op: Any, ins: Sequence[str], out: str) -> bool:
    return _kind(op) == "Activation" and op.get("Activation") == "Elu"


def _activation_int(op: Any, ins: Sequence[str], out: str) -> bool:
    return _kind(op) == "Activation" and bool(ins) and ins[0] in INTS


def _binary_nan(op: Any, ins: Sequence[str], out: str) -> bool:
    return _kind(op) == "Binary" and op.get("Binary") in ("Max", "Min") and out in ("F32", "F64")


def _reduce_nan(op: Any, ins: Sequence[str], out: str) -> bool:
    return _kind(op) == "Reduce" and op["Reduce"]["op"] in ("Max", "Min") and out in ("F32", "F64")


def _scan_axis(op: Any, ins: Sequence[str], out: str) -> bool:
    kind = _kind(op)
    return kind in ("Cumsum", "CumProd") and op[kind]["axis"] != -1


def _constant_narrow(op: Any, ins: Sequence[str], out: str) -> bool:
    return _kind(op) == "Constant" and out in NARROW


def _round(op: Any, ins: Sequence[str], out: str) -> bool:
    return op_name(op) == "Activation.Round"


def _round_to_format(op: Any, ins: Sequence[str], out: str) -> bool:
    return _kind(op) == "RoundToFormat"


def _never(op: Any, ins: Sequence[str], out: str) -> bool:
    return False


F64_ONLY = frozenset({"F64"})
_I64 = frozenset({"I64"})
_SEEN = "0.2.17, 0.2.19"  # each probe run against both builds

DEFECTS: tuple[Defect, ...] = (
    Defect(
        "compare-f64",
        "Compare on F64 reads the operands as pairs of f32 (every comparison op)",
        _SEEN,
        "the sign of a - b (F64 Sub and Sign are exact) compared as I64; NaN found through an f32 cast, equal "
        "infinities through a + b",
        _compare_f64,
        _probe_compare_f64,
    ),
    Defect(
        "compare-narrow-int",
        "Compare on I32 is legalized through f32 (wrong above 2**24); on I16/I8 it misreads the operands",
        _SEEN,
        "integer operands narrower than I64 are compared as I64",
        _is("Compare", dtypes=frozenset({"I32", "I16", "I8", "U8"})),
        _probe_compare_narrow,
    ),
    Defect(
        "binary-narrow-int",
        "Binary on I32 is legalized through f32 (wrong above 2**24); on I16/I8/U8 it misreads the operands",
        _SEEN,
        "narrower integers compute in I64 and are cast back (a wrapping cast, as torch wraps)",
        _is("Binary", dtypes=frozenset({"I32", "I16", "I8", "U8"})),
        _probe_binary_narrow,
    ),
    Defect(
        "where-narrow",
        "Where selecting Bool/I8/U8/I16 values mixes the bytes up; selecting I32 goes through f32",
        _SEEN,
        "Bool and narrow values are selected as F32 (exact), I32 as I64",
        _is("Where", dtypes=frozenset({*NARROW, "I32"}), at=(1, 2)),
        _probe_where_narrow,
    ),
    Defect(
        "move-narrow",
        "data-movement kernels (strided Slice, Gather, Transpose, ...) move Bool/I8/U8/I16 with the wrong width",
        _SEEN,
        "Bool and narrow-integer data moves as F32 (exact) between Casts",
        _narrow_moves,
        _probe_move_narrow,
    ),
    Defect(
        "move-i32",
        "data movement other than Reshape/Narrow/Transpose/Concat/Expand legalizes I32 through f32",
        "0.2.19",
        "I32 data moves as I64 (RLX's integer kernels are exact) and is cast back",
        _i32_moves,
        _probe_move_i32,
    ),
    Defect(
        "trilu",
        "Trilu returns garbage for I64, F64, Bool and I32; on F32 it multiplies by the mask, so a masked-out "
        "inf or NaN becomes NaN instead of 0",
        _SEEN,
        "a Where against a constant triangular mask",
        _is("Trilu"),
        _probe_trilu,
    ),
    Defect(
        "gather-index-dtype",
        "Gather with an I8/U8/I16 index reads the wrong rows (I32 is legalized through f32: exact below 2**24)",
        _SEEN,
        "every gather/scatter index is cast to I64 (the element kernels also read F32 indices exactly)",
        _index_dtype,
        _probe_gather_index,
    ),
    Defect(
        "gather-elements",
        "GatherElements gives its output the index's dtype: right only for F32 data with an F32 index "
        "and I64 data with an I64 index; F64 data is wrong with either",
        _SEEN,
        "F32 data takes an F32 index (exact below 2**24), I64 data an I64 index, any other dtype a Gather "
        "on the flattened tensor with computed I64 positions",
        _gather_elements,
        _probe_gather_elements,
    ),
    Defect(
        "scatter-f64",
        "ScatterElements and ScatterNd corrupt F64 data (overwrite and add)",
        _SEEN,
        "overwrite: the position of each update is scattered in F32 and the winners gathered (exact for every "
        "value); add: F64 one-hot matmuls; multiply/max/min: a dense [target, update] one-hot reduced exactly",
        _is("ScatterElements", "ScatterNd", dtypes=F64_ONLY, at=(0, 2)),
        _probe_scatter_f64,
    ),
    Defect(
        "scatter-nonfinite",
        "ScatterElements reads inf/NaN in its data input as 0 (untouched positions lose them too)",
        _SEEN,
        "where the data may be non-finite: x op (the updates reduced from the op's finite identity) at touched "
        "positions, x elsewhere",
        _is("ScatterElements", dtypes=frozenset({"F32"}), at=(0,)),
        _probe_scatter_nonfinite,
    ),
    Defect(
        "scatter-i64",
        "ScatterElements and ScatterNd corrupt I64 data",
        _SEEN,
        "overwrite: the winning updates are gathered (exact); add sums hi*2**24 + lo halves by F64 one-hot "
        "matmuls (exact while sums < 2**53); multiply/max/min: a dense [target, update] one-hot reduced exactly",
        _is("ScatterElements", "ScatterNd", dtypes=frozenset({"I64", "I32"}), at=(0, 2)),
        _probe_scatter_i64,
    ),
    Defect(
        "reduce-f64",
        "Reduce Mean/Max/Min/Prod on F64 return garbage (Sum is right)",
        _SEEN,
        "Mean = Sum / n; Max/Min/Prod by pairwise halving with exact F64 Binary ops",
        _reduce_hits,
        _probe_reduce_f64,
    ),
    Defect(
        "reduce-int",
        "Reduce on I64 goes through f64 (inexact above 2**53), on I32 through f32",
        _SEEN,
        "integer Sum/Max/Min/Prod by pairwise halving with exact (wrapping) I64 Binary ops",
        _never,  # audited by reduce-f64's predicate, which covers integer inputs too
        _probe_reduce_int,
    ),
    Defect(
        "reduce-nan",
        "Reduce Max/Min skip NaN (torch propagates it)",
        _SEEN,
        "NaN where any reduced element is NaN (a Where on an any-NaN reduction)",
        _reduce_nan,
        _probe_reduce_nan,
        nan_only=True,
    ),
    Defect(
        "binary-nan",
        "Binary Max/Min skip NaN (torch.maximum/minimum/clamp propagate it)",
        _SEEN,
        "NaN where either operand is NaN (Where on x != x)",
        _binary_nan,
        _probe_binary_nan,
        nan_only=True,
    ),
    Defect(
        "activation-int",
        "Activation on I64 reads the bits as floats; on I32 it goes through f32",
        _SEEN,
        "Abs/Neg/Sign/Relu/Floor/Ceil/Round/Trunc exactly with I64 ops; other activations through F64",
        _activation_int,
        _probe_activation_int,
    ),
    Defect(
        "scan-f64",
        "Cumsum on F64 returns garbage",
        _SEEN,
        "a log-step (Hillis-Steele) scan of F64 Adds",
        _is("Cumsum", "CumProd", dtypes=F64_ONLY),
        _probe_scan_f64,
    ),
    Defect(
        "cumprod-int",
        "CumProd on I64 and F64 returns garbage (I64 Cumsum is right)",
        _SEEN,
        "a log-step (Hillis-Steele) scan of exact Muls",
        _is("CumProd", dtypes=frozenset({"I64", "I32", *NARROW})),
        _probe_cumprod,
    ),
    Defect(
        "scan-axis",
        "Cumsum/CumProd panic unless they scan the last axis",
        _SEEN,
        "the scanned axis is moved last and back",
        _scan_axis,
        _probe_scan_axis,
    ),
    Defect(
        "sort-f64",
        "Sort/ArgSort on F64 return garbage",
        _SEEN,
        "an exact stable counting sort (rank = #smaller + #equal before), n <= 4096",
        _is("Sort", "ArgSort", dtypes=frozenset({"F64", *INTS, "Bool"})),
        _probe_sort_f64,
    ),
    Defect(
        "sort-nan",
        "F32 Sort/ArgSort leave NaN in place (torch sorts NaN above +inf)",
        _SEEN,
        "accepted: NaN inputs to sort/topk are rare; the verdict reports misplaced NaN",
        _never,
        _probe_sort_nan,
        accepted=True,
    ),
    Defect(
        "topk-f64",
        "TopK on F64 returns wrong indices (0.2.19); on 0.2.17 it corrupted memory",
        _SEEN,
        "F64 and integer top-k run the exact counting sort and keep the first k",
        _is("TopK", dtypes=frozenset({"F64", *INTS, "Bool"})),
        _probe_topk_f64,
    ),
    Defect(
        "topk-ties",
        "TopK orders tied values by index; torch's CPU top-k returns ties in another order",
        _SEEN,
        "accepted: values agree; tied indices may differ, and the verdict says so",
        _never,
        _probe_topk_ties,
        accepted=True,
    ),
    Defect(
        "argmax",
        "ArgMax/ArgMin on F64 return garbage; on F32 they skip NaN",
        _SEEN,
        "the first index where x equals its (NaN-propagating) extreme",
        _is("ArgMax", "ArgMin"),
        _probe_argmax,
    ),
    Defect(
        "matmul-int",
        "MatMul on I64 returns zeros",
        _SEEN,
        "broadcast I64 Mul and a pairwise I64 Sum over the inner axis (exact, wrapping)",
        _is("MatMul", dtypes=frozenset({*INTS, "Bool"})),
        _probe_matmul_int,
    ),
    Defect(
        "conv-f64",
        "Conv on F64 or integer data reads it as f32",
        _SEEN,
        "an F64 convolution as strided-slice taps contracted by F64 MatMul (integers through it, exact while "
        "|sums| < 2**53)",
        _is("Conv", dtypes=frozenset({"F64", *INTS})),
        _probe_conv_f64,
    ),
    Defect(
        "conv-transpose-f64",
        "ConvTranspose2d on F64 or integer data reads it as f32",
        _SEEN,
        "an F64 stride-1 convolution (the conv-f64 route) of the zero-stuffed, padded input with the flipped "
        "kernel (integers through it, exact while |sums| < 2**53; transposed convolution, col2im)",
        _is("ConvTranspose2d", dtypes=frozenset({"F64", *INTS})),
        _probe_conv_transpose_f64,
    ),
    Defect(
        "conv3d-f64",
        "Conv3d on F64 or integer data reads it as f32",
        "0.2.19",
        "the conv-f64 route over three spatial axes",
        _is("Conv3d", dtypes=frozenset({"F64", *INTS})),
        _probe_conv3d_f64,
    ),
    Defect(
        "conv-transpose3d-f64",
        "ConvTranspose3d on F64 or integer data reads it as f32",
        "0.2.19",
        "the conv-transpose-f64 route over three spatial axes",
        _is("ConvTranspose3d", dtypes=frozenset({"F64", *INTS})),
        _probe_conv_transpose3d_f64,
    ),
    Defect(
        "norm-f64",
        "BatchNormInference and GroupNorm on F64 return garbage (LayerNorm/RmsNorm are right)",
        _SEEN,
        "their formulas in F64 elementwise ops and Sum reductions",
        _is("BatchNormInference", "GroupNorm", dtypes=F64_ONLY),
        _probe_norm_f64,
    ),
    Defect(
        "pool-f64",
        "Pool on F64 reads the data as f32",
        _SEEN,
        "F64 pooling unrolls each window into strided slices folded with exact Max/Add",
        _is("Pool", dtypes=F64_ONLY),
        _probe_pool_f64,
    ),
    Defect(
        "pool-nan",
        "Pool Max skips NaN (torch's max_pool returns NaN for a window holding one)",
        _SEEN,
        "accepted for the fused pool (cost); max-pool with indices and float64 pooling follow torch; the verdict "
        "reports NaN positions",
        _never,
        _probe_pool_nan,
        accepted=True,
    ),
    Defect(
        "elu-expm1",
        "Activation Elu computes exp(x) - 1, so negative x of magnitude below ~1e-4 loses digits (-1e-8 gives 0)",
        "0.2.19",
        "x where x > 0, else an exact expm1 (Kahan's (u - 1) * x / log(u)), as torch's kernel computes it",
        _elu,
        _probe_elu_small,
    ),
    Defect(
        "exp-range",
        "Activation Exp clamps x to [-87.3, 88.7]: exp(-inf) and exp(-100) give 1.2e-38 (not 0 or a subnormal), "
        "exp(88.72) 3.3e38 and exp(inf) a finite 3.4e38 (not inf); the AVX kernel maps NaN to 1.2e-38",
        "0.2.19",
        "RLX's Exp where |x| <= 87, exp(x / 2) ** 2 outside (IEEE underflow to subnormals and 0, overflow to inf), "
        "NaN passed through",
        _exp,
        _probe_exp_range,
    ),
    Defect(
        "sigmoid-tail",
        "Activation Sigmoid shares Exp's clamp: below -88.7 it gives 3e-39 where float32 1 / (1 + exp(-x)) is 0, "
        "so log(sigmoid(x)) stops at -88.7 instead of -inf",
        "0.2.19",
        "accepted: an absolute error below 1e-38 inside every budget; a select on every sigmoid made LSTM/GRU "
        "2.5x slower; log(sigmoid(x)) of such x fails verification (use logsigmoid, which is exact)",
        _never,
        _probe_sigmoid_range,
        accepted=True,
    ),
    Defect(
        "tanh-nan",
        "Activation Tanh maps NaN to -1 (torch.tanh keeps NaN)",
        "0.2.19",
        "accepted: a NaN-keeping select on every tanh made LSTM/GRU 2.5x slower; the verdict reports NaN positions",
        _never,
        _probe_tanh_nan,
        accepted=True,
    ),
    Defect(
        "erf-tail",
        "Activation Erf/Gelu lose relative accuracy in the negative tail (Gelu(-5) 4% off and worse below, erf "
        "near ±1 up to ~80 ulp); absolute errors stay below 2e-7",
        "0.2.19",
        "accepted: inside every float budget; an exact erfc would add ~20 nodes to every GELU",
        _never,
        _probe_erf_tail,
        accepted=True,
    ),
    Defect(
        "relu-nan",
        "Activation Relu maps NaN to 0 (torch.relu keeps NaN)",
        _SEEN,
        "accepted: a NaN-keeping ReLU would break RLX's conv/matmul + activation fusion; the verdict reports NaN "
        "positions",
        _never,
        _probe_relu_nan,
        accepted=True,
    ),
    Defect(
        "constant-narrow",
        "Constant nodes of Bool/I8/U8/I16 are misread by the f32-aliased arena",
        _SEEN,
        "such constants are stored as F32 (exact) and Cast",
        _constant_narrow,
        _probe_constant_narrow,
    ),
    Defect(
        "boundary-narrow",
        "Bool/I8/U8/I16 graph inputs and outputs cannot cross run_typed (one byte written, four read)",
        _SEEN,
        "they cross as F32 (exact) with a Cast inside the graph; meta.json records rlx_dtype",
        _never,  # checked by registry.lower, which declares the boundary
        _probe_boundary_narrow,
    ),
    Defect(
        "round-to-format",
        "RoundToFormat saturates at the format's largest value (IEEE rounding gives ±inf past it), and flushes "
        "f32-subnormal inputs to zero (bfloat16's own subnormals)",
        "0.2.19",
        "magnitudes at or past the overflow threshold become x * inf; bfloat16 subnormals are rounded as "
        "integer multiples of 2**-133 (x * 2**133 rounded half to even, scaled back; both scalings exact)",
        _round_to_format,
        _probe_round_to_format,
    ),
    Defect(
        "transpose-output",
        "a 2-D F32 Transpose whose only reader is a MatMul is folded into the GEMM and never computed, even when "
        "it is also a graph output: that output reads a buffer nothing wrote",
        "0.2.19",
        "a graph output made by a Transpose is read through a same-shape Reshape, a second reader that keeps it "
        "computed (`workarounds.protect_outputs`)",
        _never,  # a property of the graph's outputs, not of one node: checked by registry.lower
        _probe_transpose_output,
    ),
    Defect(
        "round-fold",
        "constant folding rounds ties away from zero (the 0.2.19 kernel rounds half to even)",
        _SEEN,
        "round half to even from Floor: floor(x + 0.5), minus 1 on odd ties",
        _round,
        _probe_round_fold,
    ),
)


@contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Discard what is written to file descriptor 2 (Rust's panic hook writes there directly)."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def main() -> int:
    """Run every probe against the installed RLX; print which defects are still there."""

    print(f"RLX {_core.rlx_version()}")
    gone = 0
    for d in DEFECTS:
        with _quiet_stderr():  # a probe that makes RLX panic prints the panic (and a backtrace) there
            found = d.probe()
        gone += found is None
        print(f"{'present' if found else 'GONE   '}  {d.key:22s} {found or 'drop the workaround: ' + d.workaround}")
    return 1 if gone else 0


if __name__ == "__main__":
    sys.exit(main())
