"""Random ops: rand/randn/randint (and their `_like` forms), bernoulli, training-mode dropout, normal,
uniform, exponential, multinomial -- drawn by RLX's in-graph generator.

Seed policy (docs/usage.md "Random ops"; docs/design.md (aw)). Every draw is one RLX `RngUniform`
(or `RngNormal`) node, whose values RLX's CPU runtime computes with Philox4x32-10 keyed by
`combine_seed(seed, key)`: `seed` is RLX's compile-time `RngOptions` seed (42, the default that both
the bundle runner and the generated crate compile with) and `key` is a stable 63-bit hash of the torch
node's name and the draw's position in it (`draw_key`). RLX re-seeds every node on every run, so one
bundle draws the same values on every run and on every machine (a fixed seed per bundle, like calling
`torch.manual_seed` before each call), two random nodes draw independently of each other, and the
values are not torch's (torch's CPU generator is an mt19937 stream): a model whose outputs depend on the
draws gets the "random" verdict (`frontend/torch/randomness.py`, `verify/randomness.py`), not a comparison.

RLX draws float32 in [0, 1) with 24 random bits; other float dtypes are derived from it (float64 keeps
those 24 bits, float16/bfloat16 round down to their own grid so a draw stays below 1), integers by
`floor(low + u * (high - low))` (exact while high - low <= 2**24: `_check_randint`).
"""

from __future__ import annotations

import hashlib
import math

from ...dtypes import FLOAT_DTYPES
from ..builder import Builder
from ..call import Call, Value
from ..registry import lowers
from ..rlx import exact

# randint's range must fit the 24 random bits of one float32 draw.
MAX_INT_RANGE = 1 << 24
# multinomial with replacement compares every draw with every category's CDF: at most this many pairs.
MAX_CDF_GRID = 1 << 26
# Mantissa bits (with the implicit one) of the float dtypes a draw in [0, 1) is rounded down to.
_GRID_BITS = {"float16": 11, "bfloat16": 8}


def draw_key(node: str, index: int) -> int:
    """The RLX `key` of draw `index` of torch node `node`: the first 63 bits of BLAKE2b of `node:index`
    (stable across runs and machines; distinct nodes draw independent streams)."""
    digest = hashlib.blake2b(f"{node}:{index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def _next_key(b: Builder) -> int:
    """A fresh key for the node being lowered (its draws numbered in order)."""
    node = b.provenance.node or "random"
    index = b.memo(("random-draws", node), lambda: [0])
    index[0] += 1
    return draw_key(node, index[0] - 1)


def uniform01(b: Builder, dims: tuple[int, ...], dtype: str = "float32") -> Value:
    """Uniform draws in [0, 1) of `dims` in float `dtype` (one RLX RngUniform node, no inputs)."""
    spec = {"RngUniform": {"low": 0.0, "high": 1.0, "key": _next_key(b), "op_seed": None}}
    u = b.emit(spec, [], dims, "float32")
    if dtype in _GRID_BITS:  # round down to the dtype's grid: k / 2**bits < 1 exactly representable
        scale = b.const(float(1 << _GRID_BITS[dtype]), "float32")
        u = b.binary("Div", b.trunc(b.binary("Mul", u, scale)), scale)
    return b.cast(u, dtype)


def normal01(b: Builder, dims: tuple[int, ...], dtype: str = "float32") -> Value:
    """Standard normal draws of `dims` in float `dtype` (one RLX RngNormal node: Box-Muller on Philox)."""
    spec = {"RngNormal": {"mean": 0.0, "scale": 1.0, "key": _next_key(b), "op_seed": None}}
    return b.cast(b.emit(spec, [], dims, "float32"), dtype)


def _check_float_out(call: Call) -> str | None:
    if call.out_dtype not in FLOAT_DTYPES:
        return f"a {call.out_dtype} result is not supported (random floats are drawn as float dtypes only)"
    return None


@lowers("aten.rand.default", "aten.rand_like.default", check=_check_float_out)
def rand(b: Builder, call: Call) -> Value:
    """Uniform draws in [0, 1) (RLX RngUniform; seed policy in the module docstring)."""
    return uniform01(b, call.out_dims, call.out_dtype)


@lowers("aten.randn.default", "aten.randn_like.default", check=_check_float_out)
def randn(b: Builder, call: Call) -> Value:
    """Standard normal draws (RLX RngNormal)."""
    return normal01(b, call.out_dims, call.out_dtype)


def _int_range(call: Call) -> tuple[int, int]:
    low = call.get("low", 0)
    return int(low), int(call["high"])


def _check_randint(call: Call) -> str | None:
    low, high = _int_range(call)
    if high <= low:
        return f"randint's range [{low}, {high}) is empty"
    if high - low > MAX_INT_RANGE:
        return f"randint's range [{low}, {high}) is wider than 2**24 (one float32 draw's random bits)"
    if call.out_dtype == "bool":
        return "a bool randint result is not supported"
    return None


@lowers(
    "aten.randint.default",
    "aten.randint.low",
    "aten.randint_like.default",
    "aten.randint_like.low_dtype",
    check=_check_randint,
)
def randint(b: Builder, call: Call) -> Value:
    """Integers uniform in [low, high): low + floor(u * (high - low)) for u uniform in [0, 1), clamped below high."""
    low, high = _int_range(call)
    span = b.binary("Mul", uniform01(b, call.out_dims), b.const(float(high - low), "float32"))
    offset = b.cast(b.trunc(span), "int64")  # u * n may round up to n: clamp
    offset = b.binary("Min", offset, b.const(high - low - 1, "int64"))
    return b.cast(b.binary("Add", offset, b.const(low, "int64")), call.out_dtype)


def bernoulli_mask(b: Builder, p: Value | float, dims: tuple[int, ...]) -> Value:
    """Bool mask, True with probability `p` (a float or a float tensor broadcast to `dims`): u < p."""
    u = uniform01(b, dims, "float64" if isinstance(p, Value) and p.dtype == "float64" else "float32")
    threshold = p if isinstance(p, Value) else b.const(float(p), "float32")
    return b.compare("Lt", u, threshold)


@lowers("aten.bernoulli.default", "aten.bernoulli.p", "aten.bernoulli.Tensor")
def bernoulli(b: Builder, call: Call) -> Value:
    """1 with probability p, else 0 (p: `self`'s values, the float `p`, or tensor `p`), in self's dtype."""
    x = call.tensor("self")
    p = call["p"] if call.target != "aten.bernoulli.default" else x
    return b.cast(bernoulli_mask(b, p, x.dims), call.out_dtype)


@lowers("aten.bernoulli_.Tensor", "aten.bernoulli_.float")
def bernoulli_inplace(b: Builder, call: Call) -> Value:
    """`x.bernoulli_(p)` (as the `aten` level records it): x becomes 1 with probability p, else 0."""
    x = call.tensor("self")
    value = b.cast(bernoulli_mask(b, call["p"], x.dims), x.dtype)
    call.mutate("self", value)
    return value


def _check_dropout(call: Call) -> str | None:
    p = float(call["p"])
    if not 0.0 <= p <= 1.0:
        return f"dropout probability p={p} is outside [0, 1]"
    return None


def _training(call: Call) -> bool:
    return call["train"] is not False  # native_dropout's train=None means training


def _dropped(b: Builder, x: Value, p: float, mask_dims: tuple[int, ...]) -> tuple[Value, Value]:
    """(x * keep / (1 - p), keep) with keep ~ Bernoulli(1 - p) of `mask_dims` (broadcast over x); all dropped
    for p = 1."""
    if p >= 1.0:
        keep = b.expand(b.const(False, "bool"), mask_dims)
        return b.binary("Mul", x, b.cast(keep, x.dtype)), keep
    keep = bernoulli_mask(b, 1.0 - p, mask_dims)
    scale = b.opmath(1.0 / (1.0 - p), x.dtype)
    return b.binary("Mul", b.binary("Mul", x, b.cast(keep, x.dtype)), scale), keep


@lowers("aten.dropout.default", "aten.feature_dropout.default", check=_check_dropout)
def dropout(b: Builder, call: Call) -> Value:
    """The input unchanged in eval mode; in training x * mask / (1 - p), mask ~ Bernoulli(1 - p) per element
    (`dropout`) or per (batch, channel) (`feature_dropout`, dropout2d/3d)."""
    x, p = call.tensor("input"), float(call["p"])
    if not _training(call) or p == 0.0:
        return x
    dims = x.dims if call.target == "aten.dropout.default" else x.dims[:2] + (1,) * (x.rank - 2)
    return _dropped(b, x, p, dims)[0]


@lowers("aten.native_dropout.default", check=_check_dropout)
def native_dropout(b: Builder, call: Call) -> list[Value | None]:
    """(x, all-true mask) in eval mode or p = 0; in training (x * mask / (1 - p), mask), mask ~ Bernoulli(1 - p)."""
    x, p = call.tensor("input"), float(call["p"])
    if not _training(call) or p == 0.0:
        return [x, b.expand(b.const(True, "bool"), x.dims)]
    out, keep = _dropped(b, x, p, x.dims)
    return [out, keep]


def _operand(b: Builder, call: Call, name: str, dtype: str) -> Value:
    value = call[name]
    return b.cast(value, dtype) if isinstance(value, Value) else b.const(float(value), dtype)


@lowers(
    "aten.normal.Tensor_float",
    "aten.normal.float_Tensor",
    "aten.normal.Tensor_Tensor",
    "aten.normal.float_float",
    check=_check_float_out,
)
def normal(b: Builder, call: Call) -> Value:
    """mean + std * N(0, 1), mean and std floats or tensors broadcast to the result."""
    dtype = call.out_dtype
    noise = normal01(b, call.out_dims, dtype)
    scaled = b.binary("Mul", noise, _operand(b, call, "std", dtype))
    return b.expand(b.binary("Add", scaled, _operand(b, call, "mean", dtype)), call.out_dims)


@lowers("aten.normal_functional.default", check=_check_float_out)
def normal_functional(b: Builder, call: Call) -> Value:
    """`x.normal_(mean, std)` made functional: mean + std * N(0, 1) of self's shape."""
    dtype = call.out_dtype
    noise = normal01(b, call.out_dims, dtype)
    return b.binary("Add", b.binary("Mul", noise, b.const(float(call["std"]), dtype)), b.const(call["mean"], dtype))


@lowers("aten.uniform.default", check=_check_float_out)
def uniform(b: Builder, call: Call) -> Value:
    """`x.uniform_(from, to)` made functional: from + u * (to - from), u uniform in [0, 1), of self's shape."""
    dtype, low, high = call.out_dtype, float(call["from"]), float(call["to"])
    u = uniform01(b, call.out_dims, dtype)
    return b.binary("Add", b.binary("Mul", u, b.const(high - low, dtype)), b.const(low, dtype))


@lowers("aten.exponential.default", check=_check_float_out)
def exponential(b: Builder, call: Call) -> Value:
    """`x.exponential_(lambd)` made functional: -log(1 - u) / lambd, u uniform in [0, 1)."""
    dtype = call.out_dtype
    u = uniform01(b, call.out_dims, "float32")
    tail = b.unary("Log", b.binary("Sub", b.const(1.0, "float32"), u))
    return b.cast(b.binary("Div", b.unary("Neg", tail), b.const(float(call["lambd"]), "float32")), dtype)


def _check_multinomial(call: Call) -> str | None:
    probs, k = call.tensor("self"), int(call["num_samples"])
    if probs.rank not in (1, 2):
        return f"multinomial of a rank-{probs.rank} tensor (torch takes rank 1 or 2)"
    n = probs.dims[-1]
    if not call.get("replacement", False) and k > n:
        return f"multinomial without replacement of {k} samples from {n} categories"
    if n > MAX_INT_RANGE:
        return f"multinomial over {n} categories (more than 2**24)"
    rows = probs.dims[0] if probs.rank == 2 else 1
    if (call.get("replacement", False) or k == 1) and rows * k * n > MAX_CDF_GRID:
        return f"multinomial with replacement of {rows} x {k} draws over {n} categories (more than 2**26 comparisons)"
    return None


@lowers("aten.multinomial.default", check=_check_multinomial)
def multinomial(b: Builder, call: Call) -> Value:
    """int64 category indices drawn from the rows of `self` (unnormalized weights): with replacement by the
    inverse CDF (index = #{j: cdf_j <= u}), without by the k largest log(w) + Gumbel keys (RLX TopK; torch's
    exponential-race method, in distribution)."""
    probs, k = b.as_float(call.tensor("self")), int(call["num_samples"])
    rows = b.reshape(probs, (1, probs.dims[0]) if probs.rank == 1 else probs.dims)
    m, n = rows.dims
    rows = b.cast(rows, "float32")
    if call.get("replacement", False) or k == 1:
        cdf = exact.scan(b, "Add", rows)
        cdf = b.binary("Div", cdf, b.narrow(cdf, 1, n - 1, 1))
        u = b.reshape(uniform01(b, (m, k)), (m, k, 1))
        below = b.compare("Le", b.reshape(cdf, (m, 1, n)), u)
        picked = b.reduce("Sum", b.cast(below, "float32"), [2], keep_dim=False)
        index = b.binary("Min", b.cast(picked, "int64"), b.const(n - 1, "int64"))
    else:
        gumbel = b.unary("Neg", b.unary("Log", b.unary("Neg", b.unary("Log", _open01(b, (m, n))))))
        keys = b.binary("Add", b.unary("Log", rows), gumbel)
        b.nan_free_ids.add(keys.id)  # torch's multinomial refuses NaN, inf and negative weights: no NaN key
        index = b.cast(b.emit({"TopK": {"k": k}}, [keys], (m, k), "float32"), "int64")
    return b.reshape(index, call.out_dims)


def _open01(b: Builder, dims: tuple[int, ...]) -> Value:
    """Uniform draws in (0, 1): RLX's [0, 1) draw moved off 0 by half its grid step (2**-25)."""
    return b.binary("Add", uniform01(b, dims), b.const(math.ldexp(1.0, -25), "float32"))
