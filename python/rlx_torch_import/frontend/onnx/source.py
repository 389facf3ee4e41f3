"""An ONNX file read: the model (external data resolved beside it), its real inputs (graph inputs
that are not initializers), outputs, opsets and producer, in torch-ir's dtype names."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import InputError, ModelLoadError

# ONNX TensorProto element type -> torch-ir dtype name (the types a bundle can hold).
_ELEM_TYPES = {
    1: "float32",
    2: "uint8",
    3: "int8",
    5: "int16",
    6: "int32",
    7: "int64",
    9: "bool",
    10: "float16",
    11: "float64",
    16: "bfloat16",
}
# The ONNX names of every element type, for messages.
_ELEM_NAMES = {
    0: "undefined",
    1: "float",
    2: "uint8",
    3: "int8",
    4: "uint16",
    5: "int16",
    6: "int32",
    7: "int64",
    8: "string",
    9: "bool",
    10: "float16",
    11: "double",
    12: "uint32",
    13: "uint64",
    14: "complex64",
    15: "complex128",
    16: "bfloat16",
}


def elem_dtype(elem_type: int) -> str | None:
    """torch-ir dtype name of an ONNX element type; None where a bundle cannot hold it."""
    return _ELEM_TYPES.get(elem_type)


def elem_name(elem_type: int) -> str:
    """ONNX's own name of an element type (`1` -> "float")."""
    return _ELEM_NAMES.get(elem_type, f"type {elem_type}")


def unnamed_dim(tensor: str, axis: int) -> str:
    """The symbol of a dim the file leaves unnamed (no `dim_param`, or a negative `dim_value`): its own,
    `<tensor>:<axis>`, the spelling `--dim INPUT:AXIS=SIZE` takes."""
    return f"{tensor}:{axis}"


@dataclass(frozen=True)
class TensorInfo:
    """A graph input or output: name, dims (int, or the symbolic dim's name; an unnamed dim has its own
    symbol, `unnamed_dim`), ONNX element type."""

    name: str
    dims: tuple[int | str, ...] | None  # None: rank unknown
    elem_type: int

    @property
    def dtype(self) -> str | None:
        return elem_dtype(self.elem_type)

    def unnamed(self, axis: int) -> bool:
        """Whether the file leaves this axis's dim unnamed."""
        return self.dims is not None and self.dims[axis] == unnamed_dim(self.name, axis)

    def describe(self) -> str:
        """`name: type[dims]`, each dim as the file has it (an unnamed one as `?`)."""
        if self.dims is None:
            return f"{self.name}: {elem_name(self.elem_type)}?"
        dims = ", ".join("?" if self.unnamed(i) else str(d) for i, d in enumerate(self.dims))
        return f"{self.name}: {elem_name(self.elem_type)}[{dims}]"


@dataclass
class OnnxSource:
    """One ONNX file as read (`read`)."""

    path: Path
    model: Any  # onnx.ModelProto, external data loaded
    inputs: list[TensorInfo]
    outputs: list[TensorInfo]
    opsets: dict[str, int] = field(default_factory=dict)  # domain ("" is ai.onnx) -> version
    external_files: list[str] = field(default_factory=list)  # external-data files beside the model

    @property
    def opset(self) -> int:
        return self.opsets.get("", self.opsets.get("ai.onnx", 0))

    def producer(self) -> dict[str, str]:
        m = self.model
        found = {"onnx_producer": m.producer_name, "onnx_producer_version": m.producer_version}
        found["onnx_ir_version"] = str(m.ir_version)
        found["onnx_opsets"] = ", ".join(f"{d or 'ai.onnx'} {v}" for d, v in sorted(self.opsets.items()))
        return {k: v for k, v in found.items() if v}


def _dims(value_info: Any) -> tuple[int | str, ...] | None:
    t = value_info.type.tensor_type
    if not t.HasField("shape"):
        return None
    dims: list[int | str] = []
    for axis, d in enumerate(t.shape.dim):
        if d.HasField("dim_value") and d.dim_value >= 0:
            dims.append(int(d.dim_value))
        else:  # a dim_param names a symbol; without one (or a negative dim_value) the dim is its own
            dims.append(d.dim_param or unnamed_dim(value_info.name, axis))
    return tuple(dims)


def tensor_info(value_info: Any) -> TensorInfo:
    """A `ValueInfoProto` as a TensorInfo (a non-tensor type has element type 0)."""
    if not value_info.type.HasField("tensor_type"):
        return TensorInfo(value_info.name, None, 0)
    return TensorInfo(value_info.name, _dims(value_info), int(value_info.type.tensor_type.elem_type))


def _external_files(model: Any) -> list[str]:
    import onnx.external_data_helper as ext

    found: list[str] = []
    for tensor in ext._get_all_tensors(model):
        if ext.uses_external_data(tensor):
            location = next((e.value for e in tensor.external_data if e.key == "location"), "")
            if location and location not in found:
                found.append(location)
    return found


def read(path: str | os.PathLike[str]) -> OnnxSource:
    """Read the ONNX file at `path` with its external data (files named relative to it). Raises
    InputError when there is no such file, ModelLoadError when it is not a readable ONNX model, its
    external data is missing, or it is malformed (`wellformed.check`)."""
    import onnx

    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: no such ONNX file")
    try:
        model = onnx.load(str(p), load_external_data=False)
    except Exception as e:
        raise ModelLoadError(f"{p}: not a readable ONNX model ({type(e).__name__}: {str(e)[:200]})") from None
    if not model.HasField("graph") or (not model.graph.node and not model.graph.output):
        raise ModelLoadError(f"{p}: not an ONNX model (it holds no graph)")
    external = _external_files(model)
    for location in external:
        if not (p.parent / location).is_file():
            raise ModelLoadError(f"{p}: external data file {location!r} is missing (looked in {p.parent})")
    if external:
        try:
            onnx.load_external_data_for_model(model, str(p.parent))
        except Exception as e:
            raise ModelLoadError(f"{p}: cannot read its external data ({type(e).__name__}: {str(e)[:200]})") from None
    from .wellformed import check

    check(p, model)  # malformed structure, data and sizes: ModelLoadError (exit 2)
    initializers = {t.name for t in model.graph.initializer}
    return OnnxSource(
        path=p,
        model=model,
        inputs=[tensor_info(v) for v in model.graph.input if v.name not in initializers],
        outputs=[tensor_info(v) for v in model.graph.output],
        opsets={o.domain: int(o.version) for o in model.opset_import},
        external_files=external,
    )
