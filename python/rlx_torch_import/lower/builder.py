"""The builder a lowering function appends RLX nodes with (`Builder`).

Lowerings return RLX values; the driver in `registry.py` wires them to node outputs.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..dtypes import FLOAT_DTYPES, HALF_DTYPES, NARROWER_INTS, compute_rlx, promote
from ..program import Program, Provenance, RlxNode
from .call import Value, norm_axis
from .rlx import exact, rules_elementwise, workarounds


class Builder:
    """Appends RLX nodes to a program under the provenance of the node being lowered.

    `emit` is what lowerings call: it passes every op through `workarounds.route`, the one
    layer that knows RLX's defects. The helpers below add torch's semantics (promotion,
    broadcasting, axis handling) on top of `emit`.
    """

    def __init__(self, program: Program, *, share_scalars: bool = True) -> None:
        self.program = program
        # Off for the lowerings a symbolic graph is generalized from: a size's one-element constant
        # (`scalar_tensor(s0)`) must stay its own node even where it equals a literal at one binding.
        self.share_scalars = share_scalars
        self.provenance = Provenance(aten="", node="")
        self._counter = 0
        self._consts: dict[tuple[bytes, str, tuple[int, ...]], Value] = {}
        self._const_values: dict[str, np.ndarray] = {}
        self._memo: dict[tuple[Any, ...], Any] = {}
        self.nan_free_ids: set[str] = set()
        self.finite_ids: set[str] = set()
        self.compensated: dict[str, str] = {}  # raw node id -> the defect the layer corrects downstream
        # integer values -> the float32 value they were cast from, equal element for element (quantization
        # codes clamped into range before the cast): a cast back to float32 reuses it (`exact_float`)
        self.float_views: dict[str, Value] = {}
        # weight-only quantization (torch-ir `quantize`): the scheme ("int8"/"int4") and the weights it lists
        self.quantized: tuple[str, frozenset[str]] = ("", frozenset())

    def _fresh(self) -> str:
        self._counter += 1
        return f"{self.provenance.node or 'v'}#{self._counter}"

    def emit(self, op: Any, inputs: list[Value], dims: tuple[int, ...] | list[int], dtype: str) -> Value:
        """Add RLX op `op` (rlx-ir serde form) with result `dims` and torch-ir `dtype`, routed around
        every known RLX defect (lower/rlx/workarounds.py)."""
        return workarounds.route(self, op, list(inputs), tuple(int(d) for d in dims), dtype)

    def raw(
        self, op: Any, inputs: list[Value], dims: tuple[int, ...] | list[int], dtype: str, *, compensated: str = ""
    ) -> Value:
        """Append one RLX node as it is. Only the workaround layer calls this: `rlx.audit.audit` rejects
        any raw node on a known-defect path unless the layer names the defect it `compensated` around it."""
        value = Value(self._fresh(), tuple(int(d) for d in dims), dtype)
        self.program.nodes.append(
            RlxNode(value.id, op, tuple(v.id for v in inputs), value.dims, compute_rlx(dtype), self.provenance)
        )
        if compensated:
            self.compensated[value.id] = compensated
        return value

    def memo(self, key: tuple[Any, ...], build: Any) -> Any:
        """`build()` once per key (e.g. one exact sort serving both Sort and ArgSort)."""
        if key not in self._memo:
            self._memo[key] = build()
        return self._memo[key]

    # ── constants ────────────────────────────────────────────────────────
    def const(self, array: np.ndarray | float | int | bool, dtype: str) -> Value:
        """A constant tensor of `dtype`; identical constants are shared (one-element ones only with
        `share_scalars`)."""
        arr = np.asarray(array)
        key = (arr.astype(np.float64 if arr.dtype.kind == "f" else arr.dtype).tobytes(), dtype, tuple(arr.shape))
        if key not in self._consts or (not self.share_scalars and arr.size == 1):
            value = workarounds.constant(self, arr, dtype)
            self._consts[key] = value
            self._const_values[value.id] = arr
            if arr.dtype.kind != "f" or not np.isnan(arr).any():
                self.nan_free_ids.add(value.id)
        return self._consts[key]

    def opmath(self, value: float | int, dtype: str) -> Value:
        """A scalar as torch's CPU kernels read it in a `dtype` computation: for float16/bfloat16, in the
        op-math type float32, unrounded (e.g. `x * 0.1`, `x // 0.1`, leaky_relu's slope; torch's
        `opmath_type` and `iter.original_scalar_value`), labelled `dtype`; otherwise `const(value, dtype)`.
        Python scalars that torch converts to the tensor's dtype first (add, sub, remainder, fmod, pow,
        clamp, fill values) stay `const`."""
        if dtype not in HALF_DTYPES:
            return self.const(value, dtype)
        v = self.const(np.float32(value), "float32")
        return Value(v.id, v.dims, dtype)

    def constant_value(self, v: Value) -> np.ndarray | None:
        """The numbers of a constant made by `const` (None for computed values)."""
        return self._const_values.get(v.id)

    def known(self, v: Value, max_elements: int = 1 << 18) -> np.ndarray | None:
        """The numbers of `v` when it depends on constants only (e.g. a mask built from `arange`),
        computed by RLX itself (`passes.constants.evaluate`); None for values that depend on inputs or
        parameters, or have more than `max_elements` elements. Dtype: numpy's spelling of `v`'s RLX dtype."""
        from .passes.constants import constant_ids, evaluate

        if math.prod(v.dims) > max_elements:
            return None
        literal = self.constant_value(v)
        if literal is not None:
            return np.asarray(literal)
        # A value never changes once emitted, so one evaluation serves every lowering that asks
        # (Hugging Face's layers all read the same mask).
        return self.memo(
            ("known", v.id),
            lambda: evaluate(self.program, [v.id])[v.id] if v.id in constant_ids(self.program) else None,
        )

    def finite(self, v: Value) -> bool:
        """Whether `v` cannot hold inf or NaN: not a float, a finite constant, or a float made from integers/bool."""
        if v.dtype not in FLOAT_DTYPES or v.id in self.finite_ids:
            return True
        known = self.constant_value(v)
        return known is not None and bool(np.isfinite(np.asarray(known, dtype=np.float64)).all())

    def nan_free(self, v: Value) -> bool:
        """Whether `v` cannot hold NaN: not a float, a NaN-free constant, or a float made from integers/bool."""
        if v.dtype not in FLOAT_DTYPES or v.id in self.nan_free_ids:
            return True
        known = self.constant_value(v)
        return known is not None and not np.isnan(np.asarray(known, dtype=np.float64)).any()

    def scalar_like(self, value: float | int | bool, like: Value) -> Value:
        """A rank-0 constant of `like`'s dtype."""
        return self.const(value, like.dtype)

    # ── shape helpers ────────────────────────────────────────────────────
    def reshape(self, x: Value, dims: tuple[int, ...] | list[int]) -> Value:
        dims = tuple(int(d) for d in dims)
        if dims == x.dims:
            return x
        return self.emit({"Reshape": {"new_shape": list(dims)}}, [x], dims, x.dtype)

    def transpose(self, x: Value, perm: list[int]) -> Value:
        if perm == list(range(x.rank)):
            return x
        dims = tuple(x.dims[p] for p in perm)
        return self.emit({"Transpose": {"perm": perm}}, [x], dims, x.dtype)

    def narrow(self, x: Value, axis: int, start: int, length: int) -> Value:
        """x[start : start + length] along `axis` (no node when it is the whole axis)."""
        if start == 0 and length == x.dims[axis]:
            return x
        dims = list(x.dims)
        dims[axis] = length
        return self.emit({"Narrow": {"axis": axis, "start": start, "len": length}}, [x], dims, x.dtype)

    def strided(self, x: Value, axis: int, start: int, length: int, step: int) -> Value:
        """x[start : start + length * step : step] along `axis` (a Narrow when the step does not matter)."""
        if step == 1 or length == 1:
            return self.narrow(x, axis, start, length)
        dims = list(x.dims)
        dims[axis] = length
        return self.emit({"Slice": {"axis": axis, "start": start, "len": length, "step": step}}, [x], dims, x.dtype)

    def narrow_to(self, x: Value, dims: tuple[int, ...]) -> Value:
        """The leading `dims` block of x (torch's scatter/gather read only that much of src)."""
        for axis, length in enumerate(dims):
            x = self.narrow(x, axis, 0, length)
        return x

    def to_last_axis(self, x: Value, axis: int) -> tuple[Value, list[int]]:
        """Move `axis` last (for kernels that only work there); returns the permutation back."""
        perm = [a for a in range(x.rank) if a != axis] + [axis]
        back = [perm.index(a) for a in range(x.rank)]
        return self.transpose(x, perm), back

    def expand(self, x: Value, dims: tuple[int, ...]) -> Value:
        if x.dims == tuple(dims):
            return x
        if x.rank < len(dims):
            x = self.reshape(x, (1,) * (len(dims) - x.rank) + x.dims)
        return self.emit({"Expand": {"target_shape": list(dims)}}, [x], dims, x.dtype)

    def cast(self, x: Value, dtype: str) -> Value:
        """Explicit Cast node. Half dtypes compute as F32: a cast to one rounds to its grid (as torch's cast
        does), a cast from one only relabels."""
        if x.dtype == dtype:
            return x
        if dtype == "float32" and x.id in self.float_views:
            return self.float_views[x.id]
        if (dtype in HALF_DTYPES and x.dtype in ("float32", "float64")) or (dtype, x.dtype) == ("bfloat16", "float16"):
            return self.round_to(x, dtype)
        if compute_rlx(x.dtype) == compute_rlx(dtype):
            return Value(x.id, x.dims, dtype)
        if x.dtype in FLOAT_DTYPES and dtype in NARROWER_INTS:  # float -> narrower int wraps through int64, as
            x = self.cast(x, "int64")  # torch's conversion does (RLX's direct float -> int cast saturates)
        y = self.emit({"Cast": {"to": compute_rlx(dtype)}}, [x], x.dims, dtype)
        if x.dtype not in FLOAT_DTYPES:
            self.nan_free_ids.add(y.id)
            self.finite_ids.add(y.id)
        return y

    def is_param(self, v: Value) -> bool:
        """Whether `v` is a stored parameter (a weight or buffer) of the program."""
        return any(p.name == v.id for p in self.program.params)

    def derived_param(self, base: str, recipe: Any, dims: tuple[int, ...], dtype: str = "float32") -> Value:
        """A parameter of `dtype` computed once at conversion by `recipe` (a `Program.derived_params` entry;
        the bundle writer computes it, `weights.materialize`); one per distinct recipe."""
        from .passes._common import claim_param

        params = {p.name: p for p in self.program.params}
        return Value(claim_param(self.program, params, base, recipe, dims, compute_rlx(dtype)), dims, dtype)

    def exact_cast(self, x: Value, dtype: str) -> Value:
        """`cast(x, dtype)` for a float32 `x` whose elements the integer `dtype` holds exactly (integral and in
        range, e.g. clamped quantization codes): later casts of the result back to float32 reuse `x`."""
        y = self.cast(x, dtype)
        if x.dtype == "float32" and y.id != x.id:
            self.float_views[y.id] = x
        return y

    def round_to(self, x: Value, dtype: str) -> Value:
        """float32 values rounded to half dtype `dtype`'s grid (nearest even, overflow to ±inf), labelled `dtype`."""
        return rules_elementwise.round_to(self, x, dtype)

    # ── arithmetic helpers (torch semantics; the layer handles RLX's dtypes) ──
    def binary(self, op: str, a: Value, b: Value, out_dtype: str | None = None) -> Value:
        """Broadcasting binary op; both operands are first cast to the promoted dtype."""
        dtype = out_dtype or promote(a.dtype, b.dtype)
        a, b = self.cast(a, dtype), self.cast(b, dtype)
        dims = tuple(np.broadcast_shapes(a.dims, b.dims))
        return self.emit({"Binary": op}, [a, b], dims, dtype)

    def unary(self, activation: str, x: Value) -> Value:
        """Elementwise RLX Activation in x's dtype."""
        return self.emit({"Activation": activation}, [x], x.dims, x.dtype)

    def trunc(self, x: Value) -> Value:
        """Round toward zero (torch.trunc), signed zeros, ±inf and NaN kept (`rlx.exact.trunc`)."""
        return exact.trunc(self, x)

    def compare(self, op: str, a: Value, b: Value) -> Value:
        """Elementwise comparison -> bool, operands promoted to a common dtype."""
        dtype = promote(a.dtype, b.dtype)
        a, b = self.cast(a, dtype), self.cast(b, dtype)
        dims = tuple(np.broadcast_shapes(a.dims, b.dims))
        return self.emit({"Compare": op}, [a, b], dims, "bool")

    def reduce(self, op: str, x: Value, axes: list[int], keep_dim: bool) -> Value:
        """Reduce Sum/Mean/Max/Min/Prod over `axes` (Max/Min propagate NaN, as torch's do)."""
        axes = sorted({norm_axis(a, x.rank) for a in axes} - ({0} if x.rank == 0 else set()))  # rank 0: nothing
        dims = tuple((1 if i in axes else d) for i, d in enumerate(x.dims) if keep_dim or i not in axes)
        if not axes:
            return self.reshape(x, dims)
        spec = {"Reduce": {"op": op, "axes": axes, "keep_dim": keep_dim}}
        return self.memo(
            ("reduce", x.id, x.dtype, op, tuple(axes), keep_dim), lambda: self.emit(spec, [x], dims, x.dtype)
        )

    def arg_extreme(self, op: str, x: Value, axis: int, keep_dim: bool) -> tuple[Value, Value]:
        """(values, int64 indices) of Max/Min along `axis`; the first index on ties (NaN counts as the
        extreme), like torch."""
        if x.rank == 0:  # a scalar is its own extreme, at index 0
            return x, self.const(np.zeros((), dtype=np.int64), "int64")
        values = self.reduce(op, x, [axis], keep_dim=True)
        dims = tuple((1 if a == axis else d) for a, d in enumerate(x.dims) if keep_dim or a != axis)
        kind = "ArgMax" if op == "Max" else "ArgMin"
        idx = self.emit({kind: {"axis": axis, "keep_dim": keep_dim}}, [x], dims, "float32")
        return self.reshape(values, dims), self.cast(idx, "int64")

    def matmul(self, a: Value, b: Value) -> Value:
        dtype = promote(a.dtype, b.dtype)
        batch = tuple(np.broadcast_shapes(a.dims[:-2], b.dims[:-2]))
        return self.emit("MatMul", [self.cast(a, dtype), self.cast(b, dtype)], (*batch, a.dims[-2], b.dims[-1]), dtype)

    def as_float(self, x: Value) -> Value:
        """Integer/bool tensors become float32 (torch's default float) before float math."""
        return x if x.dtype in FLOAT_DTYPES else self.cast(x, "float32")
