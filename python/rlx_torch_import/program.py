"""The lowered program: RLX nodes in rlx-ir's serde vocabulary, plus provenance.

Both walkers (the Rust core that builds the bundle, and the crate emitters) read
this and never re-decide a mapping.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Provenance:
    """Where an RLX node came from in the torch graph."""

    aten: str
    node: str
    module_path: str = ""
    source: str = ""
    input_shapes: tuple[tuple[int, ...], ...] = ()

    def label(self) -> str:
        return f"{self.node} <- {self.aten}" + (f" @ {self.module_path}" if self.module_path else "")


@dataclass(frozen=True)
class ValueDecl:
    """A graph input or parameter: name, dims, RLX dtype."""

    name: str
    dims: tuple[int, ...]
    dtype: str


@dataclass(frozen=True)
class RlxNode:
    """One RLX op application; `op` is the externally tagged serde form of `rlx_ir::Op`."""

    id: str
    op: Any
    inputs: tuple[str, ...]
    dims: tuple[int, ...]
    dtype: str
    provenance: Provenance


@dataclass(frozen=True)
class DerivedParam:
    """A parameter computed once at conversion from stored weights (`lower/passes/`).

    `steps` apply in order to the weight `source`: ("transpose", perm), ("reshape", dims) or
    ("broadcast", dims) (torch's `expand`: size-1 axes repeated). They only move or repeat
    elements, so the derived tensor holds exactly the weight's values.
    """

    source: str
    steps: tuple[tuple[str, tuple[int, ...]], ...]

    def sources(self) -> tuple[str, ...]:
        return (self.source,)

    def describe(self) -> dict[str, Any]:
        return {"source": self.source, "steps": [[kind, list(arg)] for kind, arg in self.steps]}


@dataclass(frozen=True)
class FoldedBatchNorm:
    """Eval-mode batch norm folded into the convolution before it (or into a scale and a shift).

    With s = gamma / sqrt(var + eps) (in float64, rounded once to float32):
    role "weight": conv weight [C_out, ...] times s per output channel; role "bias":
    (conv bias or 0 - mean) * s + beta; role "scale": s; role "shift": beta - mean * s.
    `conv` names the convolution's weight (role "weight") or its bias (role "bias", None
    without one); the other fields name the batch norm's parameters.
    `dims` is the stored shape (biases/scales broadcast as [1, C, 1, ...]).
    """

    role: str
    conv: str | None
    gamma: str
    beta: str
    mean: str
    var: str
    eps: float
    dims: tuple[int, ...]

    def sources(self) -> tuple[str, ...]:
        return tuple(n for n in (self.conv, self.gamma, self.beta, self.mean, self.var) if n is not None)

    def describe(self) -> dict[str, Any]:
        return {
            "batch_norm_fold": self.role,
            "conv": self.conv,
            "gamma": self.gamma,
            "beta": self.beta,
            "mean": self.mean,
            "var": self.var,
            "eps": self.eps,
        }


@dataclass(frozen=True)
class QuantizedWeight:
    """A `Linear` weight [n, k] (float32, `source`) stored packed for RLX's `DequantMatMul`: uint8
    [packed bytes] in `scheme` (RLX's `QuantScheme` variant, "GgufQ8_0" or "GgufQ4_0"; `quant/schemes.py`)."""

    source: str
    scheme: str
    dims: tuple[int, int]

    def sources(self) -> tuple[str, ...]:
        return (self.source,)

    def describe(self) -> dict[str, Any]:
        return {"source": self.source, "quantize": self.scheme, "dims": list(self.dims)}


@dataclass(frozen=True)
class QuantizedTable:
    """An embedding table [V, D] (float32, `source`) stored quantized for a gather (`quant.schemes.table_parts`):
    `part` "words" (int64 [V, W], the code bytes 8 to a word) or "scales" (float16 [V, D / 32]), in
    `scheme` (RLX's `QuantScheme` variant name of the same blocks, "GgufQ8_0" or "GgufQ4_0")."""

    source: str
    scheme: str
    part: str
    dims: tuple[int, int]

    def sources(self) -> tuple[str, ...]:
        return (self.source,)

    def describe(self) -> dict[str, Any]:
        return {"source": self.source, "quantize_table": self.scheme, "part": self.part, "dims": list(self.dims)}


@dataclass(frozen=True)
class DequantizedWeight:
    """A PT2E graph's quantized weight, dequantized once at conversion (`lower/ops/quantized.py`): float32
    `(codes - zero_point) * scale` exactly as torch's `dequantize_per_tensor`/`dequantize_per_channel`
    compute it. `codes` names the integer weight; per channel, `scales`/`zero_points` name the [C] tensors
    along `axis` (`zero_points` None: zero); per tensor, `scale`/`zero_point` are the numbers (`axis` None).
    """

    codes: str
    axis: int | None
    scales: str | None = None
    zero_points: str | None = None
    scale: float = 1.0
    zero_point: int = 0

    def sources(self) -> tuple[str, ...]:
        return tuple(n for n in (self.codes, self.scales, self.zero_points) if n is not None)

    def describe(self) -> dict[str, Any]:
        return {
            "dequantize": self.codes,
            "axis": self.axis,
            "scales": self.scales,
            "zero_points": self.zero_points,
            "scale": self.scale,
            "zero_point": self.zero_point,
        }


@dataclass
class Program:
    """A whole lowered graph; values are referenced by name."""

    name: str
    inputs: list[ValueDecl] = field(default_factory=list)
    params: list[ValueDecl] = field(default_factory=list)
    nodes: list[RlxNode] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    # Values whose dtype RLX's CPU arena cannot pass across the boundary natively
    # travel as float32 there; these map input/output name -> the real dtype.
    carried_inputs: dict[str, str] = field(default_factory=dict)
    carried_outputs: dict[str, str] = field(default_factory=dict)
    # empty-output: graph outputs that may have no elements at run time, read flattened with one
    # padding element after them (`lower/rlx/boundary.py`); output name -> the axis whose size may be 0.
    padded_outputs: dict[str, int] = field(default_factory=dict)
    # ATen overload -> how many torch-ir nodes of it were lowered (including ones
    # that emit no RLX node, such as views that are already the right shape).
    aten_counts: dict[str, int] = field(default_factory=dict)
    # Parameters made at conversion from stored weights (a weight in the layout RLX's kernels read).
    derived_params: dict[str, DerivedParam | FoldedBatchNorm | QuantizedWeight | QuantizedTable | DequantizedWeight] = (
        field(default_factory=dict)
    )
    # What the conversion-time passes changed (`lower/passes/`), e.g. {"constants_folded": 3}.
    rewrites: dict[str, int] = field(default_factory=dict)
    # torch-ir nodes whose sizes depend on a dynamic dim (a program lowered at one binding of a
    # dynamic program): their values are not folded into constants, which would fix their size.
    size_dependent: set[str] = field(default_factory=set)
    # torch-ir nodes whose values (not sizes) depend on a dynamic dim: a size read as a number
    # (`scalar_tensor(x.shape[0])`) and what is computed from it. Not folded either.
    size_valued: set[str] = field(default_factory=set)
    # Their values' largest dims over the symbols' ranges, by torch-ir value name (None: a symbol
    # it uses is unbounded). A lowering that needs a size-independent constant sizes it by these.
    size_bounds: dict[str, list[int] | None] = field(default_factory=dict)
    # Their symbolic axes (torch-ir value name -> the axes whose size is a symbol expression).
    dynamic_axes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    # torch-ir value name -> the RLX value computing it (id, dims, torch-ir dtype); a value the
    # lowering does not compute (a skipped output, a node fused into another) is absent.
    torch_values: dict[str, tuple[str, tuple[int, ...], str]] = field(default_factory=dict)
    # With `lower(..., probe_values=True)`: the torch-ir values appended as extra outputs (after
    # the graph's own), in graph order (a debug build; never the shipped graph).
    probes: list[str] = field(default_factory=list)

    def weight_sources(self) -> set[str]:
        """The stored weights the parameters are read from (derived ones through their sources)."""
        found: set[str] = set()
        todo = [p.name for p in self.params]
        while todo:
            name = todo.pop()
            if name in self.derived_params:
                todo.extend(self.derived_params[name].sources())
            else:
                found.add(name)
        return found

    def op_histogram(self) -> dict[str, int]:
        """How many RLX nodes of each op variant the program has."""
        return dict(sorted(Counter(op_name(n.op) for n in self.nodes).items()))

    def aten_histogram(self) -> dict[str, int]:
        """How many source ATen calls of each overload were lowered."""
        return dict(sorted(self.aten_counts.items()))

    def to_core_json(self) -> str:
        """The JSON the Rust core's `program_to_hir_json` reads."""

        def shape(dims: tuple[int, ...], dtype: str) -> dict[str, Any]:
            return {"dims": [{"Static": d} for d in dims], "dtype": dtype}

        doc = {
            "name": self.name,
            "inputs": [{"name": v.name, "shape": shape(v.dims, v.dtype)} for v in self.inputs],
            "params": [{"name": v.name, "shape": shape(v.dims, v.dtype)} for v in self.params],
            "nodes": [
                {
                    "id": n.id,
                    "op": n.op,
                    "inputs": list(n.inputs),
                    "shape": shape(n.dims, n.dtype),
                    "label": n.provenance.label(),
                }
                for n in self.nodes
            ],
            "outputs": self.outputs,
        }
        return json.dumps(doc, allow_nan=False)


def op_name(op: Any) -> str:
    """`{"Activation": "Gelu"}` -> `"Activation.Gelu"`; `{"Conv": {...}}` -> `"Conv"`."""
    if isinstance(op, str):
        return op
    ((variant, payload),) = op.items()
    if isinstance(payload, str):
        return f"{variant}.{payload}"
    return variant
