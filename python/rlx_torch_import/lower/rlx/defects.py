"""Every known RLX CPU defect: what is wrong, where it was seen, the workaround, and a probe.

This table is the index of the workaround layer (`lower/rlx/workarounds.py`), the one layer that knows RLX's
defects. Each row names the RLX op kinds and dtypes it hits (`hits`, checked on
every lowered program by `audit.audit`, so no op family can emit a raw op
on a known-defect path) and carries a `probe`: a tiny graph that runs the raw RLX
op and compares it with numpy. `tests/test_rlx_defects.py` runs every probe and
fails when a defect is gone, naming the workaround that can then be dropped (the
check an RLX upgrade needs). `docs/rlx-defects.md` is generated from this table.

Rows marked `accepted` have no workaround (cost or semantics documented); the
parity verdict still reports their effect (e.g. NaN positions).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass

from ... import _core
from . import hits, probes
from .harness import quiet_stderr
from .hits import Hits


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


_SEEN = "0.2.17, 0.2.19"  # each probe run against both builds

DEFECTS: tuple[Defect, ...] = (
    Defect(
        "compare-f64",
        "Compare on F64 reads the operands as pairs of f32 (every comparison op)",
        _SEEN,
        "the sign of a - b (F64 Sub and Sign are exact) compared as I64; NaN found through an f32 cast, equal "
        "infinities through a + b",
        hits.compare_f64,
        probes.compare_f64,
    ),
    Defect(
        "compare-narrow-int",
        "Compare on I32 is legalized through f32 (wrong above 2**24); on I16/I8 it misreads the operands",
        _SEEN,
        "integer operands narrower than I64 are compared as I64",
        hits.kind_is("Compare", dtypes=frozenset({"I32", "I16", "I8", "U8"})),
        probes.compare_narrow,
    ),
    Defect(
        "binary-narrow-int",
        "Binary on I32 is legalized through f32 (wrong above 2**24); on I16/I8/U8 it misreads the operands",
        _SEEN,
        "narrower integers compute in I64 and are cast back (a wrapping cast, as torch wraps)",
        hits.kind_is("Binary", dtypes=frozenset({"I32", "I16", "I8", "U8"})),
        probes.binary_narrow,
    ),
    Defect(
        "where-narrow",
        "Where selecting Bool/I8/U8/I16 values mixes the bytes up; selecting I32 goes through f32",
        _SEEN,
        "Bool and narrow values are selected as F32 (exact), I32 as I64",
        hits.kind_is("Where", dtypes=frozenset({*hits.NARROW, "I32"}), at=(1, 2)),
        probes.where_narrow,
    ),
    Defect(
        "move-narrow",
        "data-movement kernels (strided Slice, Gather, Transpose, ...) move Bool/I8/U8/I16 with the wrong width",
        _SEEN,
        "Bool and narrow-integer data moves as F32 (exact) between Casts",
        hits.narrow_moves,
        probes.move_narrow,
    ),
    Defect(
        "move-i32",
        "data movement other than Reshape/Narrow/Transpose/Concat/Expand legalizes I32 through f32",
        "0.2.19",
        "I32 data moves as I64 (RLX's integer kernels are exact) and is cast back",
        hits.i32_moves,
        probes.move_i32,
    ),
    Defect(
        "trilu",
        "Trilu returns garbage for I64, F64, Bool and I32; on F32 it multiplies by the mask, so a masked-out "
        "inf or NaN becomes NaN instead of 0",
        _SEEN,
        "a Where against a constant triangular mask",
        hits.kind_is("Trilu"),
        probes.trilu,
    ),
    Defect(
        "gather-index-dtype",
        "Gather with an I8/U8/I16 index reads the wrong rows (I32 is legalized through f32: exact below 2**24)",
        _SEEN,
        "every gather/scatter index is cast to I64 (the element kernels also read F32 indices exactly)",
        hits.index_dtype,
        probes.gather_index,
    ),
    Defect(
        "gather-elements",
        "GatherElements gives its output the index's dtype: right only for F32 data with an F32 index "
        "and I64 data with an I64 index; F64 data is wrong with either",
        _SEEN,
        "F32 data takes an F32 index (exact below 2**24), I64 data an I64 index, any other dtype a Gather "
        "on the flattened tensor with computed I64 positions",
        hits.gather_elements,
        probes.gather_elements,
    ),
    Defect(
        "scatter-f64",
        "ScatterElements and ScatterNd corrupt F64 data (overwrite and add)",
        _SEEN,
        "overwrite: the position of each update is scattered in F32 and the winners gathered (exact for every "
        "value); add: F64 one-hot matmuls; multiply/max/min: a dense [target, update] one-hot reduced exactly",
        hits.kind_is("ScatterElements", "ScatterNd", dtypes=hits.F64_ONLY, at=(0, 2)),
        probes.scatter_f64,
    ),
    Defect(
        "scatter-nonfinite",
        "ScatterElements reads inf/NaN in its data input as 0 (untouched positions lose them too)",
        _SEEN,
        "where the data may be non-finite: x op (the updates reduced from the op's finite identity) at touched "
        "positions, x elsewhere",
        hits.kind_is("ScatterElements", dtypes=frozenset({"F32"}), at=(0,)),
        probes.scatter_nonfinite,
    ),
    Defect(
        "scatter-i64",
        "ScatterElements and ScatterNd corrupt I64 data",
        _SEEN,
        "overwrite: the winning updates are gathered (exact); add sums hi*2**24 + lo halves by F64 one-hot "
        "matmuls (exact while sums < 2**53); multiply/max/min: a dense [target, update] one-hot reduced exactly",
        hits.kind_is("ScatterElements", "ScatterNd", dtypes=frozenset({"I64", "I32"}), at=(0, 2)),
        probes.scatter_i64,
    ),
    Defect(
        "reduce-f64",
        "Reduce Mean/Max/Min/Prod on F64 return garbage (Sum is right)",
        _SEEN,
        "Mean = Sum / n; Max/Min/Prod by pairwise halving with exact F64 Binary ops",
        hits.reduce_hits,
        probes.reduce_f64,
    ),
    Defect(
        "reduce-int",
        "Reduce on I64 goes through f64 (inexact above 2**53), on I32 through f32",
        _SEEN,
        "integer Sum/Max/Min/Prod by pairwise halving with exact (wrapping) I64 Binary ops",
        hits.never,  # audited by reduce-f64's predicate, which covers integer inputs too
        probes.reduce_int,
    ),
    Defect(
        "reduce-nan",
        "Reduce Max/Min skip NaN (torch propagates it)",
        _SEEN,
        "NaN where any reduced element is NaN (a Where on an any-NaN reduction)",
        hits.reduce_nan,
        probes.reduce_nan,
        nan_only=True,
    ),
    Defect(
        "binary-nan",
        "Binary Max/Min skip NaN (torch.maximum/minimum/clamp propagate it)",
        _SEEN,
        "NaN where either operand is NaN (Where on x != x)",
        hits.binary_nan,
        probes.binary_nan,
        nan_only=True,
    ),
    Defect(
        "activation-int",
        "Activation on I64 reads the bits as floats; on I32 it goes through f32",
        _SEEN,
        "Abs/Neg/Sign/Relu/Floor/Ceil/Round/Trunc exactly with I64 ops; other activations through F64",
        hits.activation_int,
        probes.activation_int,
    ),
    Defect(
        "scan-f64",
        "Cumsum on F64 returns garbage",
        _SEEN,
        "a log-step (Hillis-Steele) scan of F64 Adds",
        hits.kind_is("Cumsum", "CumProd", dtypes=hits.F64_ONLY),
        probes.scan_f64,
    ),
    Defect(
        "cumprod-int",
        "CumProd on I64 and F64 returns garbage (I64 Cumsum is right)",
        _SEEN,
        "a log-step (Hillis-Steele) scan of exact Muls",
        hits.kind_is("CumProd", dtypes=frozenset({"I64", "I32", *hits.NARROW})),
        probes.cumprod,
    ),
    Defect(
        "scan-axis",
        "Cumsum/CumProd panic unless they scan the last axis",
        _SEEN,
        "the scanned axis is moved last and back",
        hits.scan_axis,
        probes.scan_axis,
    ),
    Defect(
        "sort-f64",
        "Sort/ArgSort on F64 return garbage",
        _SEEN,
        "an exact stable counting sort (rank = #smaller + #equal before), n <= 4096",
        hits.kind_is("Sort", "ArgSort", dtypes=frozenset({"F64", *hits.INTS, "Bool"})),
        probes.sort_f64,
    ),
    Defect(
        "sort-nan",
        "F32 Sort/ArgSort/TopK compare NaN equal to everything (torch sorts NaN above +inf): NaN stays where it "
        "is and the values around it come out of order",
        _SEEN,
        "where the input may hold NaN: a stable ArgSort with NaN read as +inf, then a stable ArgSort of the NaN "
        "flags in that order (TopK: its first k)",
        hits.kind_is("Sort", "ArgSort", "TopK", dtypes=frozenset({"F32"})),
        probes.sort_nan,
        nan_only=True,
    ),
    Defect(
        "topk-f64",
        "TopK on F64 returns wrong indices (0.2.19); on 0.2.17 it corrupted memory",
        _SEEN,
        "F64 and integer top-k run the exact counting sort and keep the first k",
        hits.kind_is("TopK", dtypes=frozenset({"F64", *hits.INTS, "Bool"})),
        probes.topk_f64,
    ),
    Defect(
        "topk-ties",
        "TopK orders tied values by index; torch's CPU top-k returns ties in another order",
        _SEEN,
        "accepted: torch's CPU order among ties is libstdc++'s selection algorithm's (no rule); indices that "
        "differ only among tied values are judged as RLX's tie choice (verify/ties.py), and the report says so",
        hits.never,
        probes.topk_ties,
        accepted=True,
    ),
    Defect(
        "argmax",
        "ArgMax/ArgMin on F64 return garbage; on F32 they skip NaN",
        _SEEN,
        "the first index where x equals its (NaN-propagating) extreme",
        hits.kind_is("ArgMax", "ArgMin"),
        probes.argmax,
    ),
    Defect(
        "matmul-int",
        "MatMul on I64 returns zeros",
        _SEEN,
        "broadcast I64 Mul and a pairwise I64 Sum over the inner axis (exact, wrapping)",
        hits.kind_is("MatMul", dtypes=frozenset({*hits.INTS, "Bool"})),
        probes.matmul_int,
    ),
    Defect(
        "qmatmul-requant",
        "QMatMul/QConv2d requantize an exact int32 accumulator with one float32 multiplier; torch's PT2E graph "
        "rounds the float32 product of the dequantized operands, so some int8 codes differ by one step",
        _SEEN,
        "accepted: never emitted; a PT2E graph's dequantize -> linear/conv -> quantize runs in float32 as torch "
        "computes it (lower/ops/quantized.py), and the report says so",
        hits.kind_is("QMatMul", "QConv2d"),
        probes.qmatmul_requant,
        accepted=True,
    ),
    Defect(
        "conv-f64",
        "Conv on F64 or integer data reads it as f32",
        _SEEN,
        "an F64 convolution as strided-slice taps contracted by F64 MatMul (integers through it, exact while "
        "|sums| < 2**53)",
        hits.kind_is("Conv", dtypes=frozenset({"F64", *hits.INTS})),
        probes.conv_f64,
    ),
    Defect(
        "conv-transpose-f64",
        "ConvTranspose2d on F64 or integer data reads it as f32",
        _SEEN,
        "an F64 stride-1 convolution (the conv-f64 route) of the zero-stuffed, padded input with the flipped "
        "kernel (integers through it, exact while |sums| < 2**53; transposed convolution, col2im)",
        hits.kind_is("ConvTranspose2d", dtypes=frozenset({"F64", *hits.INTS})),
        probes.conv_transpose_f64,
    ),
    Defect(
        "conv3d-f64",
        "Conv3d on F64 or integer data reads it as f32",
        "0.2.19",
        "the conv-f64 route over three spatial axes",
        hits.kind_is("Conv3d", dtypes=frozenset({"F64", *hits.INTS})),
        probes.conv3d_f64,
    ),
    Defect(
        "conv-transpose3d-f64",
        "ConvTranspose3d on F64 or integer data reads it as f32",
        "0.2.19",
        "the conv-transpose-f64 route over three spatial axes",
        hits.kind_is("ConvTranspose3d", dtypes=frozenset({"F64", *hits.INTS})),
        probes.conv_transpose3d_f64,
    ),
    Defect(
        "norm-f64",
        "BatchNormInference and GroupNorm on F64 return garbage (LayerNorm/RmsNorm are right)",
        _SEEN,
        "their formulas in F64 elementwise ops and Sum reductions",
        hits.kind_is("BatchNormInference", "GroupNorm", dtypes=hits.F64_ONLY),
        probes.norm_f64,
    ),
    Defect(
        "pool-f64",
        "Pool on F64 reads the data as f32",
        _SEEN,
        "F64 pooling unrolls each window into strided slices folded with exact Max/Add",
        hits.kind_is("Pool", dtypes=hits.F64_ONLY),
        probes.pool_f64,
    ),
    Defect(
        "pool-nan",
        "Pool Max skips NaN (torch's max_pool returns NaN for a window holding one)",
        _SEEN,
        "accepted for the fused pool (cost); max-pool with indices and float64 pooling follow torch; the verdict "
        "reports NaN positions",
        hits.never,
        probes.pool_nan,
        accepted=True,
    ),
    Defect(
        "elu-expm1",
        "Activation Elu computes exp(x) - 1, so negative x of magnitude below ~1e-4 loses digits (-1e-8 gives 0)",
        "0.2.19",
        "x where x > 0, else an exact expm1 (Kahan's (u - 1) * x / log(u)), as torch's kernel computes it",
        hits.elu,
        probes.elu_small,
    ),
    Defect(
        "exp-range",
        "Activation Exp clamps x to [-87.3, 88.7]: exp(-inf) and exp(-100) give 1.2e-38 (not 0 or a subnormal), "
        "exp(88.72) 3.3e38 and exp(inf) a finite 3.4e38 (not inf); the AVX kernel maps NaN to 1.2e-38",
        "0.2.19",
        "RLX's Exp where |x| <= 87, exp(x / 2) ** 2 outside (IEEE underflow to subnormals and 0, overflow to inf), "
        "NaN passed through",
        hits.exp,
        probes.exp_range,
    ),
    Defect(
        "sigmoid-tail",
        "Activation Sigmoid shares Exp's clamp: below -88.7 it gives 3e-39 where float32 1 / (1 + exp(-x)) is 0, "
        "so log(sigmoid(x)) stops at -88.7 instead of -inf",
        "0.2.19",
        "accepted: an absolute error below 1e-38 inside every budget; a select on every sigmoid made LSTM/GRU "
        "2.5x slower; log(sigmoid(x)) of such x fails verification (use logsigmoid, which is exact)",
        hits.never,
        probes.sigmoid_range,
        accepted=True,
    ),
    Defect(
        "tanh-nan",
        "Activation Tanh maps NaN to -1 (torch.tanh keeps NaN)",
        "0.2.19",
        "accepted: a NaN-keeping select on every tanh made LSTM/GRU 2.5x slower; the verdict reports NaN positions",
        hits.never,
        probes.tanh_nan,
        accepted=True,
    ),
    Defect(
        "erf-tail",
        "Activation Erf/Gelu lose relative accuracy in the negative tail (Gelu(-5) 4% off and worse below, erf "
        "near ±1 up to ~80 ulp); absolute errors stay below 2e-7",
        "0.2.19",
        "accepted: inside every float budget; an exact erfc would add ~20 nodes to every GELU",
        hits.never,
        probes.erf_tail,
        accepted=True,
    ),
    Defect(
        "relu-nan",
        "Activation Relu maps NaN to 0 (torch.relu keeps NaN)",
        _SEEN,
        "accepted: a NaN-keeping ReLU would break RLX's conv/matmul + activation fusion; the verdict reports NaN "
        "positions",
        hits.never,
        probes.relu_nan,
        accepted=True,
    ),
    Defect(
        "relu-signed-zero",
        "Activation Relu maps -0.0 to +0.0 (torch.relu keeps -0.0: it clamps only values below 0)",
        "0.2.19",
        "accepted, as relu-nan: a sign-keeping ReLU would break RLX's conv/matmul + activation fusion; where the "
        "ReLU's input is exactly known (a graph input, weight or value-exact chain) the bit-exact verdict fails it",
        hits.never,
        probes.relu_signed_zero,
        accepted=True,
    ),
    Defect(
        "constant-narrow",
        "Constant nodes of Bool/I8/U8/I16 are misread by the f32-aliased arena",
        _SEEN,
        "such constants are stored as F32 (exact) and Cast",
        hits.constant_narrow,
        probes.constant_narrow,
    ),
    Defect(
        "boundary-narrow",
        "Bool/I8/U8/I16 graph inputs and outputs cannot cross run_typed (one byte written, four read)",
        _SEEN,
        "they cross as F32 (exact) with a Cast inside the graph; meta.json records rlx_dtype",
        hits.never,  # checked by registry.lower, which declares the boundary
        probes.boundary_narrow,
    ),
    Defect(
        "round-to-format",
        "RoundToFormat saturates at the format's largest value (IEEE rounding gives ±inf past it), and flushes "
        "f32-subnormal inputs to zero (bfloat16's own subnormals)",
        "0.2.19",
        "magnitudes at or past the overflow threshold become x * inf; bfloat16 subnormals are rounded as "
        "integer multiples of 2**-133 (x * 2**133 rounded half to even, scaled back; both scalings exact)",
        hits.round_to_format,
        probes.round_to_format,
    ),
    Defect(
        "transpose-output",
        "a 2-D F32 Transpose whose only reader is a MatMul is folded into the GEMM and never computed, even when "
        "it is also a graph output: that output reads a buffer nothing wrote",
        "0.2.19",
        "a graph output made by a Transpose is read through a same-shape Reshape, a second reader that keeps it "
        "computed (`boundary.protect_outputs`)",
        hits.never,  # a property of the graph's outputs, not of one node: checked by registry.lower
        probes.transpose_output,
    ),
    Defect(
        "weight-int16",
        "binding an I16 parameter panics (set_param_typed: widen_bytes_to_f32 rejects I16 on the CPU backend's "
        "f32 arena)",
        "0.2.19",
        "the capability pass refuses an int16 parameter or buffer, naming it and the dtype to store it as "
        "(int32 or int64; `boundary.unbindable_weights`)",
        hits.never,  # a property of the weights, not of a node: checked by registry.lower's capability pass
        probes.weight_int16,
    ),
    Defect(
        "zero-size-output",
        "a kernel writing a zero-element F64 or I64 result panics (a slice range out of bounds in the CPU "
        "backend's run_typed)",
        "0.2.19",
        "a call whose tensor outputs all have zero elements computes nothing: each output is an empty constant "
        "(`boundary.empty_outputs`); an F64/I64/I32 graph output that may be empty at run time (a size a stage "
        "computes, 0 in its range) is read flattened with one padding element, cut on the host "
        "(`boundary.pad_empty_output`)",
        hits.never,  # a property of a call's output sizes: checked by registry.lower before each lowering
        probes.zero_size_output,
    ),
    Defect(
        "round-fold",
        "constant folding (float32 only) rounds ties away from zero (the 0.2.19 kernels round half to even, "
        "exactly over the whole range)",
        _SEEN,
        "RLX's Round where the value depends on an input or a parameter (never folded) or is float64; a float32 "
        "value made of constants only is rounded by IEEE addition: |x| + 2**23 - 2**23 below 2**23, with x's "
        "sign (`exact.round_half_even`)",
        hits.round,
        probes.round_fold,
    ),
)


def main() -> int:
    """Run every probe against the installed RLX; print which defects are still there."""

    print(f"RLX {_core.rlx_version()}")
    gone = 0
    for d in DEFECTS:
        with quiet_stderr():  # a probe that makes RLX panic prints the panic (and a backtrace) there
            found = d.probe()
        gone += found is None
        print(f"{'present' if found else 'GONE   '}  {d.key:22s} {found or 'drop the workaround: ' + d.workaround}")
    return 1 if gone else 0


if __name__ == "__main__":
    sys.exit(main())
