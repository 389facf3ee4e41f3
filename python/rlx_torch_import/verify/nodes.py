"""Per-node parity: where along the graph RLX's numbers leave PyTorch's.

For every tensor an ATen node of the exported program computes, two comparisons:

- **cumulative**: the RLX value when the graph is fed the model inputs, against PyTorch's
  intermediate value (the error accumulated up to that node);
- **local** (reference-fed): the node's own RLX lowering fed PyTorch's values of its inputs,
  so the error is the op's alone.

PyTorch's intermediates come from running torch-ir's nodes with torch's own ATen ops
(`torch_values`), so a conversion directory is enough: the model is not needed. RLX's come
from two debug builds of the program (`lower(..., probe_values=True, optimize=False)`), never
the shipped graph: the whole program with every intermediate made an output, and a program
of disconnected single-node graphs whose tensor inputs are fresh graph inputs.

Local budgets follow the op's numerical character (`op_kind`): integer/bool results are exact, the
float results of value-exact ops (data movement, rounding, sign, ...) bit-exact; elementwise ops may
differ by a few ULP of the tensor's largest value; contractions and reductions by eps * (16 + 2K) of
their scale, K the reduction length. Cumulative budgets are the output budgets
(`compare.compare_output`): bit-exact for a value exactly determined by the model's inputs
(`verify/exactness.py`), the dtype's budget otherwise. The errors and verdicts are
`verify/metrics.py`'s: each PyTorch value prepared once, measured against both RLX values.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from .. import _core, torchir
from ..conversion import Conversion
from ..door import front_end
from ..dtypes import COMPLEX_PARTS, NARROW_DTYPES, RECORDS
from ..layout import input_key
from ..program import Program
from ..progress import Progress
from ..sizes import sizes, values_of
from ..torchir import Node, OutputSpec, TensorSpec, TorchIR
from .exactness import complex_names, exact_values
from .metrics import Expected, cumulative_error, local_error, measure
from .randomness import NODE_NOTE, random_node
from .report import NodeParity
from .ties import tie_choice, tie_indices, tie_ordered
from .torch_values import to_torch, torch_values

_EPS = {r.name: r.eps for r in RECORDS.values() if r.eps is not None}


def op_kind(target: str, dtype: str) -> str:
    """The numerical character a node's local budget follows: exact for integer and bool results,
    else the kind its lowering declares (`@lowers(..., kind=...)`: movement, exact, elementwise,
    contraction or reduction). Only lowered nodes get here (`node_parity` lowers the whole program
    first, which refuses an unregistered op), so a target outside the registry is elementwise."""
    from ..lower import REGISTRY

    if dtype not in _EPS:
        return "exact"
    lowering = REGISTRY.get(target)
    return lowering.kind if lowering is not None else "elementwise"


# ---------------------------------------------------------------------------------------------
# RLX's values: debug builds with every intermediate an output


def _local_program(ir: TorchIR, skip: set[str] | None = None) -> TorchIR:
    """Each node alone (but those in `skip`), its tensor arguments fresh graph inputs
    `<value>@<node>` whose `path` is `<value>` (names may hold `@` themselves; weights stay
    weights); every node output is a graph output."""
    shapes = ir.value_shapes()
    dtypes = {s.name: s.dtype for s in ir.inputs} | {o.name: o.dtype for n in ir.nodes for o in n.outputs}
    weights = {w.name for w in ir.weights}
    inputs: dict[str, TensorSpec] = {}
    nodes = []

    def fresh(arg: dict[str, Any], node: Node) -> dict[str, Any]:
        ((tag, payload),) = arg.items()
        if tag == "list":
            return {"list": [fresh(a, node) for a in payload]}
        if tag != "tensor" or payload in weights:
            return arg
        name = f"{payload}@{node.name}"
        inputs.setdefault(name, TensorSpec(name, list(shapes[payload]), dtypes[payload], path=payload))
        return {"tensor": name}

    for node in ir.nodes:
        if not node.outputs or node.name in (skip or set()):
            continue
        nodes.append(
            replace(
                node,
                args=[fresh(a, node) for a in node.args],
                kwargs={k: fresh(v, node) for k, v in node.kwargs.items()},
            )
        )
    outputs = [
        OutputSpec(o.name, o.name, list(o.shape), o.dtype) for n in nodes for o in n.outputs if o.dtype != "none"
    ]
    return replace(ir, inputs=list(inputs.values()), nodes=nodes, outputs=outputs[:1], symbols=[])


def _run_local(
    ir: TorchIR, env: dict[str, Any], host: Any, weights: dict[str, Any], device: str = "cpu"
) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """RLX's reference-fed values: every node alone, fed PyTorch's values of its inputs. A node
    that cannot be lowered alone (its lowering reads an input's values at conversion) or whose
    inputs have no PyTorch value is left out, with the reason (node name -> reason)."""
    from ..errors import UnsupportedOpsError

    alone: dict[str, str] = {}
    for _ in range(3):
        local_ir = _local_program(ir, skip=set(alone))
        unfed = {s.name[len(s.path) + 1 :] for s in local_ir.inputs if s.path not in env}
        if unfed - set(alone):
            alone.update({n: "no local RLX value: an input of the node has no PyTorch value" for n in unfed})
            continue
        feed = {s.name: host(s.path, s.dtype) for s in local_ir.inputs}
        try:
            return _run_debug(local_ir, feed, weights, device), alone
        except UnsupportedOpsError as e:
            alone.update({i.node: f"no local RLX value: lowered alone, {i.reason}" for i in e.items})
    return {}, alone


def _run_debug(
    ir: TorchIR, feed: dict[str, np.ndarray], weights: dict[str, Any], device: str = "cpu"
) -> dict[str, np.ndarray]:
    """Lower `ir` with every intermediate an output, compile it for `device`, run it on `feed`;
    the RLX value of each torch-ir value it computes (narrow ints/bool as themselves, halves
    rounded, as the bundle gives its outputs). Raises DeviceError when `device` cannot run it."""
    from ..bundle.host import bind_weight, from_carrier, to_carrier
    from ..dtypes import from_rlx
    from ..errors import DeviceError
    from ..lower import registry

    program: Program = registry.lower(ir, optimize=False, probe_values=True)
    dtypes = {s.name: COMPLEX_PARTS.get(s.dtype, s.dtype) for s in ir.inputs}  # complex: its float pairs
    args = [(d.name, to_carrier(feed[d.name], dtypes[d.name], from_rlx(d.dtype)), d.dtype) for d in program.inputs]
    try:
        model = _core.CompiledModel(_core.program_to_hir_json(program.to_core_json()), device)
        for p in program.params:
            bind_weight(model, p.name, weights[p.name] if p.name in weights else _derived(program, p.name, weights))
        raw = model.run(args)
    except _core.DeviceError as e:
        raise DeviceError(f"per-node values on {device}: {e}") from None
    out_dtypes = {o.name: o.dtype for n in ir.nodes for o in n.outputs} | {o.name: o.dtype for o in ir.outputs}
    found: dict[str, np.ndarray] = {}
    for name, (data, _rlx, dims) in zip([o.name for o in ir.outputs] + program.probes, raw, strict=True):
        dtype = COMPLEX_PARTS.get(out_dtypes[name], out_dtypes[name])  # complex: its float pairs
        carried = dtype in NARROW_DTYPES or dtype in ("float16", "bfloat16")  # as `lower` casts them out
        found[name] = from_carrier(data, dims, dtype, "float32" if carried else dtype)
    return found


def _derived(program: Program, name: str, weights: dict[str, Any]) -> Any:
    """A parameter the lowering computes from stored ones (a PT2E weight dequantized once), as a RawTensor."""
    from ..safetensors_io import RawTensor
    from ..weights import materialize

    dtype, array = materialize(program, name, weights)
    return RawTensor(dtype, tuple(array.shape), memoryview(np.ascontiguousarray(array).tobytes()))


# ---------------------------------------------------------------------------------------------
# PyTorch's values and budget scales


def _numpy(value: Any, dtype: str) -> np.ndarray:
    """PyTorch's value as a C-contiguous array (bfloat16 as float32). numpy makes the copy of a strided
    view (a permute, an expand): torch's `contiguous()` of a small permuted tensor can take a thousand
    times longer (its threads' start-up on a busy machine)."""
    import torch

    if dtype == "bfloat16":
        value = value.float()
    if isinstance(value, torch.Tensor) and value.is_complex():  # compared as its float pairs (view_as_real)
        value = torch.view_as_real(value.resolve_conj().resolve_neg())
    if isinstance(value, torch.Tensor):
        found = value.detach().numpy()
        return found if found.flags.c_contiguous else found.copy(order="C")  # 0-d stays 0-d
    return np.asarray(value)


def _reduction_length(node: Node, env: dict[str, Any], kind: str, out_numel: int) -> int:
    import torch

    found = [env.get(a["tensor"]) for a in node.args if "tensor" in a]
    tensors = [t for t in found if isinstance(t, torch.Tensor)]
    if not tensors:
        return 1
    if kind == "contraction" and len(tensors) >= 2:
        return max(1, round(math.sqrt(tensors[0].numel() * tensors[1].numel() / max(out_numel, 1))))
    k = tensors[0].numel() / max(out_numel, 1)
    last = tensors[0].shape[-1] if tensors[0].dim() else 1
    return max(1, round(k), int(last))


def _scale(node: Node, magnitude: Any, kind: str, top: float) -> float:
    """The magnitude a node's error is measured against: its result's largest value `top`, or for
    a contraction the product of its two inputs' largest values (a sum may cancel); `magnitude`
    gives a value's largest finite magnitude (cached per value)."""
    if kind not in ("contraction", "reduction"):
        return top
    mags = sorted((magnitude(a["tensor"]) for a in node.args if "tensor" in a), reverse=True)
    if kind == "contraction" and len(mags) >= 2:
        return max(top, mags[0] * mags[1])
    return max(top, mags[0]) if mags else top


# ---------------------------------------------------------------------------------------------
# The whole report


@dataclass
class NodeValues:
    """What the one per-node comparison (`compare_nodes`) reads, whichever front end wrote the conversion:
    torch-ir's nodes run by PyTorch (`node_parity`), or a boundary-only conversion's front-end oracle
    (`door.Door.node_values`: ONNX Runtime's intermediates and RLX's importer's).

    `rows`: one per value the graph computes, in graph order, with its kind, dtype, shape (and, without a
    torch-ir node, its reduction length) set; a row whose `note` is set already is not compared (a random
    node, a value the reference runtime lacks). Its torch-ir node (or None) gives the reduction length,
    a contraction's scale and the tie choice of a topk/sort. `reference(row)` is the reference runtime's
    value of a row (an array of the row's dtype); `local`/`cumulative` RLX's values (value name -> array);
    `alone`: node name -> why it has no local value; `value_notes`: value name -> why it has no RLX value;
    `exact`: values judged bit for bit (`verify/exactness.py`); `magnitude`: value name -> its largest finite
    magnitude; `fit`: RLX's values may differ from the reference's shape by size-1 axes (RLX has no rank-0
    tensor; ONNX's [] is [1]); `label`: the reference runtime's name in notes; `expected`: the reference
    runtime's values by name (a torch-ir node's inputs, for its reduction length and tie choice; a repro
    folder's inputs)."""

    rows: list[tuple[NodeParity, Node | None]]
    reference: Callable[[NodeParity], Any]
    local: dict[str, np.ndarray]
    cumulative: dict[str, np.ndarray]
    alone: dict[str, str] = field(default_factory=dict)
    value_notes: dict[str, str] = field(default_factory=dict)
    exact: set[str] = field(default_factory=set)
    magnitude: Callable[[str], float] | None = None
    fit: bool = False
    label: str = "PyTorch"
    expected: dict[str, Any] = field(default_factory=dict)
    ir: TorchIR | None = None

    def compare(self, row: NodeParity, node: Node | None, value: np.ndarray) -> None:
        """Fill `row` (its value `row.value`, the reference's value `value`): the reference value prepared
        once (`metrics.Expected`), measured against the local and the cumulative RLX value."""
        name, dtype = row.value, row.dtype
        expected = Expected(value, dtype)
        if node is not None and row.kind in ("contraction", "reduction"):
            row.reduction = _reduction_length(node, self.expected, row.kind, value.size)
        from ..lower.registry import VALUE_EXACT_KINDS

        if name in self.local:
            m = measure(self._fit(self.local[name], value), expected, bits=row.kind in VALUE_EXACT_KINDS)
            row.local = local_error(m, dtype, row.kind, row.reduction, m.top)
            if not row.local.ok and node is not None and self.magnitude is not None and row.kind in _SCALED:
                scale = _scale(node, self.magnitude, row.kind, m.top)  # measured against its inputs
                row.local = local_error(m, dtype, row.kind, row.reduction, scale)
        if name in self.cumulative:
            bit_exact = name in self.exact
            m = measure(self._fit(self.cumulative[name], value), expected, bits=bit_exact)
            row.cumulative = cumulative_error(m, dtype, bit_exact=bit_exact)
        if node is not None and row.local is not None and not row.local.ok and tie_ordered(node):
            self._tie_choice(row, node)
        if row.node in self.alone:
            row.note = self.alone[row.node]
        elif name in self.value_notes:
            row.note = self.value_notes[name]
        elif row.local is None and row.cumulative is None:
            row.note = "no RLX value: the node's lowering does not compute this output (e.g. an unused index)"
        elif row.local is None:
            row.note = f"no local RLX value (an input of the node has no {self.label} value)"

    def _fit(self, actual: np.ndarray, expected: np.ndarray) -> np.ndarray:
        """RLX's value at the reference's shape where `fit` allows and they differ only by size-1 axes."""
        if self.fit and actual.shape != expected.shape and _squeezed(actual.shape) == _squeezed(expected.shape):
            return actual.reshape(expected.shape)
        return actual

    def _tie_choice(self, row: NodeParity, node: Node) -> None:
        """A topk/sort/kthvalue/median output whose local value differs from PyTorch's only by RLX's choice among
        tied values (`verify/ties.py`; a values output: bit for bit the values at RLX's indices, -0.0 for 0.0)
        is marked so, not a divergence."""
        indices = self.local.get(tie_indices(node))
        if indices is None:
            return
        count, why, picked = tie_choice(node, self.expected, indices)
        if why or not count:
            return
        if row.value != tie_indices(node):
            ours = np.asarray(self.local[row.value]).reshape(picked.shape)
            if not np.array_equal(ours, _numpy(picked, row.dtype).astype(ours.dtype), equal_nan=True):
                return
            if np.signbit(ours).tolist() != np.signbit(_numpy(picked, row.dtype)).tolist():
                return
        assert row.local is not None
        row.local = replace(row.local, ok=True)
        row.note = f"{count} index(es) differ from PyTorch's only among tied values: RLX's tie choice"


_SCALED = ("contraction", "reduction")


def _squeezed(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(d for d in shape if d != 1)


@dataclass
class NodeReport:
    """Per-node parity of a conversion directory (see module docstring)."""

    nodes: list[NodeParity] = field(default_factory=list)
    first_divergence: NodeParity | None = None
    drift: str = ""
    # For repro folders: the program compared (bound at the example sizes), PyTorch's values of
    # its inputs, weights and intermediates, RLX's local values (value name -> tensor / array).
    ir: TorchIR | None = None
    expected: dict[str, Any] = field(default_factory=dict)
    local: dict[str, np.ndarray] = field(default_factory=dict)


def node_parity(
    conv: Conversion, *, outputs_ok: bool = True, device: str = "cpu", progress: Progress | None = None
) -> NodeReport:
    """Per-node parity of the conversion `conv` (torch-ir.json, weights.safetensors,
    reference.safetensors; each read and checked once, `conversion.Conversion`) at the example inputs,
    RLX running on `device`: a torch-ir graph's nodes against PyTorch's values of them, a boundary-only
    conversion's against its front end's oracle (`door.Door.node_values`: ONNX Runtime's). `outputs_ok`
    (whether the outputs passed) decides whether an all-local-pass result is reported as accumulated drift.
    `progress` shows a bar over the nodes."""
    progress = progress or Progress(False)
    if conv.ir.boundary_only:
        door = front_end(conv.ir)
        assert door.node_values is not None and door.op_kind is not None  # `front_end` refuses one without
        found = door.node_values(conv, device, progress)
        for row, _ in found.rows:  # the numerical character of the door's ops, which its budgets follow
            row.kind = row.kind or door.op_kind(row.aten, row.dtype)
        return compare_nodes(found, outputs_ok, progress)
    import torch

    with torch.no_grad():
        return compare_nodes(_torch_ir_values(conv, device), outputs_ok, progress)


def compare_nodes(found: NodeValues, outputs_ok: bool, progress: Progress) -> NodeReport:
    """The one per-node comparison: each row of `found` compared (`NodeValues.compare`), the first node
    whose local error is over budget the first divergence, else (outputs failed) where the drift grows."""
    report = NodeReport(ir=found.ir, expected=found.expected, local=found.local)
    for row, node in progress.items(found.rows, "nodes"):
        report.nodes.append(row)
        if not row.note:
            found.compare(row, node, found.reference(row))
    report.first_divergence = next((r for r in report.nodes if r.local is not None and not r.local.ok), None)
    if report.first_divergence is None and not outputs_ok:
        report.drift = _drift(report.nodes)
    return report


def _torch_ir_values(conv: Conversion, device: str) -> NodeValues:
    """A torch-ir graph's rows: PyTorch's value of each node output (`torch_values`, the model not needed),
    RLX's from the two debug builds (`_run_debug`, `_run_local`)."""
    import torch

    from ..lower import REGISTRY

    conv.check_ops(REGISTRY)  # each node against torch's schema and meta kernels, before anything runs
    ref = conv.reference  # BundleError naming a missing/mismatched tensor
    raw_weights = conv.weights
    ir = torchir.specialize(conv.ir, values_of(conv.ir.symbols)) if conv.ir.is_dynamic else conv.ir
    weights = {k: to_torch(v) for k, v in raw_weights.items()}
    inputs = {s.name: to_torch(ref[input_key(s.name)]) for s in ir.inputs}
    env, missing = torch_values(ir, inputs, weights)

    hosted: dict[str, np.ndarray] = {}

    def host(name: str, dtype: str) -> np.ndarray:
        """PyTorch's value `name` as an array, converted once (a value feeding several nodes alone is one array)."""
        if name not in hosted:
            hosted[name] = _numpy(env[name], dtype)
        return hosted[name]

    tops: dict[str, float] = {}

    def magnitude(name: str) -> float:
        """A value's largest finite magnitude (0 for integers, bool and values PyTorch lacks)."""
        if name not in tops:
            value = env.get(name)
            top = 0.0
            if isinstance(value, torch.Tensor) and value.numel() and value.is_floating_point():
                low, high = torch.aminmax(value.detach())  # one pass, no copy
                top = max(abs(float(low)), abs(float(high)))
                if not math.isfinite(top):  # NaN or inf inside: the largest finite magnitude
                    top = float(value.detach().abs().nan_to_num(0, 0, 0).max())
            tops[name] = top
        return tops[name]

    def reference(row: NodeParity) -> np.ndarray:
        expected = hosted.pop(row.value, None)  # not needed again: the copy goes
        return expected if expected is not None else _numpy(env[row.value], row.dtype)

    feed = {s.name: host(s.name, s.dtype) for s in ir.inputs}
    cumulative = _run_debug(ir, feed, raw_weights, device)
    local, alone = _run_local(ir, env, host, raw_weights, device)
    from ..lower.complexes import complex_kind

    complexes = complex_names(ir)  # a node on them may run an op's complex form, with its own kind
    rows: list[tuple[NodeParity, Node | None]] = []
    for node in ir.nodes:
        for spec in node.outputs:
            if spec.dtype == "none":
                continue
            dtype = COMPLEX_PARTS.get(spec.dtype, spec.dtype)  # complex: compared as its float pairs
            row = NodeParity(
                index=len(rows),
                node=node.name,
                value=spec.name,
                aten=node.target,
                module_path=node.module_path,
                source=node.source,
                shape=list(sizes(spec.shape)),
                dtype=dtype,
                kind=complex_kind(node, complexes) or op_kind(node.target, dtype),
            )
            if random_node(node):
                row.note = NODE_NOTE
            elif spec.name not in env:
                row.note = missing.get(node.name, "no PyTorch value (an input of it has none)")
            rows.append((row, node))
    exact = exact_values(ir)
    return NodeValues(rows, reference, local, cumulative, alone, exact=exact, magnitude=magnitude, expected=env, ir=ir)


def _drift(rows: list[NodeParity]) -> str:
    """Where a cumulative error grows past its budget when every node is locally within budget."""
    over = next((r for r in rows if r.cumulative is not None and not r.cumulative.ok), None)
    measured = [r for r in rows if r.cumulative is not None and r.dtype in _EPS]
    if not measured:
        return "every node is within its local budget; no float intermediate has an RLX value to follow"
    worst = max(measured, key=lambda r: r.cumulative.max_rel if r.cumulative else 0.0)
    if over is None or over.cumulative is None:  # nothing here fails: the failure is not this graph's
        return (
            "the outputs failed, but every node value is within its budget here, locally and cumulatively: "
            "the failure does not reproduce from torch-ir (the bundle was lowered differently, e.g. by another "
            "version, or eager PyTorch computes something other than its exported graph)"
        )
    return (
        "accumulated drift: every node is within its local budget, but the error adds up along the graph; "
        f"it first exceeds the output budget at node {over.node} ({over.aten}"
        f"{', ' + over.module_path if over.module_path else ''}; max abs {over.cumulative.max_abs:.3g}); "
        f"the largest relative error is at node {worst.node} ({worst.aten}, "
        f"{worst.cumulative.max_rel if worst.cumulative else 0.0:.3g})"
    )
