"""Index ranges of graph inputs: which inputs feed an index operand, the range torch allows there
(`index_ranges`, recorded at conversion in meta.json's `index_ranges`), and the check `BundleModel`
runs on each feed before RLX sees it (`check_ranges`).

RLX's gathers trust their indices (an id past an embedding table reads zeros or other rows, -1 reads
row 0), while torch raises IndexError. So an input that reaches an index operand unchanged (through
views, reshapes, permutes, expands, copies and widening integer casts: every element of the input is
an index) is checked on the host: a cheap min/max over the array, then the first offending position.

The range is torch's rule for the op (checked against eager PyTorch 2.x): `embedding`,
`embedding_bag`, `index_select`, `gather`, `scatter*`: [0, n); advanced indexing (`x[idx]`,
`index_put`): [-n, n), negatives wrap (the lowering wraps them). `n` is the size of the axis indexed
(a symbol expression in a dynamic bundle, evaluated at the run's sizes). A program from RLX's ONNX
importer (no torch-ir nodes) gets its ranges from the RLX Gathers its inputs reach (`program_ranges`).
Indices computed inside the graph (argmax, arithmetic on ids) are not checked (docs/usage.md, "What is
checked"; docs/design.md, aq).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from ..errors import BundleError, IndexRangeError
from ..limits import short
from ..sizes import evaluate

# aten op -> (index operand's position and name, table operand's position and name, position and
# name of its `dim` argument (None: axis 0), whether negative indices wrap as in Python).
_RULES: dict[str, tuple[tuple[int, str], tuple[int, str], tuple[int, str] | None, bool]] = {
    "aten.embedding.default": ((1, "indices"), (0, "weight"), None, False),
    "aten._embedding_bag.default": ((1, "indices"), (0, "weight"), None, False),
    "aten._embedding_bag_forward_only.default": ((1, "indices"), (0, "weight"), None, False),
    "aten.embedding_bag.padding_idx": ((1, "indices"), (0, "weight"), None, False),
    "aten.index_select.default": ((2, "index"), (0, "self"), (1, "dim"), False),
    "aten.gather.default": ((2, "index"), (0, "self"), (1, "dim"), False),
    "aten.scatter.src": ((2, "index"), (0, "self"), (1, "dim"), False),
    "aten.scatter.value": ((2, "index"), (0, "self"), (1, "dim"), False),
    "aten.scatter_add.default": ((2, "index"), (0, "self"), (1, "dim"), False),
    "aten.scatter_reduce.two": ((2, "index"), (0, "self"), (1, "dim"), False),
}
# Advanced indexing: a list of optional index tensors, the i-th indexing axis i of `self`.
_LIST_RULES = {"aten.index.Tensor": (1, "indices"), "aten.index_put.default": (1, "indices")}

# Ops whose output holds exactly the input's elements (every element, values unchanged).
_MOVEMENT = frozenset(
    {
        "aten.view.default",
        "aten.reshape.default",
        "aten._unsafe_view.default",
        "aten.unsqueeze.default",
        "aten.squeeze.default",
        "aten.squeeze.dim",
        "aten.squeeze.dims",
        "aten.flatten.using_ints",
        "aten.permute.default",
        "aten.transpose.int",
        "aten.t.default",
        "aten.expand.default",
        "aten.clone.default",
        "aten.contiguous.default",
        "aten.alias.default",
        "aten.detach.default",
        "aten.lift_fresh_copy.default",
        "aten.view_copy.default",
        "aten.permute_copy.default",
        "aten.unsqueeze_copy.default",
    }
)
_CASTS = frozenset({"aten._to_copy.default", "aten.to.dtype", "aten.to.dtype_layout", "aten.to.device"})
_INT_WIDTH = {"uint8": 8, "int8": 8, "int16": 16, "int32": 32, "int64": 64}


def _arg(node: Any, position: int, name: str) -> Any:
    """A node's argument by position or keyword (its tagged torch-ir form; None when absent)."""
    if position < len(node.args):
        return node.args[position]
    return node.kwargs.get(name)


def _widening(src: str, dst: str) -> bool:
    """An integer cast that keeps every value (so a bad value stays bad)."""
    if src not in _INT_WIDTH or dst not in _INT_WIDTH:
        return False
    if src.startswith("u") and not dst.startswith("u"):
        return _INT_WIDTH[dst] > _INT_WIDTH[src]
    return _INT_WIDTH[dst] >= _INT_WIDTH[src] and not (dst.startswith("u") and not src.startswith("u"))


def _sources(ir: Any, starts: Mapping[str, str]) -> Iterator[tuple[str, str]]:
    """(value name, the starting value it is, element for element) through movement and widening casts;
    `starts`: torch-ir value name -> dtype (the graph inputs, or the stored weights)."""
    dtypes = dict(starts)
    origin = {name: name for name in starts}
    for node in ir.nodes:
        first = node.args[0] if node.args else None
        src = first.get("tensor") if isinstance(first, dict) else None
        if src not in origin or len(node.outputs) != 1:
            continue
        out = node.outputs[0]
        if node.target in _MOVEMENT or (node.target in _CASTS and _widening(dtypes[src], out.dtype)):
            origin[out.name] = origin[src]
            dtypes[out.name] = out.dtype
    yield from origin.items()


def index_ranges(ir: Any, names: list[str]) -> list[dict[str, Any]]:
    """meta.json's `index_ranges`: for each graph input (torch-ir `ir.inputs`; `names`, the bundle's
    input names, in the same order) that feeds an index operand element for element, the range torch
    allows: {"input", "low", "high" (an int, or a size expression of the bundle's symbols; the valid
    range is [low, high), low = -high where negatives wrap), "op", "node", "module_path", "axis"}."""
    bundle_name = {s.name: n for s, n in zip(ir.inputs, names, strict=True)}
    return _torch_ranges(ir, {s.name: s.dtype for s in ir.inputs}, bundle_name)


def _torch_ranges(ir: Any, starts: Mapping[str, str], bundle_name: Mapping[str, str]) -> list[dict[str, Any]]:
    """`index_ranges` entries of the values `starts` (torch-ir name -> dtype) that feed an index operand
    element for element, each under its bundle name (`bundle_name`) in the entry's "input"."""
    origin = dict(_sources(ir, starts))
    shapes: dict[str, list[Any]] = {s.name: list(s.shape) for s in ir.inputs}
    shapes |= {w.name: list(w.shape) for w in ir.weights}
    for node in ir.nodes:
        shapes |= {o.name: list(o.shape) for o in node.outputs}
    found: list[dict[str, Any]] = []

    def record(node: Any, index: Any, table: Any, axis: int, wraps: bool) -> None:
        name = index.get("tensor") if isinstance(index, dict) else None
        table_name = table.get("tensor") if isinstance(table, dict) else None
        dims = shapes.get(table_name) if isinstance(table_name, str) else None
        if name not in origin or dims is None:
            return
        rank = max(len(dims), 1)
        axis = axis + rank if axis < 0 else axis
        if not 0 <= axis < rank:
            return
        size = dims[axis] if dims else 1  # a 0-d table has one element along axis 0 / -1
        low: Any = 0 if not wraps else (-size if isinstance(size, int) else f"-({size})")
        entry = {
            "input": bundle_name[origin[name]],
            "low": low,
            "high": size,
            "op": node.target,
            "node": node.name,
            "module_path": node.module_path,
            "axis": axis,
        }
        if entry not in found:
            found.append(entry)

    for node in ir.nodes:
        if node.target in _RULES:
            (ip, iname), (tp, tname), dim, wraps = _RULES[node.target]
            axis_arg = _arg(node, *dim) if dim is not None else {"int": 0}
            if isinstance(axis_arg, dict) and isinstance(axis_arg.get("int"), int):
                record(node, _arg(node, ip, iname), _arg(node, tp, tname), axis_arg["int"], wraps)
        elif node.target in _LIST_RULES:
            listed = _arg(node, *_LIST_RULES[node.target])
            for axis, index in enumerate(listed.get("list", []) if isinstance(listed, dict) else []):
                record(node, index, node.args[0], axis, True)
    return found


# RLX index ops of an importer's program (the ONNX door) -> whether the kernel counts a negative index
# from the end (ONNX's and ONNX Runtime's rule). RLX's Gather does not: -1 reads row 0.
_RLX_INDEX_OPS = {"Gather": False, "GatherElements": True}
_RLX_MOVEMENT = frozenset({"Reshape", "Cast"})
_NO_WRAP = (
    "; ONNX Runtime counts a negative index from the end, RLX's Gather does not, so the bundle refuses it "
    "rather than read another row"
)


def program_ranges(program: Any, sources: set[str] | None = None) -> list[dict[str, Any]]:
    """`index_ranges` of a program with no torch-ir nodes (the ONNX door: RLX's importer's program): each
    graph input that reaches the index operand of a Gather (through Reshape and Cast nodes), with the
    range the kernel reads as ONNX Runtime would: [0, n) for Gather (which does not wrap negatives, so
    one is refused; the entry's `note` says so), [-n, n) for GatherElements. Keys as `index_ranges`."""
    inputs = {v.name for v in program.inputs} if sources is None else sources
    dims: dict[str, tuple[int, ...]] = {v.name: v.dims for v in [*program.inputs, *program.params]}
    kinds: dict[str, tuple[str, tuple[str, ...]]] = {}
    for node in program.nodes:
        dims[node.id] = node.dims
        kind = node.op if isinstance(node.op, str) else next(iter(node.op))
        kinds[node.id] = (kind, node.inputs)

    def origin(name: str) -> str | None:
        while name in kinds and kinds[name][0] in _RLX_MOVEMENT and kinds[name][1]:
            name = kinds[name][1][0]
        return name if name in inputs else None

    found: list[dict[str, Any]] = []
    for node in program.nodes:
        kind = node.op if isinstance(node.op, str) else next(iter(node.op))
        if kind not in _RLX_INDEX_OPS or len(node.inputs) < 2:
            continue
        source, table = origin(node.inputs[1]), dims.get(node.inputs[0])
        axis = node.op[kind].get("axis", 0) if isinstance(node.op, dict) else 0
        if source is None or table is None or not isinstance(axis, int) or not -len(table) <= axis < len(table):
            continue
        axis %= len(table)
        n, wraps = table[axis], _RLX_INDEX_OPS[kind]
        entry = {
            "input": source,
            "low": -n if wraps else 0,
            "high": n,
            "op": node.provenance.aten,
            "node": node.provenance.node,
            "module_path": node.provenance.module_path,
            "axis": axis,
        }
        if not wraps:
            entry["note"] = _NO_WRAP
        if entry not in found:
            found.append(entry)
    return found


def bundle_ranges(program: Any, ir: Any) -> list[dict[str, Any]]:
    """meta.json's `index_ranges` for a bundle: torch's rules from the torch-ir (`index_ranges`), or for
    a program its front end made (torch-ir holding its boundary only: RLX's ONNX importer's) the
    kernels' (`program_ranges`)."""
    if ir.boundary_only:
        return program_ranges(program)
    return index_ranges(ir, [v.name for v in program.inputs])


def weight_ranges(program: Any, ir: Any) -> list[dict[str, Any]]:
    """meta.json's `weight_index_ranges`: each stored weight (a buffer, or a constant torch.export lifted,
    such as the list of `x[:, [0, 3, 7]]`) that feeds an index operand element for element, with the
    range the op allows there (keys as `index_ranges`, "weight" for "input"; ranges sized by a symbol are
    left out). `BundleModel` checks the stored values once, when it loads the bundle
    (`check_weight_ranges`), so a hand-edited weights.safetensors cannot make RLX read out of bounds."""
    params = {v.name for v in program.params}
    if ir.boundary_only:
        entries = program_ranges(program, params)
    else:
        stored = [w for w in ir.weights if w.key in params]  # bound by state_dict key
        entries = _torch_ranges(ir, {w.name: w.dtype for w in stored}, {w.name: w.key for w in stored})
    found = []
    for e in entries:
        if isinstance(e["low"], int) and isinstance(e["high"], int):
            e = dict(e)
            found.append({"weight": e.pop("input"), **e})
    return found


def check_weight_ranges(ranges: Any, weights: Mapping[str, Any], path: Any) -> None:
    """Refuse a bundle whose stored index weights (`ranges`: meta.json's `weight_index_ranges`; `weights`:
    weights.safetensors read, name -> RawTensor) hold a value outside their range. Raises BundleError
    (exit 2) naming the file, weight, position, value, range and the op (node) it indexes."""
    for r in ranges:
        tensor = weights.get(r["weight"])
        if tensor is None:
            continue  # check_params has refused a missing weight already
        arr = tensor.to_numpy()
        if arr.size == 0 or arr.dtype.kind not in "iuf":
            continue
        low, high = int(r["low"]), int(r["high"])
        found = _first_outside(arr, low, high)
        if found is None:
            continue
        position, value = found
        raise BundleError(
            f"{path}: weight {r['weight']!r} holds {value} at position {position}, {_outside_text(r, low, high)}",
            hint="the weights file was changed after conversion; convert again, or restore the weight",
        )


def _first_outside(arr: np.ndarray, low: int, high: int) -> tuple[list[int], Any] | None:
    """The position and value of the first element of `arr` outside [low, high) (None when none is)."""
    if low <= arr.min() and arr.max() < high:
        return None
    bad = int(np.flatnonzero((arr < low) | (arr >= high))[0])
    return [int(i) for i in np.unravel_index(bad, arr.shape)], arr.reshape(-1)[bad]


def _outside_text(r: Mapping[str, Any], low: int, high: int) -> str:
    """The message's tail for range entry `r`: the range and the op, axis, node and module it indexes."""
    where = f"node {r.get('node', '?')}" + (f" in {r['module_path']}" if r.get("module_path") else "")
    indexed = f"axis {r.get('axis', '?')} of {r['op']} ({where})"
    return f"outside the valid range [{low}, {high}) of the index it feeds: {indexed}"


def _bound(value: Any, at: Mapping[str, int]) -> int:
    if isinstance(value, str) and value.startswith("-(") and value.endswith(")"):
        return -evaluate(value[2:-1], at)
    return evaluate(value, at)


def check_ranges(ranges: list[dict[str, Any]], arrays: Mapping[str, np.ndarray], at: Mapping[str, int]) -> None:
    """Refuse a feed with an index outside its range (`ranges`: meta.json's `index_ranges`; `arrays`:
    the inputs by name, inputs left out, such as resident ones, are skipped; `at`: symbol name -> size).

    Raises IndexRangeError (an InputError and an IndexError, exit 2) naming the input, the position
    and value of the first offending index, the valid range and the op (node, module) it indexes."""
    for r in ranges:
        arr = arrays.get(r["input"])
        if arr is None or arr.size == 0:
            continue
        low, high = _bound(r["low"], at), _bound(r["high"], at)
        found = _first_outside(arr, low, high)
        if found is None:
            continue
        position, value = found[0], int(found[1])
        note = "; negative indices count from the end, as in torch" if low < 0 else ""
        note = r.get("note", "") if value < 0 <= low else note  # the ONNX door: why a negative id is refused
        raise IndexRangeError(
            f"input {r['input']!r} holds {value} at position {position}, {_outside_text(r, low, high)}{note}",
            hint=(
                "eager PyTorch refuses this input too (IndexError or RuntimeError); "
                if str(r["op"]).startswith("aten.")
                else ""
            )
            + "check the ids (vocabulary size, padding id)",
        )


def check_prompt_ranges(ranges: list[dict[str, Any]], name: str, ids: np.ndarray) -> None:
    """`check_ranges` of a whole prompt `ids` fed to input `name` in pieces (`generate`): positions are
    the prompt's. Ranges sized by a symbol are left to each run's own check."""
    fixed = [r for r in ranges if r["input"] == name and isinstance(r["low"], int) and isinstance(r["high"], int)]
    check_ranges(fixed, {name: ids}, {})


def check_meta_ranges(meta: Mapping[str, Any], where: str) -> None:
    """meta.json's optional `index_ranges` and `weight_index_ranges` well formed (BundleError naming the
    entry and field); `meta`'s inputs and params are checked already."""

    def names(entries: Any) -> set[str]:  # only well-formed names: a damaged entry matches nothing
        listed = entries if isinstance(entries, list) else []
        return {e["name"] for e in listed if isinstance(e, dict) and isinstance(e.get("name"), str)}

    if "index_ranges" in meta:
        _check_ranges_field(meta["index_ranges"], names(meta.get("inputs")), where, "index_ranges")
    if "weight_index_ranges" in meta:
        _check_ranges_field(meta["weight_index_ranges"], names(meta.get("params")), where, "weight_index_ranges")


def _check_ranges_field(ranges: Any, inputs: set[str], where: str, field: str) -> None:
    if not isinstance(ranges, list):
        raise BundleError(f"{where}: {field}: expected a list, found {short(ranges)}")
    key = "weight" if field == "weight_index_ranges" else "input"
    for k, r in enumerate(ranges):
        bound = (int,) if key == "weight" else (int, str)  # a stored weight's range is fixed at conversion
        ok = isinstance(r, dict) and isinstance(r.get(key), str) and r[key] in inputs and isinstance(r.get("op"), str)
        ok = ok and all(isinstance(r.get(f), bound) and not isinstance(r.get(f), bool) for f in ("low", "high"))
        ok = ok and isinstance(r.get("axis", 0), int) and isinstance(r.get("node", ""), str)
        if not ok:
            raise BundleError(
                f"{where}: {field}[{k}]: {short(r)} is not an object with an {key} of the bundle, op, low and high"
            )
