"""Complex values in the lowered program: carried as float pairs, and how a node that reads or gives one
is lowered.

RLX has no complex dtype. A complex tensor of torch shape S (complex64 / complex128) is carried as a float
tensor of shape S + [2] (float32 / float64), real and imaginary parts interleaved on the last axis exactly
as `torch.view_as_real` lays them out, so `view_as_real` / `view_as_complex` cost nothing. The driver
(`registry.py`) binds such a value as a `ComplexValue` (a `Value` that knows its complex dtype) and routes
every node that touches one through `lower_node`, which picks, in this order:

1. the node's own lowering, when its family is complex-aware (`COMPLEX_FAMILIES`: `lower/ops/fft.py`,
   `lower/ops/complex.py`): it reads and returns carried values;
2. a complex override registered with `@lowers_complex` (complex multiply, divide, exp, abs, ...) for an
   op whose registered lowering is real-only; it may fall back to computing part by part (`ByParts`);
3. part by part with the real lowering, for ops linear in their complex operands: every data-movement op
   (`kind="movement"`: each result element is a copy of an input element) and the additive ops of
   `ADDITIVE` (a real operand of an additive op counts as complex with a zero imaginary part).

Any other op on a complex operand is refused by the capability pass (`complex_reason`), naming the op.
docs/design.md (az).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

from ..dtypes import complex_part, is_complex, to_rlx
from ..program import ValueDecl
from ..torchir import Node, TensorSpec
from .builder import Builder
from .call import Call, Value

# Families whose lowerings take and give complex values in their carried form.
COMPLEX_FAMILIES = ("fft", "complex")

# Real-only lowerings that are right part by part because the op is additive in its operands: a real
# operand contributes to the real part only (its imaginary part is zero).
ADDITIVE = frozenset(
    {
        "aten.add.Tensor",
        "aten.sub.Tensor",
        "aten.neg.default",
        "aten.sum.dim_IntList",
        "aten.sum.default",
        "aten.mean.dim",
        "aten.mean.default",
        "aten.cat.default",
        "aten.stack.default",
        "aten.where.self",
    }
)

ByParts = Callable[[Builder, bool], "Value | list[Value | None]"]
ComplexFn = Callable[[Builder, Call, ByParts], "Value | list[Value | None]"]
ComplexCheck = Callable[[Call], "str | None"]


@dataclass(frozen=True)
class ComplexValue(Value):
    """A complex tensor carried as float pairs: `dims` = torch shape + [2], `dtype` = the parts' float dtype;
    `complex` is its torch dtype (complex64 / complex128)."""

    complex: str = "complex64"

    @property
    def shape(self) -> tuple[int, ...]:
        """The torch shape (dims without the trailing pair axis)."""
        return self.dims[:-1]


@dataclass(frozen=True)
class ComplexLowering:
    """One `@lowers_complex` override: how an op with a real-only lowering computes on complex values."""

    target: str
    fn: ComplexFn
    check: ComplexCheck | None
    family: str
    kind: str = "elementwise"  # the per-node budget class of the complex form (`registry.KINDS`)


COMPLEX_REGISTRY: dict[str, ComplexLowering] = {}


def lowers_complex(
    *targets: str, check: ComplexCheck | None = None, kind: str = "elementwise"
) -> Callable[[ComplexFn], ComplexFn]:
    """Register `fn(builder, call, by_parts)` as the complex form of each ATen overload in `targets`.
    `call`'s tensor arguments are carried values (`ComplexValue` where complex); `by_parts(builder, scaling)`
    runs the op's real lowering on real and imaginary parts separately (for the cases that are linear:
    `scaling` when a real operand multiplies both parts, else a real operand is zero in the imaginary part)."""

    def decorate(fn: ComplexFn) -> ComplexFn:
        family = fn.__module__.rsplit(".", 1)[-1]
        for target in targets:
            if target in COMPLEX_REGISTRY:
                raise RuntimeError(f"complex lowering for {target} registered twice")
            COMPLEX_REGISTRY[target] = ComplexLowering(target, fn, check, family, kind)
        return fn

    return decorate


def carried(name: str, shape: tuple[int, ...], dtype: str) -> Value:
    """The program value for a torch value `name` of `shape`/`dtype` (complex: a `ComplexValue`)."""
    if is_complex(dtype):
        return ComplexValue(name, (*shape, 2), complex_part(dtype), dtype)
    return Value(name, shape, dtype)


def as_carried(value: Value, dtype: str) -> Value:
    """`value` (a lowering's result) bound as torch dtype `dtype`: complex results become `ComplexValue`."""
    if is_complex(dtype) and not isinstance(value, ComplexValue):
        return ComplexValue(value.id, value.dims, value.dtype, dtype)
    return value


def carried_spec(spec: TensorSpec) -> tuple[tuple[int, ...], str]:
    """(dims, dtype) a lowering's result for torch output `spec` must have (complex: shape + [2], parts)."""
    from ..sizes import sizes

    dims = sizes(spec.shape)
    return ((*dims, 2), complex_part(spec.dtype)) if is_complex(spec.dtype) else (dims, spec.dtype)


def _tensor_names(args: list[Any]) -> list[str]:
    names: list[str] = []
    for arg in args:
        ((tag, payload),) = arg.items()
        if tag == "tensor":
            names.append(payload)
        elif tag == "list":
            names.extend(_tensor_names(payload))
    return names


def touches_complex(node: Node, values: dict[str, Value]) -> bool:
    """Whether a node reads or gives a complex value (`values`: the program's values by torch name)."""
    reads = _tensor_names([*node.args, *node.kwargs.values()])
    return any(isinstance(values.get(n), ComplexValue) for n in reads) or any(is_complex(o.dtype) for o in node.outputs)


def checked_call(
    node: Node, values: dict[str, Value], lowering: Any, make_call: Callable[[Node, dict[str, Value]], Call]
) -> tuple[str | None, Call]:
    """For the capability pass: why `node` cannot be lowered for its complex values (None when it can, or
    touches none), and the call its lowering's own `check` sees (a real lowering's: one part's)."""
    call = make_call(node, values)
    if not touches_complex(node, values):
        return None, call
    reason = complex_reason(call, lowering.family, lowering.kind)
    if reason or lowering.family in COMPLEX_FAMILIES:
        return reason, call
    return None, part_call(node, values, make_call)


def declare(decls: list[ValueDecl], name: str, shape: tuple[int, ...], dtype: str) -> Value:
    """Declare a complex graph input or parameter `name` in `decls` as its float pairs; its value."""
    decls.append(ValueDecl(name, (*shape, 2), to_rlx(complex_part(dtype))))
    return carried(name, shape, dtype)


def part_call(node: Node, values: dict[str, Value], make_call: Callable[[Node, dict[str, Value]], Call]) -> Call:
    """The call a real lowering's `check` sees for one part of a complex node (shapes and dtypes only)."""
    names = _tensor_names([*node.args, *node.kwargs.values()])
    real = dict(values)
    for name in names:
        v = values.get(name)
        if isinstance(v, ComplexValue):
            real[name] = Value(v.id, v.shape, v.dtype)
    return make_call(_part_node(node), real)


def complex_kind(node: Node, complex_values: set[str]) -> str | None:
    """The budget kind of `node` when it runs an op's complex form (`@lowers_complex`: it reads one of
    `complex_values`, the names of the program's complex values), else None (its lowering's own kind)."""
    override = COMPLEX_REGISTRY.get(node.target)
    if override is None or not any(n in complex_values for n in _tensor_names([*node.args, *node.kwargs.values()])):
        return None
    return override.kind


@cache
def _scalar_arguments(target: str) -> tuple[str, ...]:
    """The names of an ATen overload's number arguments (`Scalar`, `float`: fill values)."""
    import torch

    if not target.startswith("aten."):
        return ()
    _, packet, overload = target.split(".", 2)
    schema = getattr(getattr(torch.ops.aten, packet), overload)._schema
    numbers = ("number", "float", "Optional[number]", "Optional[float]")
    return tuple(a.name for a in schema.arguments if str(a.type) in numbers)


def _nonzero_scalar(call: Call) -> str | None:
    """`name=value` of a nonzero number argument of a movement op (a fill value: `masked_fill`, `pad`, ...)."""
    for name in _scalar_arguments(call.target):
        value = call.get(name, 0)
        if not isinstance(value, Value) and value not in (0, 0.0, False):
            return f"{name}={value!r}"
    return None


def complex_reason(call: Call, family: str, kind: str) -> str | None:
    """Why a node touching complex values cannot be lowered (None when it can): see the module docstring.
    `family`/`kind` are those of the op's registered lowering."""
    if family in COMPLEX_FAMILIES:
        return None
    override = COMPLEX_REGISTRY.get(call.target)
    if override is not None:
        return override.check(call) if override.check is not None else None
    if call.target in ADDITIVE:
        return None
    if kind == "movement":
        fill = _nonzero_scalar(call)
        if fill:
            return f"{fill} on a complex tensor is not supported (part by part it would fill both parts; only 0)"
        return None
    return (
        "complex operands are not supported by this op (complex values are carried as float pairs; "
        "docs/usage.md lists the complex ops)"
    )


def _part(b: Builder, v: ComplexValue, index: int) -> Value:
    """Real (`index` 0) or imaginary (1) part of a carried complex value, shape = its torch shape."""

    def build() -> Value:
        picked = b.narrow(v, v.rank - 1, index, 1)
        return b.reshape(picked, v.shape)

    found: Value = b.memo(("complex-part", v.id, index), build)
    return found


def parts(b: Builder, v: Value) -> tuple[Value, Value | None]:
    """(real, imaginary) of a value; a real value's imaginary part is None (zero)."""
    if isinstance(v, ComplexValue):
        return _part(b, v, 0), _part(b, v, 1)
    return v, None


def pair(b: Builder, re: Value, im: Value, dtype: str) -> ComplexValue:
    """The carried complex value (torch dtype `dtype`) with parts `re`, `im` (same dims). The parts are
    remembered: `parts` of the result gives them back without reading the pairs (RLX's interleaving
    concat and the strided reads of one part cost more than the arithmetic; an unread pair is dropped)."""
    part = complex_part(dtype)
    re, im = b.cast(re, part), b.cast(im, part)
    dims = (*re.dims, 1)
    out = b.emit({"Concat": {"axis": re.rank}}, [b.reshape(re, dims), b.reshape(im, dims)], (*re.dims, 2), part)
    b.memo(("complex-part", out.id, 0), lambda: re)
    b.memo(("complex-part", out.id, 1), lambda: im)
    b.memo(("complex-pair", out.id), lambda: (re, im))
    return ComplexValue(out.id, out.dims, out.dtype, dtype)


def known_parts(b: Builder, v: Value) -> tuple[Value, Value] | None:
    """The parts `v` was made of by `pair`, or None (then reading them costs strided reads)."""
    found: tuple[Value, Value] | None = b.memo(("complex-pair", v.id), lambda: None)
    return found


def _part_node(node: Node) -> Node:
    """`node` with its complex outputs relabelled as their parts' float dtype (for a real lowering)."""
    outputs = [replace(o, dtype=complex_part(o.dtype)) if is_complex(o.dtype) else o for o in node.outputs]
    return replace(node, outputs=outputs)


def _by_parts(
    b: Builder,
    node: Node,
    values: dict[str, Value],
    fn: Callable[[Builder, Call], Any],
    make_call: Callable[[Node, dict[str, Value]], Call],
    scaling: bool = False,
) -> Value | list[Value | None]:
    """Run the real lowering `fn` once on the real parts and once on the imaginary parts of the node's complex
    operands and pair the results. A real float operand is itself in the real pass; in the imaginary pass it
    is zero (an additive op) or itself again (`scaling`: it multiplies or divides both parts)."""
    names = _tensor_names([*node.args, *node.kwargs.values()])
    real, imag = dict(values), dict(values)
    for name in names:
        v = values[name]
        re, im = parts(b, v)
        real[name] = re
        # a real operand adds nothing to the imaginary part (of an additive op: any but a bool condition; of a
        # movement op: a float source of values; its integer and bool operands are indices and masks)
        summand = (
            v.dtype != "bool" if node.target in ADDITIVE else v.dtype in ("float32", "float64", "float16", "bfloat16")
        )
        if im is None and not scaling and summand:
            im = b.expand(b.const(0, v.dtype), v.dims)
        imag[name] = im if im is not None else v
    relabelled = _part_node(node)
    res_re, res_im = fn(b, make_call(relabelled, real)), fn(b, make_call(relabelled, imag))
    many = isinstance(res_re, list)
    outs_re = res_re if isinstance(res_re, list) else [res_re]
    outs_im = res_im if isinstance(res_im, list) else [res_im]
    results: list[Value | None] = []
    for spec, re_v, im_v in zip(node.outputs, outs_re, outs_im, strict=False):
        if re_v is None or im_v is None or not is_complex(spec.dtype):
            results.append(re_v)
        else:
            results.append(pair(b, re_v, im_v, spec.dtype))
    return results if many else results[0]  # type: ignore[return-value]


def lower_node(
    b: Builder,
    node: Node,
    call: Call,
    values: dict[str, Value],
    lowering: Any,
    make_call: Callable[[Node, dict[str, Value]], Call],
) -> Value | list[Value | None]:
    """Lower a node that reads or gives a complex value (see the module docstring for the order)."""
    if lowering.family in COMPLEX_FAMILIES:
        result: Value | list[Value | None] = lowering.fn(b, call)
        return result
    override = COMPLEX_REGISTRY.get(node.target)
    if override is not None:
        return override.fn(b, call, lambda bb, scaling: _by_parts(bb, node, values, lowering.fn, make_call, scaling))
    return _by_parts(b, node, values, lowering.fn, make_call)
