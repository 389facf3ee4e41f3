"""Conversion-time rewrites of the lowered program: work done once here is not done on every run.

Each pass keeps the numbers RLX computes exactly as they were:

- `fold_param_layouts`: a `Transpose` or `Reshape` of a parameter becomes a
  parameter stored in the new layout (`Program.derived_params`; the bundle writer
  applies the move to the weight's bytes). `Linear` lowers to `x @ W^T`; RLX 0.2.19
  merges that transpose into its GEMM only for 2-D, bias-free matmuls, and
  otherwise transposes the weight on every run (docs/design.md, "Weights in the
  layout RLX reads").
- `fold_constants`: a value computed from constants alone (attention masks built
  from `arange`, position tables, shape arithmetic) is evaluated once, by RLX
  itself (`evaluate`), and stored as a `Constant`.
- `remove_dead`: nodes and parameters nothing reads any more are dropped.

`Builder.known` uses `evaluate` during lowering, so a lowering can specialize on a
constant operand (e.g. attention with a causal mask built from `arange` becomes
RLX's fused causal attention).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from ..dtypes import RECORDS
from ..program import DerivedParam, FoldedBatchNorm, Program, Provenance, RlxNode, ValueDecl
from .defects import _BOUNDARY, _NP

# A folded value larger than this stays computed at run time (a Constant is stored inline in the HIR JSON).
MAX_FOLDED_ELEMENTS = 1 << 18
_LAYOUT_OPS = ("Transpose", "Reshape")


def _variant(op: Any) -> str:
    return op if isinstance(op, str) else next(iter(op))


def _use_counts(program: Program) -> dict[str, int]:
    """How many node inputs read each value; a graph output counts two more, so a rewrite that
    needs a single reader never rewires an output away."""
    uses: dict[str, int] = {}
    for n in program.nodes:
        for i in n.inputs:
            uses[i] = uses.get(i, 0) + 1
    for o in program.outputs:
        uses[o] = uses.get(o, 0) + 2
    return uses


def _splice(program: Program, replaced: dict[str, list[RlxNode]]) -> int:
    """Put each `replaced[id]` (nodes ending in one that keeps `id`) where node `id` was; returns the count."""
    if replaced:
        program.nodes = [new for n in program.nodes for new in replaced.get(n.id, [n])]
    return len(replaced)


def fold_param_layouts(program: Program) -> int:
    """Store parameters in the layout their readers want; returns how many moves were folded."""
    params = {p.name: p for p in program.params}
    derived = program.derived_params
    renames: dict[str, str] = {}
    kept: list[RlxNode] = []
    folded = 0
    for node in program.nodes:
        inputs = tuple(renames.get(i, i) for i in node.inputs)
        variant = _variant(node.op)
        if (
            variant in _LAYOUT_OPS
            and len(inputs) == 1
            and inputs[0] in params
            and params[inputs[0]].dtype == node.dtype
        ):
            src = params[inputs[0]]
            if variant == "Transpose":
                perm = tuple(int(p) for p in node.op["Transpose"]["perm"])
                step: tuple[str, tuple[int, ...]] = ("transpose", perm)
                suffix = "T" if perm == (1, 0) else "permute_" + "_".join(map(str, perm))
            else:
                step = ("reshape", node.dims)
                suffix = "reshape_" + "x".join(map(str, node.dims))
            base = derived.get(src.name)
            if not isinstance(base, DerivedParam):
                base = DerivedParam(src.name, ())
            name = f"{src.name}.{suffix}"
            if name not in params:
                derived[name] = DerivedParam(base.source, (*base.steps, step))
                params[name] = type(src)(name, node.dims, node.dtype)
                program.params.append(params[name])
            renames[node.id] = name
            folded += 1
            continue
        kept.append(
            node if inputs == node.inputs else RlxNode(node.id, node.op, inputs, node.dims, node.dtype, node.provenance)
        )
    program.nodes = kept
    program.outputs = [renames.get(o, o) for o in program.outputs]
    return folded


def derive(array: np.ndarray, steps: tuple[tuple[str, tuple[int, ...]], ...]) -> np.ndarray:
    """Apply a `DerivedParam`'s moves to the weight's elements (any dtype, bytes unchanged).

    The copy runs in torch (blocked and multi-threaded; numpy's strided copy of a large
    transpose was most of the bundle-writing time)."""
    import torch

    signed = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[array.dtype.itemsize]
    with warnings.catch_warnings():  # a read-only (mapped) weight: only read here, the moves copy it
        warnings.simplefilter("ignore", UserWarning)
        t = torch.from_numpy(np.ascontiguousarray(array).view(f"<i{array.dtype.itemsize}")).view(signed)
    for kind, arg in steps:
        t = t.permute(arg) if kind == "transpose" else t.reshape(arg)
    return t.contiguous().numpy().view(array.dtype)


def derived_spec(program: Program, name: str, weights: dict[str, Any]) -> tuple[str, tuple[int, ...]]:
    """A derived parameter's stored dtype and shape, without computing it."""
    d = program.derived_params[name]
    if isinstance(d, FoldedBatchNorm):
        return "float32", d.dims
    source = d.source
    while isinstance(program.derived_params.get(source), DerivedParam):
        source = program.derived_params[source].source  # type: ignore[union-attr]
    dtype = "float32" if source in program.derived_params else weights[source].dtype
    return dtype, next(p.dims for p in program.params if p.name == name)


def materialize(program: Program, name: str, weights: dict[str, Any]) -> tuple[str, np.ndarray]:
    """A parameter's stored dtype and elements, derived ones computed from `weights` (safetensors_io.RawTensor).

    Moves keep the source's exact bytes (the array holds them as unsigned integers of the
    element's size); a folded batch norm is float32.
    """
    d = program.derived_params.get(name)
    if d is None:
        t = weights[name]
        size = RECORDS[t.dtype].itemsize
        return t.dtype, np.frombuffer(t.data, dtype=f"<u{size}").reshape(t.shape)
    if isinstance(d, DerivedParam):
        dtype, array = materialize(program, d.source, weights)
        return dtype, derive(array, d.steps)
    return "float32", _fold_values(program, d, weights).astype("<f4")


def _float_values(program: Program, name: str, weights: dict[str, Any]) -> np.ndarray:
    dtype, raw = materialize(program, name, weights)
    if dtype != "float32":
        raise ValueError(f"batch-norm folding reads float32 weights, {name!r} is {dtype}")
    return raw.view("<f4").astype(np.float64)


def _fold_values(program: Program, d: FoldedBatchNorm, weights: dict[str, Any]) -> np.ndarray:
    gamma, beta, mean, var = (_float_values(program, n, weights).reshape(-1) for n in (d.gamma, d.beta, d.mean, d.var))
    scale = gamma / np.sqrt(var + d.eps)
    if d.role == "weight":
        w = _float_values(program, d.conv, weights) if d.conv else None
        assert w is not None
        return (w * scale.reshape((-1,) + (1,) * (w.ndim - 1))).reshape(d.dims)
    if d.role == "bias":
        bias = _float_values(program, d.conv, weights).reshape(-1) if d.conv else 0.0
        return ((bias - mean) * scale + beta).reshape(d.dims)
    if d.role == "scale":
        return scale.reshape(d.dims)
    return (beta - mean * scale).reshape(d.dims)


def constant_ids(program: Program) -> set[str]:
    """Nodes whose value depends on constants only (no graph input, no parameter)."""
    found: set[str] = set()
    for node in program.nodes:
        if _variant(node.op) == "Constant" or (node.inputs and all(i in found for i in node.inputs)):
            found.add(node.id)
    return found


def evaluate(program: Program, ids: list[str]) -> dict[str, np.ndarray]:
    """Compute constant-only values `ids` by running their sub-graph on RLX (same kernels as a real run)."""
    from .. import _core

    wanted = set(ids)
    need: set[str] = set()
    by_id = {n.id: n for n in program.nodes}
    stack = list(wanted)
    while stack:
        v = stack.pop()
        if v in need:
            continue
        need.add(v)
        stack.extend(by_id[v].inputs)
    sub = Program("consteval")
    sub.nodes = [n for n in program.nodes if n.id in need]
    where = Provenance("<constant folding>", "consteval")
    carriers: dict[str, str] = {}
    for v in ids:
        node = by_id[v]
        if node.dtype in _BOUNDARY:
            sub.outputs.append(v)
            carriers[v] = node.dtype
        else:  # bool and narrow integers cross RLX's boundary as float32 (boundary-narrow)
            sub.nodes.append(RlxNode(f"{v}.out", {"Cast": {"to": "F32"}}, (v,), node.dims, "F32", where))
            sub.outputs.append(f"{v}.out")
            carriers[v] = "F32"
    model = _core.CompiledModel(_core.program_to_hir_json(sub.to_core_json()))
    results = model.run([])
    out = {}
    for v, (data, _dtype, dims) in zip(ids, results, strict=True):
        array = np.frombuffer(data, dtype=_NP[carriers[v]]).reshape(dims)
        out[v] = array.astype(_NP[by_id[v].dtype])
    return out


def constant_node(node_id: str, array: np.ndarray, rlx_dtype: str, provenance: Provenance) -> list[RlxNode]:
    """RLX nodes that hold `array` as value `node_id` (narrow dtypes stored as float32 and cast: constant-narrow)."""
    dims = tuple(array.shape)
    if rlx_dtype in _BOUNDARY:
        data = np.ascontiguousarray(array.astype(np.dtype(_NP[rlx_dtype]).newbyteorder("<"))).tobytes()
        return [RlxNode(node_id, {"Constant": {"data": list(data)}}, (), dims, rlx_dtype, provenance)]
    stored = f"{node_id}.f32"
    data = np.ascontiguousarray(array.astype("<f4")).tobytes()
    return [
        RlxNode(stored, {"Constant": {"data": list(data)}}, (), dims, "F32", provenance),
        RlxNode(node_id, {"Cast": {"to": rlx_dtype}}, (stored,), dims, rlx_dtype, provenance),
    ]


def fold_constants(program: Program) -> int:
    """Replace every computed constant that a run reads by its value; returns how many were folded.
    Values of size-dependent nodes of a dynamic program stay computed (`Program.size_dependent`)."""
    consts = constant_ids(program)
    readers: dict[str, bool] = {}
    for node in program.nodes:
        if node.id not in consts:
            for i in node.inputs:
                readers[i] = True
    frontier = [
        n
        for n in program.nodes
        if n.id in consts
        and _variant(n.op) != "Constant"
        and (readers.get(n.id) or n.id in program.outputs)
        and math.prod(n.dims) <= MAX_FOLDED_ELEMENTS
        and n.provenance.node not in program.size_dependent
    ]
    if not frontier:
        return 0
    values = evaluate(program, [n.id for n in frontier])
    return _splice(program, {n.id: constant_node(n.id, values[n.id], n.dtype, n.provenance) for n in frontier})


def fold_batch_norm(program: Program) -> int:
    """Eval batch norm without its channels-last transposes: folded into the convolution that feeds
    it (weight scaled per output channel, one bias add) or, with no convolution, one multiply and
    one add in the input's own layout. float32 only; returns how many were folded."""
    by_id = {n.id: n for n in program.nodes}
    params = {p.name: p for p in program.params}
    all_dims = _all_dims(program)
    uses = _use_counts(program)
    consumers: dict[str, list[RlxNode]] = {}
    for n in program.nodes:
        for i in n.inputs:
            consumers.setdefault(i, []).append(n)

    def is_f32_param(v: str) -> bool:
        return v in params and params[v].dtype == "F32"

    drop: set[str] = set()
    insert: dict[str, list[RlxNode]] = {}  # new nodes placed where a batch norm was
    rewire: dict[str, RlxNode] = {}  # replaced nodes, same id
    renames: dict[str, str] = {}
    folded = 0
    for bn in program.nodes:
        if _variant(bn.op) != "BatchNormInference" or bn.dtype != "F32":
            continue
        moved, gamma, beta, mean, var = bn.inputs
        if not all(is_f32_param(v) for v in (gamma, beta, mean, var)):
            continue
        pre = by_id.get(moved)
        if pre is not None and _variant(pre.op) == "Transpose" and uses.get(moved) == 1:
            post = consumers.get(bn.id, [])
            if len(post) != 1 or _variant(post[0].op) != "Transpose" or uses.get(bn.id) != 1:
                continue
            x, out_id, gone = pre.inputs[0], post[0].id, {pre.id, bn.id, post[0].id}
        elif len(bn.dims) <= 2:
            x, out_id, gone = moved, bn.id, {bn.id}
        else:
            continue
        x_dims = all_dims.get(x)
        channels = bn.dims[-1]
        if x_dims is None or len(x_dims) < 2 or x_dims[1] != channels:
            continue
        per_channel = (1, channels) + (1,) * (len(x_dims) - 2)
        eps = float(bn.op["BatchNormInference"]["eps"])
        where = bn.provenance
        fold = {"gamma": gamma, "beta": beta, "mean": mean, "var": var, "eps": eps}
        conv, bias_add, conv_bias = _conv_feeding(x, by_id, uses, is_f32_param)
        if conv is not None and conv.dims[1] == channels:
            w = conv.inputs[1]
            norm = gamma.removesuffix(".weight")  # the batch norm's module path (its weight is `<module>.weight`)
            w_name = _claim(program, params, f"{w}.bn_folded",
                            FoldedBatchNorm("weight", w, dims=params[w].dims, **fold))  # fmt: skip
            b_name = _claim(program, params, f"{norm}.bn_folded_bias",
                            FoldedBatchNorm("bias", conv_bias, dims=per_channel, **fold))  # fmt: skip
            rewire[conv.id] = RlxNode(conv.id, conv.op, (conv.inputs[0], w_name, *conv.inputs[2:]), conv.dims,
                                      conv.dtype, conv.provenance)  # fmt: skip
            if bias_add is not None:
                rewire[bias_add.id] = RlxNode(bias_add.id, bias_add.op, (conv.id, b_name), bias_add.dims,
                                              bias_add.dtype, bias_add.provenance)  # fmt: skip
                renames[out_id] = bias_add.id
            else:
                shifted = RlxNode(f"{bn.id}.shift", {"Binary": "Add"}, (conv.id, b_name), x_dims, "F32", where)
                insert[bn.id] = [shifted]
                renames[out_id] = shifted.id
        else:
            norm = gamma.removesuffix(".weight")
            s_name = _claim(
                program, params, f"{norm}.bn_scale", FoldedBatchNorm("scale", None, dims=per_channel, **fold)
            )
            t_name = _claim(
                program, params, f"{norm}.bn_shift", FoldedBatchNorm("shift", None, dims=per_channel, **fold)
            )
            scaled = RlxNode(f"{bn.id}.scaled", {"Binary": "Mul"}, (x, s_name), x_dims, "F32", where)
            shifted = RlxNode(f"{bn.id}.shift", {"Binary": "Add"}, (scaled.id, t_name), x_dims, "F32", where)
            insert[bn.id] = [scaled, shifted]
            renames[out_id] = shifted.id
        drop |= gone
        folded += 1
    if not folded:
        return 0
    nodes: list[RlxNode] = []
    for n in program.nodes:
        nodes.extend(insert.get(n.id, []))
        if n.id in drop:
            continue
        n = rewire.get(n.id, n)
        if any(i in renames for i in n.inputs):
            n = RlxNode(n.id, n.op, tuple(renames.get(i, i) for i in n.inputs), n.dims, n.dtype, n.provenance)
        nodes.append(n)
    program.nodes = nodes
    program.outputs = [renames.get(o, o) for o in program.outputs]
    return folded


def _claim(program: Program, params: dict[str, ValueDecl], base: str, recipe: FoldedBatchNorm) -> str:
    """The parameter holding `recipe`: an existing one with the same recipe (a convolution and batch
    norm applied twice), else a new one named `base` (`base_2`, ... when that name holds another)."""
    name, n = base, 1
    while name in params or name in program.derived_params:
        if program.derived_params.get(name) == recipe:
            return name
        n += 1
        name = f"{base}_{n}"
    program.derived_params[name] = recipe
    params[name] = ValueDecl(name, recipe.dims, "F32")
    program.params.append(params[name])
    return name


def _conv_feeding(
    x: str, by_id: dict[str, RlxNode], uses: dict[str, int], is_f32_param: Any
) -> tuple[RlxNode | None, RlxNode | None, str | None]:
    """The convolution whose result only this batch norm reads: (conv, its bias add or None, bias param)."""
    node = by_id.get(x)
    if node is None or uses.get(x) != 1:
        return None, None, None
    if _variant(node.op) == "Binary" and node.op["Binary"] == "Add" and is_f32_param(node.inputs[1]):
        conv = by_id.get(node.inputs[0])
        if conv is not None and _variant(conv.op) == "Conv" and uses.get(conv.id) == 1 and is_f32_param(conv.inputs[1]):
            return conv, node, node.inputs[1]
        return None, None, None
    if _variant(node.op) == "Conv" and len(node.inputs) == 2 and is_f32_param(node.inputs[1]):
        return node, None, None
    return None, None, None


_ELEMENTWISE_UNARY = ("Activation", "Cast")


def _half_duplicated(v: str, by_id: dict[str, RlxNode]) -> bool:
    """Whether `v`'s last axis is two equal halves by construction: elementwise ops (unary, or with a
    scalar operand) over `Concat([a, a])` on the last axis (Hugging Face's `cat((freqs, freqs), -1)`)."""
    for _ in range(8):
        node = by_id.get(v)
        if node is None:
            return False
        kind = _variant(node.op)
        if kind == "Concat":
            axis = node.op["Concat"]["axis"]
            last = axis in (-1, len(node.dims) - 1)
            return last and len(node.inputs) == 2 and node.inputs[0] == node.inputs[1]
        if kind in _ELEMENTWISE_UNARY and len(node.inputs) == 1:
            v = node.inputs[0]
        elif kind == "Binary" and len(node.inputs) == 2:
            dims = [by_id[i].dims if i in by_id else None for i in node.inputs]
            scalar = [d is not None and math.prod(d) == 1 for d in dims]
            if scalar[1] and not scalar[0]:
                v = node.inputs[0]
            elif scalar[0] and not scalar[1]:
                v = node.inputs[1]
            else:
                return False
        else:
            return False
    return False


def _table(v: str, by_id: dict[str, RlxNode], seq: int, dim: int) -> str | None:
    """The [.., seq, dim] rotary table (leading extents all 1) a broadcast operand reshapes, if its
    halves are equal by construction."""
    node = by_id.get(v)
    while node is not None and _variant(node.op) == "Reshape":
        v, node = node.inputs[0], by_id.get(node.inputs[0])
    if node is None or node.dims[-2:] != (seq, dim) or math.prod(node.dims) != seq * dim:
        return None
    return v if _half_duplicated(v, by_id) else None


def fold_rotary(program: Program) -> int:
    """Rotary embeddings written as rotate-half (`q * cos + cat(-q2, q1) * sin`, Hugging Face's
    `apply_rotary_pos_emb`) become RLX's `Rope` (NeoX style). Only when cos and sin are tables whose
    halves are equal by construction (see `_half_duplicated`), so Rope's half table holds the same
    numbers; Rope computes `q1*c - q2*s` and `q2*c + q1*s` with the same roundings as the original."""
    by_id = {n.id: n for n in program.nodes}
    dims = _all_dims(program)
    replaced: dict[str, list[RlxNode]] = {}
    for add in program.nodes:
        if _variant(add.op) != "Binary" or add.op["Binary"] != "Add" or add.dtype != "F32" or len(add.dims) < 3:
            continue
        found = _match_rotate_half(add, by_id, dims)
        if found is None:
            continue
        q, cos, sin = found
        seq, dim = add.dims[-2], add.dims[-1]
        half = dim // 2
        where = add.provenance
        new: list[RlxNode] = []
        tables = []
        for name, table in (("cos", cos), ("sin", sin)):
            flat = RlxNode(
                f"{add.id}.{name}", {"Reshape": {"new_shape": [seq, dim]}}, (table,), (seq, dim), "F32", where
            )
            narrow = RlxNode(f"{add.id}.{name}_half", {"Narrow": {"axis": 1, "start": 0, "len": half}}, (flat.id,),
                             (seq, half), "F32", where)  # fmt: skip
            new += [flat, narrow]
            tables.append(narrow.id)
        rope = {"Rope": {"head_dim": dim, "n_rot": dim, "style": "NeoX"}}
        new.append(RlxNode(add.id, rope, (q, *tables), add.dims, "F32", where))
        replaced[add.id] = new
    return _splice(program, replaced)


def _all_dims(program: Program) -> dict[str, tuple[int, ...]]:
    """Every value's dims: graph inputs, parameters and nodes."""
    found = {v.name: v.dims for v in (*program.inputs, *program.params)}
    found.update((n.id, n.dims) for n in program.nodes)
    return found


def _match_rotate_half(
    add: RlxNode, by_id: dict[str, RlxNode], dims: dict[str, tuple[int, ...]]
) -> tuple[str, str, str] | None:
    """(q, cos table, sin table) when `add` is `q * cos + cat(-q[..., h:], q[..., :h]) * sin`."""
    seq, dim = add.dims[-2], add.dims[-1]
    if dim % 2:
        return None
    half = dim // 2
    muls = [by_id.get(i) for i in add.inputs]
    if any(m is None or _variant(m.op) != "Binary" or m.op["Binary"] != "Mul" or m.dims != add.dims for m in muls):
        return None
    for plain, rotated in (muls, muls[::-1]):
        assert plain is not None and rotated is not None
        for q, cos in (plain.inputs, plain.inputs[::-1]):
            if dims.get(q) != add.dims:
                continue
            for cat, sin in (rotated.inputs, rotated.inputs[::-1]):
                c = by_id.get(cat)
                if c is None or _variant(c.op) != "Concat" or c.op["Concat"]["axis"] not in (-1, len(c.dims) - 1):
                    continue
                if len(c.inputs) != 2:
                    continue
                neg, first = (by_id.get(i) for i in c.inputs)
                if neg is None or first is None or neg.op != {"Activation": "Neg"}:
                    continue
                second = by_id.get(neg.inputs[0])
                if not (_narrow_of(first, q, 0, half) and second is not None and _narrow_of(second, q, half, half)):
                    continue
                cos_t, sin_t = _table(cos, by_id, seq, dim), _table(sin, by_id, seq, dim)
                if cos_t is not None and sin_t is not None:
                    return q, cos_t, sin_t
    return None


def _narrow_of(node: RlxNode, source: str, start: int, length: int) -> bool:
    if _variant(node.op) != "Narrow" or node.inputs[0] != source:
        return False
    p = node.op["Narrow"]
    return p["axis"] in (-1, len(node.dims) - 1) and p["start"] == start and p["len"] == length


def _scalar_constant(v: str, by_id: dict[str, RlxNode]) -> float | None:
    node = by_id.get(v)
    if node is None or _variant(node.op) != "Constant" or node.dtype != "F32" or math.prod(node.dims) != 1:
        return None
    return float(np.frombuffer(bytes(node.op["Constant"]["data"]), dtype="<f4")[0])


def fold_rms_norm(program: Program) -> int:
    """RMS normalization written out (`w * (x * rsqrt(mean(x * x, -1, keepdim) + eps))`, Hugging Face's
    LlamaRMSNorm / T5LayerNorm in float32) becomes RLX's `RmsNorm` over the last axis: one pass
    instead of five. Its roundings differ from the chain's by an ulp or so (checked by parity)."""
    by_id = {n.id: n for n in program.nodes}
    params = {p.name: p for p in program.params}
    dims = _all_dims(program)
    uses = _use_counts(program)

    def only(v: str, kind: str) -> RlxNode | None:
        node = by_id.get(v)
        if node is None or uses.get(v) != 1 or node.dtype != "F32" or _variant(node.op) != kind.split(".")[0]:
            return None
        if "." in kind and node.op[kind.split(".")[0]] != kind.split(".")[1]:
            return None
        return node

    replaced: dict[str, list[RlxNode]] = {}
    for top in program.nodes:
        if _variant(top.op) != "Binary" or top.op["Binary"] != "Mul" or top.dtype != "F32" or len(top.dims) < 2:
            continue
        width = top.dims[-1]
        for w, y in (top.inputs, top.inputs[::-1]):
            if w not in params or params[w].dims != (width,) or params[w].dtype != "F32":
                continue
            found = _match_rms(only(y, "Binary.Mul"), only, by_id, dims, top.dims)
            if found is None:
                continue
            x, eps = found
            zeros = RlxNode(f"{top.id}.beta", {"Constant": {"data": [0] * (4 * width)}}, (), (width,), "F32",
                            top.provenance)  # fmt: skip
            norm = RlxNode(top.id, {"RmsNorm": {"axis": -1, "eps": eps}}, (x, w, zeros.id), top.dims, "F32",
                           top.provenance)  # fmt: skip
            replaced[top.id] = [zeros, norm]
            break
    return _splice(program, replaced)


def _match_rms(
    y: RlxNode | None,
    only: Any,
    by_id: dict[str, RlxNode],
    all_dims: dict[str, tuple[int, ...]],
    dims: tuple[int, ...],
) -> tuple[str, float] | None:
    """(x, eps) when `y` is `x * rsqrt(mean(x * x, last axis, keepdim) + eps)`."""
    if y is None or y.dims != dims:
        return None
    for x, r in (y.inputs, y.inputs[::-1]):
        if all_dims.get(x) != dims:
            continue
        rsqrt = only(r, "Activation.Rsqrt")
        add = only(rsqrt.inputs[0], "Binary.Add") if rsqrt is not None else None
        if add is None:
            continue
        for m, c in (add.inputs, add.inputs[::-1]):
            eps = _scalar_constant(c, by_id)
            mean = only(m, "Reduce")
            if eps is None or mean is None:
                continue
            reduce = mean.op["Reduce"]
            last = reduce["axes"] in ([len(dims) - 1], [-1])
            if reduce["op"] != "Mean" or not last or not reduce["keep_dim"]:
                continue
            sq = only(mean.inputs[0], "Binary.Mul")
            if sq is not None and sq.inputs == (x, x):
                return x, eps
    return None


def remove_dead(program: Program) -> int:
    """Drop nodes and parameters no output depends on; returns how many nodes went."""
    live = set(program.outputs)
    kept: list[RlxNode] = []
    for node in reversed(program.nodes):
        if node.id in live:
            kept.append(node)
            live.update(node.inputs)
    removed = len(program.nodes) - len(kept)
    program.nodes = kept[::-1]
    program.params = [p for p in program.params if p.name in live]
    needed, todo = set(), [p.name for p in program.params]
    while todo:  # derived parameters are computed from others, which stay in the table (not in the graph)
        name = todo.pop()
        if name in program.derived_params and name not in needed:
            needed.add(name)
            todo.extend(program.derived_params[name].sources())
    program.derived_params = {k: v for k, v in program.derived_params.items() if k in needed}
    return removed


def optimize(program: Program) -> dict[str, int]:
    """Run every pass; returns what each changed (for the report and the benchmark)."""
    stats = {"param_layouts_folded": fold_param_layouts(program)}
    stats["batch_norms_folded"] = fold_batch_norm(program)
    stats["rotary_embeddings_on_rope"] = fold_rotary(program)
    stats["rms_norms_fused"] = fold_rms_norm(program)
    stats["constants_folded"] = fold_constants(program)
    stats["dead_nodes_removed"] = remove_dead(program)
    return stats
