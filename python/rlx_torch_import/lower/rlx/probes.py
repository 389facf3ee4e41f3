"""The probes of the defect catalogue (`defects.py`): each runs the raw RLX op on a tiny graph and
returns how RLX is wrong, or None when it computes the op right."""

from __future__ import annotations

import math
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from ... import _core
from ...dtypes import round_half
from ...program import Program, Provenance, RlxNode, ValueDecl
from .harness import close, differs, first, relative, run_raw, same

_RNG = np.random.default_rng(7)
_F64 = _RNG.standard_normal((3, 8)) * 100 + np.pi
_BIG64 = np.array([2**53 + 1, -(2**53) - 3, 7, 2**40 + 5, -9, 0], dtype=np.int64)
_BIG32 = np.array([2**30 + 1, -(2**29) - 3, 7, 2**24 + 1, -9, 0], dtype=np.int32)
_NAN = np.array([[1.0, np.nan, 3.0], [1.0, 2.0, 3.0]])


def compare_f64() -> str | None:
    a = np.array([1.0, 2.0, 1e-300, np.nan, np.inf, np.inf, -1.0, 5.0])
    b = np.array([1.0, 2.5, 0.0, 1.0, np.inf, -np.inf, np.nan, 5.0 + 1e-12])
    return first(
        lambda: same({"Compare": "Eq"}, [(a, "F64"), (b, "F64")], np.equal(a, b), "Bool"),
        lambda: same({"Compare": "Lt"}, [(a, "F64"), (b, "F64")], np.less(a, b), "Bool"),
    )


def compare_narrow() -> str | None:
    lo = np.array([2**24, 2**30, -5, 5], np.int32)
    return first(
        lambda: same({"Compare": "Lt"}, [(lo, "I32"), (lo + 1, "I32")], np.ones(4, bool), "Bool"),
        lambda: same(
            {"Compare": "Lt"},
            [(lo[2:].astype(np.int16), "I16"), (lo[:1:-1].astype(np.int16), "I16")],
            lo[2:] < lo[:1:-1],
            "Bool",
        ),
    )


def binary_narrow() -> str | None:
    return first(
        lambda: same({"Binary": "Add"}, [(_BIG32, "I32"), (np.ones(6, np.int32), "I32")], _BIG32 + 1, "I32"),
        lambda: same(
            {"Binary": "Add"}, [(np.array([100, -100]), "I8"), (np.array([5, 5]), "I8")], np.array([105, -95]), "I8"
        ),
    )


def where_narrow() -> str | None:
    cond = np.array([True, False, True, False, True, True])
    return first(
        lambda: same("Where", [(cond, "Bool"), (cond, "Bool"), (~cond, "Bool")], np.ones(6, bool), "Bool"),
        lambda: same(
            "Where",
            [(cond, "Bool"), (_BIG32, "I32"), (_BIG32[::-1].copy(), "I32")],
            np.where(cond, _BIG32, _BIG32[::-1]),
            "I32",
        ),
    )


def move_narrow() -> str | None:
    arr = np.array([[1, -2, 3], [100, -100, 0]])
    return first(
        lambda: same({"Slice": {"axis": 1, "start": 0, "len": 2, "step": 2}}, [(arr, "I8")], arr[:, ::2], "I8"),
        lambda: same(
            {"Gather": {"axis": 1}}, [(arr != 0, "Bool"), (np.array([2, 0]), "I64")], arr[:, [2, 0]] != 0, "Bool"
        ),
        lambda: same({"Transpose": {"perm": [1, 0]}}, [(arr * 300, "I16")], (arr * 300).T, "I16"),
    )


def move_i32() -> str | None:
    return same({"Reverse": {"axes": [0]}}, [(_BIG32, "I32")], _BIG32[::-1], "I32")


def trilu() -> str | None:
    m = _BIG64.reshape(2, 3)
    inf = np.array([[1.0, np.inf, np.nan], [1.0, 2.0, 3.0]], np.float32)
    return first(
        lambda: same({"Trilu": {"upper": False, "diagonal": 0}}, [(m, "I64")], np.tril(m), "I64"),
        lambda: same({"Trilu": {"upper": True, "diagonal": 0}}, [(_F64, "F64")], np.triu(_F64), "F64"),
        lambda: same({"Trilu": {"upper": False, "diagonal": 0}}, [(inf, "F32")], np.tril(inf), "F32"),
    )


def gather_index() -> str | None:
    table = np.arange(40, dtype=np.float32).reshape(10, 4)
    idx = np.array([1, 5, 9, 0])
    return same({"Gather": {"axis": 0}}, [(table, "F32"), (idx, "I16")], table[idx], "F32")


def gather_elements() -> str | None:
    idx = np.array([[2, 0], [1, 1]])
    data = _F64[:2, :3]
    return first(
        lambda: same(
            {"GatherElements": {"axis": 1}}, [(data, "F64"), (idx, "I64")], np.take_along_axis(data, idx, 1), "F64"
        ),
        lambda: same(
            {"GatherElements": {"axis": 1}},
            [(data.astype(np.float32), "F32"), (idx, "I64")],
            np.take_along_axis(data.astype(np.float32), idx, 1),
            "F32",
        ),
    )


def _scatter_case() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    data, idx, src = np.zeros((2, 4)), np.array([[0, 2, 1], [3, 0, 0]]), _F64[:2, :3]
    want = data.copy()
    for i in range(2):
        for j in range(3):
            want[i, idx[i, j]] += src[i, j]
    return data, idx, src, want


def scatter_f64() -> str | None:
    data, idx, src, want = _scatter_case()
    op = {"ScatterElements": {"axis": 1, "reduction": "Add"}}
    return same(op, [(data, "F64"), (idx, "I64"), (src, "F64")], want, "F64")


def scatter_nonfinite() -> str | None:
    data = np.array([[-np.inf, np.inf, np.nan, 40.0]], np.float32)
    op = {"ScatterElements": {"axis": 1, "reduction": "None"}}
    want = np.array([[3.0, np.inf, -5.0, 40.0]], np.float32)
    return same(op, [(data, "F32"), (np.array([[0, 2, 0]]), "I64"), (np.array([[1.0, -5.0, 3.0]]), "F32")], want, "F32")


def scatter_i64() -> str | None:
    data, idx, _, _ = _scatter_case()
    src = (np.arange(6).reshape(2, 3) * (2**40 + 1)).astype(np.int64)
    want = data.astype(np.int64)
    for i in range(2):
        for j in range(3):
            want[i, idx[i, j]] = src[i, j]
    op = {"ScatterElements": {"axis": 1, "reduction": "None"}}
    return same(op, [(data, "I64"), (idx, "I64"), (src, "I64")], want, "I64")


def _reduce(op: str, x: np.ndarray, dtype: str, axes: list[int]) -> Callable[[], str | None]:
    reducers: dict[str, Callable[..., Any]] = {
        "Sum": np.sum,
        "Mean": np.mean,
        "Max": np.max,
        "Min": np.min,
        "Prod": np.prod,
    }
    fn = reducers[op]
    spec = {"Reduce": {"op": op, "axes": axes, "keep_dim": False}}
    return lambda: same(spec, [(x, dtype)], fn(x, axis=tuple(axes)), dtype)


def reduce_f64() -> str | None:
    small = _F64 / 100
    return first(*(_reduce(op, small, "F64", [1]) for op in ("Mean", "Max", "Min", "Prod")))


def reduce_int() -> str | None:
    return _reduce("Sum", _BIG64.reshape(2, 3), "I64", [1])()


def reduce_nan() -> str | None:
    return _reduce("Max", _NAN.astype(np.float32), "F32", [1])()


def binary_nan() -> str | None:
    a, b = np.array([1.0, np.nan, 3.0], np.float32), np.array([np.nan, 2.0, 1.0], np.float32)
    return same({"Binary": "Max"}, [(a, "F32"), (b, "F32")], np.maximum(a, b), "F32")


def activation_int() -> str | None:
    return first(
        lambda: same({"Activation": "Abs"}, [(_BIG64, "I64")], np.abs(_BIG64), "I64"),
        lambda: same({"Activation": "Neg"}, [(_BIG32, "I32")], -_BIG32, "I32"),
    )


def scan_f64() -> str | None:
    return same({"Cumsum": {"axis": -1, "exclusive": False}}, [(_F64 / 100, "F64")], np.cumsum(_F64 / 100, 1), "F64")


def cumprod() -> str | None:
    ints = np.array([[3, 5, 2**20], [7, -2, 2**30]])
    return first(
        lambda: same({"CumProd": {"axis": -1, "exclusive": False}}, [(ints, "I64")], np.cumprod(ints, 1), "I64"),
        lambda: same(
            {"CumProd": {"axis": -1, "exclusive": False}}, [(_F64 / 100, "F64")], np.cumprod(_F64 / 100, 1), "F64"
        ),
    )


def scan_axis() -> str | None:
    x = _F64.astype(np.float32)
    return same({"Cumsum": {"axis": 0, "exclusive": False}}, [(x, "F32")], np.cumsum(x, 0), "F32")


def sort_f64() -> str | None:
    return same({"Sort": {"axis": 1, "descending": False}}, [(_F64, "F64")], np.sort(_F64, 1), "F64")


def sort_nan() -> str | None:
    x = np.array([[3.0, np.nan, 1.0, -np.inf, 2.0]], np.float32)
    return same({"Sort": {"axis": 1, "descending": False}}, [(x, "F32")], np.sort(x, 1), "F32")


def topk_f64() -> str | None:
    """TopK corrupted memory on float64 (0.2.17), so it runs in a child process."""
    code = (
        "import numpy as np\n"
        "from rlx_torch_import.lower.rlx.harness import run_raw\n"
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


def topk_ties() -> str | None:
    ties = np.array([[1.0, 2.0, 1.0, 2.0, 0.0, 2.0]], np.float32)
    return same({"TopK": {"k": 3}}, [(ties, "F32")], np.array([[3.0, 5.0, 1.0]]), "F32")  # torch's order


def argmax() -> str | None:
    return first(
        lambda: same({"ArgMax": {"axis": 1, "keep_dim": False}}, [(_F64, "F64")], _F64.argmax(1), "F32"),
        lambda: same(
            {"ArgMax": {"axis": 1, "keep_dim": False}}, [(_NAN.astype(np.float32), "F32")], np.array([1, 2]), "F32"
        ),
    )


def matmul_int() -> str | None:
    a, b = np.arange(6).reshape(2, 3), np.arange(6).reshape(3, 2) - 2
    return same("MatMul", [(a, "I64"), (b, "I64")], a @ b, "I64")


def conv_f64() -> str | None:
    x, w = _RNG.standard_normal((1, 1, 3, 3)), _RNG.standard_normal((1, 1, 2, 2))
    want = np.array([[[[np.sum(x[0, 0, i : i + 2, j : j + 2] * w[0, 0]) for j in range(2)] for i in range(2)]]])
    op = {"Conv": {"kernel_size": [2, 2], "stride": [1, 1], "padding": [0, 0], "dilation": [1, 1], "groups": 1}}
    return close(op, [(x, "F64"), (w, "F64")], want, "F64")


def conv_transpose_f64() -> str | None:
    x, w = _RNG.standard_normal((1, 1, 2, 2)), _RNG.standard_normal((1, 1, 2, 2))
    want = np.zeros((1, 1, 3, 3))
    for i in range(2):
        for j in range(2):
            want[0, 0, i : i + 2, j : j + 2] += x[0, 0, i, j] * w[0, 0]
    geometry = {"stride": [1, 1], "padding": [0, 0], "dilation": [1, 1], "output_padding": [0, 0], "groups": 1}
    return close({"ConvTranspose2d": {"kernel_size": [2, 2], **geometry}}, [(x, "F64"), (w, "F64")], want, "F64")


def conv3d_f64() -> str | None:
    x, w = _RNG.standard_normal((1, 1, 3, 3, 3)), _RNG.standard_normal((1, 1, 2, 2, 2))
    want = np.zeros((1, 1, 2, 2, 2))
    for i, j, k in np.ndindex(2, 2, 2):
        want[0, 0, i, j, k] = np.sum(x[0, 0, i : i + 2, j : j + 2, k : k + 2] * w[0, 0])
    op = {"Conv3d": {"stride": [1, 1, 1], "padding": [0, 0, 0], "dilation": [1, 1, 1], "groups": 1}}
    return close(op, [(x, "F64"), (w, "F64")], want, "F64")


def conv_transpose3d_f64() -> str | None:
    x, w = _RNG.standard_normal((1, 1, 2, 2, 2)), _RNG.standard_normal((1, 1, 2, 2, 2))
    want = np.zeros((1, 1, 3, 3, 3))
    for i, j, k in np.ndindex(2, 2, 2):
        want[0, 0, i : i + 2, j : j + 2, k : k + 2] += x[0, 0, i, j, k] * w[0, 0]
    geometry = {"stride": [1] * 3, "padding": [0] * 3, "dilation": [1] * 3, "output_padding": [0] * 3, "groups": 1}
    return close({"ConvTranspose3d": geometry}, [(x, "F64"), (w, "F64")], want, "F64")


def norm_f64() -> str | None:
    x = _RNG.standard_normal((2, 2, 3))
    g, b, m, v = (np.array(p) for p in ([1.5, 0.5], [0.1, -0.2], [0.3, -0.1], [0.8, 1.7]))
    xl = x.transpose(0, 2, 1)
    bn = (xl - m) / np.sqrt(v + 1e-5) * g + b
    flat = x.reshape(2, 2, -1)
    gn = (flat - flat.mean(-1, keepdims=True)) / np.sqrt(flat.var(-1, keepdims=True) + 1e-5)
    gn = gn.reshape(x.shape) * g[:, None] + b[:, None]
    x4 = x.reshape(2, 2, 3, 1)
    return first(
        lambda: close(
            {"BatchNormInference": {"eps": 1e-5}}, [(xl, "F64")] + [(p, "F64") for p in (g, b, m, v)], bn, "F64"
        ),
        lambda: close(
            {"GroupNorm": {"num_groups": 2, "eps": 1e-5}},
            [(x4, "F64"), (g, "F64"), (b, "F64")],
            gn.reshape(x4.shape),
            "F64",
        ),
    )


def pool_f64() -> str | None:
    x = _RNG.standard_normal((1, 1, 4, 4))
    want = x.reshape(1, 1, 2, 2, 2, 2).max(axis=(3, 5))
    op = {"Pool": {"kind": "Max", "kernel_size": [2, 2], "stride": [2, 2], "padding": [0, 0]}}
    return close(op, [(x, "F64")], want, "F64")


def pool_nan() -> str | None:
    x = np.array([[[[1.0, np.nan], [3.0, 4.0]]]], np.float32)
    op = {"Pool": {"kind": "Max", "kernel_size": [2, 2], "stride": [2, 2], "padding": [0, 0]}}
    return same(op, [(x, "F32")], np.array([[[[np.nan]]]], np.float32), "F32")


def elu_small() -> str | None:
    x = np.array([-1e-8, -1e-5, -0.5, 2.0], np.float32)
    want = np.where(x > 0, x, np.expm1(x.astype(np.float64)))
    return relative({"Activation": "Elu"}, x, want, 1e-6)


def exp_range() -> str | None:
    """Exp past RLX's clamp (subnormal results, 0, inf) and of NaN, exactly as IEEE float32 gives them."""
    x = np.array([-200.0, -100.0, -90.0, -np.inf, 88.72, 89.0, np.inf, np.nan, 0.0], np.float32)
    with np.errstate(over="ignore"):
        want = np.exp(x.astype(np.float64)).astype(np.float32)
    try:
        got = run_raw({"Activation": "Exp"}, [(x, "F32")], x.shape, "F32")
    except (RuntimeError, _core.CheckError) as e:  # CheckError: a kernel the core refuses (src/defects.rs)
        return f"RLX failed: {str(e).splitlines()[0][:160]}"
    close = np.isclose(got, want, rtol=1e-5, atol=0.0, equal_nan=True) | (got == want)
    return None if close.all() else f"got {got.tolist()}, expected {want.tolist()}"


def sigmoid_range() -> str | None:
    """Sigmoid where exp(-x) leaves RLX's clamp: IEEE float32 gives 1 / (1 + inf) = 0 below -88.7."""
    x = np.array([-200.0, -100.0, -89.0, -88.0, 0.0, 5.0], np.float32)
    with np.errstate(over="ignore"):
        want = (np.float32(1) / (np.float32(1) + np.exp(-x))).astype(np.float32)
    try:
        got = run_raw({"Activation": "Sigmoid"}, [(x, "F32")], x.shape, "F32")
    except (RuntimeError, _core.CheckError) as e:  # CheckError: a kernel the core refuses (src/defects.rs)
        return f"RLX failed: {str(e).splitlines()[0][:160]}"
    close = np.isclose(got, want, rtol=1e-5, atol=0.0, equal_nan=True)
    return None if close.all() else f"got {got.tolist()}, expected {want.tolist()}"


def tanh_nan() -> str | None:
    x = np.array([np.nan, 0.5, -np.inf, np.inf] * 4, np.float32)
    try:
        got = run_raw({"Activation": "Tanh"}, [(x, "F32")], x.shape, "F32")
    except (RuntimeError, _core.CheckError) as e:  # CheckError: a kernel the core refuses (src/defects.rs)
        return f"RLX failed: {str(e).splitlines()[0][:160]}"
    return None if np.array_equal(np.isnan(got), np.isnan(x)) else f"tanh(NaN) gave {got[0]}"


def erf_tail() -> str | None:
    """Erf near -1 and Gelu below -3, judged relative to the value (float32 keeps ~7 digits there)."""
    x = np.array([-3.0, -4.0, -5.0], np.float32)
    want = 0.5 * x.astype(np.float64) * np.array([math.erfc(-v / math.sqrt(2.0)) for v in x.astype(np.float64)])
    return relative({"Activation": "Gelu"}, x, want, 1e-5)


def relu_nan() -> str | None:
    x = np.array([1.0, np.nan, -2.0], np.float32)
    return same({"Activation": "Relu"}, [(x, "F32")], np.array([1.0, np.nan, 0.0], np.float32), "F32")


def relu_signed_zero() -> str | None:
    x = np.array([-0.0, 0.0, -2.0, 3.0], np.float32)
    try:
        got = run_raw({"Activation": "Relu"}, [(x, "F32")], x.shape, "F32")
    except (RuntimeError, _core.CheckError) as e:  # CheckError: a kernel the core refuses (src/defects.rs)
        return f"RLX failed: {str(e).splitlines()[0][:160]}"
    want = np.array([-0.0, 0.0, 0.0, 3.0], np.float32)  # torch.relu(-0.0) is -0.0 (clamp_min keeps x unless x < 0)
    got_bits, want_bits = ([hex(v) for v in a.view(np.uint32).tolist()] for a in (got, want))
    return None if got_bits == want_bits else f"got bits {got_bits}, expected {want_bits}"


def constant_narrow() -> str | None:
    x = np.array([3, -7, 100], np.int8)
    return same({"Binary": "Add"}, [(x, "I8"), (x, "I8")], x + x, "I8", consts=True)


def boundary_narrow() -> str | None:
    program = Program("probe", inputs=[ValueDecl("x", (4,), "F32")], outputs=["gt"])
    program.nodes.append(RlxNode("zero", {"Constant": {"data": [0, 0, 0, 0]}}, (), (), "F32", Provenance("p", "p")))
    program.nodes.append(RlxNode("gt", {"Compare": "Gt"}, ("x", "zero"), (4,), "Bool", Provenance("p", "p")))
    try:  # the core refuses a Bool graph output while the defect is in its crash table (src/defects.rs)
        model = _core.CompiledModel(_core.program_to_hir_json(program.to_core_json()))
        x = np.array([1.0, -1.0, 0.0, 2.5], np.float32)
        ((data, dtype, _),) = model.run([("x", x.view(np.uint8), "F32")])
    except (RuntimeError, _core.CheckError) as e:
        return f"RLX failed: {str(e).splitlines()[0][:160]}"
    raw = bytes(data)  # the core lends its output bytes through the buffer protocol
    if dtype == "Bool" and list(raw) == [1, 0, 0, 1]:
        return None
    return f"a Bool output comes back as {dtype}, bytes {list(raw)[:16]} (expected Bool 1, 0, 0, 1)"


def transpose_output() -> str | None:
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
    got = np.frombuffer(data, np.float32)  # type: ignore[call-overload]  # numpy: Buffer on 3.12+ only
    return differs(got.reshape(dims), x.T)


def round_fold() -> str | None:
    ties = np.array([0.5, 1.5, 2.5, -0.5, -2.5], np.float32)
    return same({"Activation": "Round"}, [(ties, "F32")], np.round(ties), "F32", consts=True)


def round_to_format() -> str | None:
    x = np.array([70000.0, 65520.0, np.inf, -np.inf, 1.0], np.float32)
    fmt = {"exp_bits": 5, "man_bits": 10, "bias": 15, "max_normal": 65504.0}
    want = np.array([np.inf, np.inf, np.inf, -np.inf, 1.0], np.float32)
    wrong = same({"RoundToFormat": {"format": fmt, "scaling": "None"}}, [(x, "F32")], want, "F32")
    tiny = np.array([1e-39, -3e-40, 2.0**-133, 1.0], np.float32)  # float32 subnormals: bfloat16 keeps them
    bf16 = {"exp_bits": 8, "man_bits": 7, "bias": 127, "max_normal": 3.3895313892515355e38}
    flushed = same(
        {"RoundToFormat": {"format": bf16, "scaling": "None"}}, [(tiny, "F32")], round_half(tiny, "bfloat16"), "F32"
    )
    return "; ".join(f"{what}: {w}" for what, w in (("overflow", wrong), ("subnormal", flushed)) if w) or None


def weight_int16() -> str | None:
    """Bind an I16 parameter and read it back through a Cast (an I32 one binds and reads right)."""
    where = Provenance("p", "p")
    program = Program("probe", params=[ValueDecl("w", (3,), "I16")], outputs=["out"])
    program.nodes.append(RlxNode("out", {"Cast": {"to": "F32"}}, ("w",), (3,), "F32", where))
    w = np.array([1, -2, 300], np.int16)
    try:
        model = _core.CompiledModel(_core.program_to_hir_json(program.to_core_json()))
        model.set_param("w", w.view(np.uint8), "I16")
        ((data, _, dims),) = model.run([])
    except (RuntimeError, _core.CheckError) as e:
        return f"RLX failed: {str(e).splitlines()[0][:160]}"
    got = np.frombuffer(data, np.float32)  # type: ignore[call-overload]  # numpy: Buffer on 3.12+ only
    return differs(got.reshape(dims), w.astype(np.float32))


def zero_size_output() -> str | None:
    """An op whose F64 and I64 results have zero elements (an F32 one runs)."""
    f64, i64 = np.zeros((0, 3), np.float64), np.zeros((0, 3), np.int64)
    return first(
        lambda: same({"Binary": "Add"}, [(f64, "F64"), (f64, "F64")], f64, "F64"),
        lambda: same({"Binary": "Add"}, [(i64, "I64"), (i64, "I64")], i64, "I64"),
    )


def _pt2e_requantize(
    x: np.ndarray, x_scale: float, x_zp: int, w: np.ndarray, w_scale: float, out: tuple[float, int]
) -> np.ndarray:
    """What a PT2E graph computes for dequantize -> matmul -> quantize (torch's `_decomposed.py`): the
    float32 product of the dequantized operands, requantized to int8 codes."""
    xd = (x.astype(np.float32) - np.float32(x_zp)) * np.float32(x_scale)
    wd = w.astype(np.float32) * np.float32(w_scale)
    y = xd @ wd
    return np.clip(np.rint(y * np.float32(1.0 / out[0])) + out[1], -128, 127).astype(np.int8)


def qmatmul_requant() -> str | None:
    """QMatMul/QConv2d against torch's quantized graph (int8 codes equal, bit for bit). QConv2d shares
    QMatMul's requantization (`acc * mult` rounded); a 1x1 convolution is this matmul."""
    rng = np.random.default_rng(3)
    m, k, n = 64, 512, 96
    x_scale, x_zp, w_scale, out_scale, out_zp = 0.02, 3, 0.01, 0.05, -5
    x = rng.integers(-128, 128, (m, k)).astype(np.int8)
    w = rng.integers(-127, 128, (k, n)).astype(np.int8)
    mult = float(np.float32(x_scale * w_scale / out_scale))
    op = {"QMatMul": {"x_zp": x_zp, "w_zp": 0, "out_zp": out_zp, "mult": mult}}
    try:
        got = run_raw(op, [(x, "I8"), (w, "I8"), (np.zeros(n, np.int32), "I32")], (m, n), "I8")
    except RuntimeError as e:
        return f"RLX failed: {str(e).splitlines()[0][:160]}"
    want = _pt2e_requantize(x, x_scale, x_zp, w, w_scale, (out_scale, out_zp))
    wrong = int((got != want).sum())
    return None if wrong == 0 else f"{wrong} of {want.size} int8 codes differ by one step from torch's quantized graph"
