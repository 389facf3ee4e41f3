"""A bundle's format: its file names and version, meta.json made and written (`meta_for`,
`write_meta`), and read back with its weights.safetensors checked against it before anything is
bound.

`BundleModel` reads both through here; every error is a BundleError naming the file, the field
path (`inputs[0].shape[1]`) and the value, declared vs found.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import _core, complex_edge, jsondoc, safetensors_io
from ..dtypes import (
    HALF_DTYPES,
    RECORDS,
    TORCH_ITEMSIZE,
    complex_part,
    compute_rlx,
    from_rlx,
    is_complex,
    is_supported,
    to_rlx,
)
from ..errors import BundleError, InputError
from ..limits import check_tensor_size, is_dim, short
from ..outdir import write_text
from ..sizes import free_symbols
from ..torchir import check_output_tree
from ..version import __version__
from .ranges import bundle_ranges, check_meta_ranges, weight_ranges

if TYPE_CHECKING:
    from ..program import Program
    from ..torchir import TorchIR

BUNDLE_FORMAT = "rlx-torch-import-bundle"
BUNDLE_VERSION = 1
HIR = "model.hir.json"
# A dynamic bundle's symbolic graph (RLX's .rlxmodel text), specialized per binding at run time.
SYMBOLIC = "model.rlxmodel"
WEIGHTS = "weights.safetensors"
META = "meta.json"


def meta_for(
    program: Program,
    ir: TorchIR,
    tensors: Mapping[str, safetensors_io.TensorEntry],
    rlxmodel: str | None = None,
    lowered_at: dict[str, list[dict[str, int]]] | None = None,
) -> dict[str, Any]:
    """meta.json of the bundle `bundle.write.write_bundle` writes: `tensors` are the weights it
    stores (name -> (dtype, shape, data)); `rlxmodel` is a dynamic program's symbolic graph."""
    return {
        "format": BUNDLE_FORMAT,
        "version": BUNDLE_VERSION,
        "name": program.name,
        "rlx_version": _core.rlx_version(),
        "producer": {**ir.producer, "name": "rlx-torch-import", "version": __version__},
        "decomposition": ir.made_by,
        "inputs": _inputs_meta(program, ir, rlxmodel is not None),
        # The example call's positional arguments, by forward's parameter names (BundleModel.call).
        "call_args": list(ir.call_args),
        # Python values of the model's call that torch.export baked into the graph.
        "constant_inputs": list(ir.constant_inputs),
        # The structure forward returns (leaves: {"output": name} for an entry of "outputs",
        # {"constant": value, "name"} and {"size": expression, "name"} for Python values); {} = flat.
        "output_tree": ir.output_tree,
        "outputs": _outputs_meta(program, ir),
        # Inputs that feed an index operand and the range torch allows there, checked before each run.
        "index_ranges": bundle_ranges(program, ir),
        # Stored weights that feed an index operand (buffers, lifted index lists): checked when loaded.
        "weight_index_ranges": weight_ranges(program, ir),
        # Dynamic dims: each symbol once, with its range (max null: unbounded). Shapes above are
        # then lists of sizes and expressions of the symbols' torch names.
        "symbols": [symbol_record(sym) for sym in ir.symbols] if rlxmodel is not None else [],
        "specialized": list(ir.specialized),
        # The sizes (symbol label -> size) the symbolic graph was generalized from ("probes"; the sweep
        # points checked it too), and sweep points whose own lowering differs from it ("unreproduced").
        "lowered_at": lowered_at or {},
        # What a dynamic bundle makes per binding (docs/design.md, z): no op is lowered per binding.
        "per_binding": "the compiled executable: model.rlxmodel specialized to the binding and compiled once, "
        "then cached"
        if rlxmodel is not None
        else None,
        # dtype: the parameter's in the graph; stored: the tensor's in weights.safetensors (a half
        # weight of a float32 parameter is stored as it is; RLX widens it when binding).
        "params": [
            {"name": v.name, "shape": list(v.dims), "dtype": from_rlx(v.dtype), "stored": tensors[v.name][0]}
            for v in program.params
        ],
        "derived_params": {name: d.describe() for name, d in program.derived_params.items()},
        "rewrites": program.rewrites,
        # Set by verification when flushing subnormals leaves the verified outputs bit-identical.
        "flush_denormals": False,
        "op_histogram": program.op_histogram(),
        "aten_histogram": program.aten_histogram(),
        "provenance": {
            n.id: {
                "aten": n.provenance.aten,
                "node": n.provenance.node,
                "module_path": n.provenance.module_path,
                "source": n.provenance.source,
            }
            for n in program.nodes
        },
    }


def _inputs_meta(program: Program, ir: TorchIR, dynamic: bool) -> list[dict[str, Any]]:
    """meta.json's `inputs`: symbolic shapes in a dynamic bundle, the carrier dtype RLX takes."""
    return [
        {
            "name": v.name,
            "shape": list(spec.shape) if dynamic else list(v.dims),
            "dtype": program.carried_inputs.get(v.name, from_rlx(v.dtype)),
            "rlx_dtype": from_rlx(v.dtype),
            # where the tensor sits in the model's call: forward argument, then keys/positions
            "path": spec.path or v.name,
        }
        | (complex_edge.carrier(spec.dtype, list(spec.shape)) if is_complex(spec.dtype) else {})  # its float pairs
        for v, spec in zip(program.inputs, ir.inputs, strict=True)
    ]


def _outputs_meta(program: Program, ir: TorchIR) -> list[dict[str, Any]]:
    """meta.json's `outputs`, with the dtype each crosses RLX's boundary in (and `padded_axis` for one read
    flattened with a padding element: it may be empty, `lower/rlx/boundary.pad_empty_output`)."""
    return [
        {
            "name": o.name,
            "value": value,
            "shape": list(o.shape),
            "dtype": o.dtype,
            "rlx_dtype": "float32" if o.name in program.carried_outputs else o.dtype,
        }
        | (
            complex_edge.carrier(o.dtype, list(o.shape)) | {"rlx_dtype": complex_part(o.dtype)}
            if is_complex(o.dtype)
            else {}
        )
        | ({"padded_axis": program.padded_outputs[o.name]} if o.name in program.padded_outputs else {})
        for o, value in zip(ir.outputs, program.outputs, strict=True)
    ]


def meta_text(meta: dict[str, Any]) -> str:
    """meta.json's text: indented, no NaN, one trailing newline."""
    return json.dumps(meta, indent=1, allow_nan=False) + "\n"


def write_meta(path: Path, meta: dict[str, Any]) -> None:
    """Write meta.json at `path` (`meta`: its content, from `meta_for`)."""
    write_text(path, meta_text(meta))


def read_meta(path: Path) -> dict[str, Any]:
    """Read and check a bundle's meta.json (`check_meta`).

    Raises BundleError naming the file (and the field and value) when it cannot be read, is not
    JSON (or repeats a key in one object), or fails `check_meta`."""
    meta = jsondoc.read(path, BundleError)
    check_meta(meta, path)
    return meta


def _need(doc: dict[str, Any], key: str, kind: jsondoc.Kind, where: str, required: bool = True) -> Any:
    """`doc[key]` of JSON type `kind` (None when absent and not `required`), else BundleError naming the field."""
    if key not in doc and not required:
        return None
    return jsondoc.need(doc, key, kind, where, BundleError)


# Values that cross the RLX boundary as float32 (exact): bool, narrow integers, half precision.
_CARRIED = frozenset(r.name for r in RECORDS.values() if r.carrier != r.rlx)
# The dtypes a bundle's values and params may have (`dtypes.is_supported`).
_RLX_DTYPES = tuple(d for d in TORCH_ITEMSIZE if is_supported(d))


def symbol_record(sym: Any) -> dict[str, Any]:
    """A symbol as meta.json records it; `stage`/`defined_by` only for a size a stage computes, `derived`
    only for one derived from others."""
    record = asdict(sym)
    if not record.get("stage"):
        record.pop("stage", None)
        record.pop("defined_by", None)
    if not record.get("derived"):
        record.pop("derived", None)
    return record


def check_meta(meta: Any, path: Path) -> None:
    """Check a decoded meta.json: format and version; `inputs`, `outputs` (name, shape, dtype, and
    optional rlx_dtype and path) and `params` (name, static shape, dtype) present with the right
    types, names unique in each, dtypes RLX has, shapes non-negative ints within `limits` (or, in a
    dynamic bundle, size expressions of its `symbols`); the optional fields the runtime reads
    (`symbols`, `flush_denormals`, `call_args`, `constant_inputs`, `output_tree`) well formed.

    Raises BundleError naming the file, the field path (`inputs[0].shape[1]`) and the value."""
    if not isinstance(meta, dict):
        raise BundleError(f"{path}: top level is a JSON {type(meta).__name__}, not an object")
    if meta.get("format") != BUNDLE_FORMAT or meta.get("version") != BUNDLE_VERSION:
        raise BundleError(
            f"{path}: format {short(meta.get('format'))} version {short(meta.get('version'))} "
            f"is not {BUNDLE_FORMAT!r} version {BUNDLE_VERSION}"
        )
    where = str(path)
    seen: dict[tuple[str, Any], int] = {}
    for i, sym in enumerate(_need(meta, "symbols", list, where, required=False) or []):
        at = f"{path}: symbols[{i}]"
        if not isinstance(sym, dict):
            raise BundleError(f"{at}: expected an object, found {short(sym)}")
        for key in ("id", "min", "example"):
            _need(sym, key, int, at)
        for key in ("name", "label"):
            _need(sym, key, str, at)
        hi = _need(sym, "max", (int, type(None)), at)
        if not sym["name"].isidentifier() or not 0 <= sym["min"] <= sym["example"] <= (
            sym["example"] if hi is None else hi
        ):
            raise BundleError(f"{at}: {short(sym)} is not an identifier name with 0 <= min <= example <= max")
        for key in ("id", "name", "label"):
            if (key, sym[key]) in seen:
                raise BundleError(
                    f"{at}.{key}: {short(sym[key])} is already the {key} of symbols[{seen[key, sym[key]]}]"
                )
            seen[key, sym[key]] = i
    symbols = {s["name"] for s in meta.get("symbols") or []}
    for group in ("inputs", "outputs", "params"):
        names: dict[str, int] = {}
        for i, spec in enumerate(_need(meta, group, list, where)):
            at = f"{path}: {group}[{i}]"
            if not isinstance(spec, dict):
                raise BundleError(f"{at}: expected an object, found {short(spec)}")
            name = _need(spec, "name", str, at)
            if name in names:
                raise BundleError(f"{at}.name: {short(name)} is already the name of {group}[{names[name]}]")
            names[name] = i
            dtype, shape = _need(spec, "dtype", str, at), _need(spec, "shape", list, at)
            if dtype not in _RLX_DTYPES:
                raise BundleError(f"{at}.dtype: {short(dtype)} is not one of {', '.join(_RLX_DTYPES)}")
            carrier = _need(spec, "rlx_dtype", str, at, required=False)
            if carrier is not None and (carrier not in _RLX_DTYPES or carrier in HALF_DTYPES):
                # half values always cross as float32 (docs/design.md, l)
                raise BundleError(f"{at}.rlx_dtype: {short(carrier)} is not a dtype RLX takes at the boundary")
            if carrier is not None and carrier != dtype and not (carrier == "float32" and dtype in _CARRIED):
                # only bool, narrow integers and half floats cross as float32 (exact); nothing else changes dtype
                raise BundleError(f"{at}: dtype {short(dtype)} cannot be carried as rlx_dtype {short(carrier)}")
            _need(spec, "path", str, at, required=False)
            complex_edge.check_spec(spec, at)
            stored = _need(spec, "stored", str, at, required=False)
            if stored is not None and (stored not in _RLX_DTYPES or compute_rlx(stored) != to_rlx(dtype)):
                raise BundleError(f"{at}.stored: {short(stored)} cannot hold a {dtype} parameter")
            for k, d in enumerate(shape):
                if isinstance(d, str) and symbols and group != "params":
                    try:
                        unknown = free_symbols(d) - symbols
                    except InputError as e:
                        raise BundleError(f"{at}.shape[{k}]: {e.message}") from None
                    if unknown:
                        raise BundleError(
                            f"{at}.shape[{k}]: {d!r} uses undeclared symbol(s) {', '.join(sorted(unknown))}"
                        )
                elif not is_dim(d):
                    raise BundleError(f"{at}.shape[{k}]: {short(d)} is not a size (a non-negative int)")
            if all(isinstance(d, int) for d in shape):
                check_tensor_size(shape, dtype, f"{at}.shape", BundleError)
    _need(meta, "flush_denormals", bool, where, required=False)
    for k, arg in enumerate(_need(meta, "call_args", list, where, required=False) or []):
        if not isinstance(arg, str):
            raise BundleError(f"{path}: call_args[{k}]: expected a string, found {short(arg)}")
    for k, const in enumerate(_need(meta, "constant_inputs", list, where, required=False) or []):
        if not (isinstance(const, dict) and isinstance(const.get("path"), str) and "value" in const):
            raise BundleError(f"{path}: constant_inputs[{k}]: {short(const)} is not an object with path and value")
    check_meta_ranges(meta, where)
    tree = _need(meta, "output_tree", dict, where, required=False)
    if tree:
        check_output_tree(tree, f"{path}: output_tree", {o["name"] for o in meta["outputs"]}, BundleError)


def check_params(params: list[dict[str, Any]], tensors: Mapping[str, safetensors_io.RawTensor], path: Path) -> None:
    """Check a bundle's weights.safetensors (`tensors`, read from `path`) against meta.json's
    `params`: the same names, each tensor of its param's shape and dtype (a half-precision tensor
    for a float32 param: RLX computes half as float32 and widens it when binding).

    Raises BundleError naming the file, the tensor, and declared vs found."""
    declared = {p["name"]: p for p in params}
    missing = [n for n in declared if n not in tensors]
    extra = sorted(n for n in tensors if n not in declared)
    if missing or extra:
        parts = [f"missing {', '.join(map(repr, missing[:8]))}"] if missing else []
        parts += [f"not in meta.json's params: {', '.join(map(repr, extra[:8]))}"] if extra else []
        raise BundleError(f"{path}: tensors do not match meta.json's params ({'; '.join(parts)})")
    for name, p in declared.items():
        t = tensors[name]
        stored = p.get("stored")  # bundles written before the field: any dtype RLX computes the param in
        dtype_ok = t.dtype == stored if stored is not None else compute_rlx(t.dtype) == to_rlx(p["dtype"])
        if list(t.shape) != list(p["shape"]) or not dtype_ok:
            raise BundleError(
                f"{path}: tensor {name!r} is {t.dtype}{list(t.shape)}; meta.json params declares "
                f"{stored or p['dtype']}{p['shape']}"
            )
