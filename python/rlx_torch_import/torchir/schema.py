"""The torch-ir.json schema: our own versioned, documented record of an exported graph.

See docs/torch-ir.md. Arguments are tagged (`{"int": 3}`, `{"tensor": "x"}`, ...)
so a reader never guesses a type, and non-finite floats are spelled as strings so
the file is strict JSON.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..layout import TORCH_IR
from ..outdir import write_text
from ..sizes import Dim, Symbol

FORMAT = "rlx-torch-ir"
VERSION = 4
# Version 1 files (static shapes only) read as version 2 files without symbols. Versions up to 3 wrote
# decomposition "onnx" for a torch-ir holding its boundary only: read as "" (`BOUNDARY_ONLY`), the ONNX
# front end named in `producer["frontend"]`.
READABLE_VERSIONS = (1, 2, 3, 4)

# The export levels (`frontend.torch.export.DECOMPOSITION_LEVELS`) and the weight kinds capture writes.
DECOMPOSITIONS = ("aten", "high", "core")
# No decomposition: no ATen graph at all. Torch-ir then holds the graph's boundary only (inputs, outputs,
# weights, no nodes) and the program comes from its front end's program hook (`door.Door.program`:
# an ONNX file through RLX's importer).
BOUNDARY_ONLY = ""
WEIGHT_KINDS = ("parameter", "buffer", "constant")

ARG_TAGS = (
    "tensor",
    "int",
    "float",
    "bool",
    "str",
    "none",
    "dtype",
    "list",
    "device",
    "layout",
    "memory_format",
    "sym",
)


@dataclass
class TensorSpec:
    """A named value: its shape (each dim a size, or an expression of symbols such as
    `"s0*8"`; `sizes.py`) and a torch dtype name."""

    name: str
    shape: list[Dim]
    dtype: str
    # A graph input's place in the model's call: the forward argument, then keys/positions
    # inside it, dot-joined (`attention_mask`, `d.a`, `xs.1`); empty for other values.
    path: str = ""


@dataclass
class WeightSpec:
    """A parameter, buffer or lifted constant; `key` is its `state_dict` name."""

    name: str
    key: str
    kind: str
    shape: list[int]
    dtype: str


@dataclass
class Node:
    """One ATen call. `outputs` has one entry per tensor it returns (tuples flattened)."""

    name: str
    target: str
    args: list[Any]
    kwargs: dict[str, Any]
    outputs: list[TensorSpec]
    module_path: str = ""
    module_type: str = ""
    source: str = ""
    decomposed_from: str = ""
    # Memory layout of tensor arguments, by value name, for ops whose result depends on it
    # (`LAYOUT_SENSITIVE`): {"strides": [...], "storage_offset": n}. Omitted from the file when empty.
    layouts: dict[str, dict[str, Any]] = field(default_factory=dict)
    # A size computation (`aten.sym_size.int`, `operator.mul`, ...): the SymInt it gives, as an
    # expression of symbols. Such a node has no tensor outputs; its uses carry `{"sym": expr}`.
    # Omitted from the file when empty.
    sym: str = ""

    def reads(self) -> list[str]:
        """The value names its arguments read, in order (`arg_reads` of each arg and kwarg)."""
        return [name for a in [*self.args, *self.kwargs.values()] for name in arg_reads(a)]


def arg_reads(arg: Any) -> list[str]:
    """The value names one tagged argument reads: `{"tensor": name}`, and those in a `{"list": [...]}`."""
    if not isinstance(arg, dict) or len(arg) != 1:
        return []
    ((tag, payload),) = arg.items()
    if tag == "tensor":
        return [payload]
    if tag == "list":
        return [name for item in payload for name in arg_reads(item)]
    return []


# Ops that read their input's storage rather than its logical elements; capture records their layouts.
LAYOUT_SENSITIVE = ("aten.as_strided.default", "aten.as_strided_copy.default", "aten.as_strided_scatter.default")


@dataclass
class OutputSpec:
    """A graph output: its public name and the value that carries it."""

    name: str
    value: str
    shape: list[Dim]
    dtype: str


@dataclass
class TorchIR:
    """A whole exported program in our schema."""

    name: str
    decomposition: str
    inputs: list[TensorSpec]
    weights: list[WeightSpec]
    nodes: list[Node]
    outputs: list[OutputSpec]
    producer: dict[str, str] = field(default_factory=dict)
    auto_decomposed: list[str] = field(default_factory=list)
    # The dynamic dims' symbols (empty: every shape is static).
    symbols: list[Symbol] = field(default_factory=list)
    # Dims the user asked to be dynamic that torch.export made static: {"input", "axis", "size", "reason"}.
    specialized: list[dict[str, Any]] = field(default_factory=list)
    # The sweep points verification runs at: {"label", "binding" (torch symbol name -> size),
    # "error" (eager PyTorch's error there, if it raised)}; their inputs and eager outputs are
    # `sweep.<i>.input.<name>` / `sweep.<i>.output.<name>` in reference.safetensors.
    sweep: list[dict[str, Any]] = field(default_factory=list)
    # Leaves of the model's call that are not tensors (Python scalars, strings): torch.export
    # baked them into the graph. {"path", "value"}.
    constant_inputs: list[dict[str, Any]] = field(default_factory=list)
    # The example call's positional arguments, by forward's parameter names; the first part of
    # an input's `path` names one of them or a keyword argument.
    call_args: list[str] = field(default_factory=list)
    # The structure `forward` returns (`frontend.torch.outputs.output_tree`): leaves are
    # {"output": name} (an entry of `outputs`), {"constant": value} (a Python value torch.export
    # baked in) or {"size": expr} (an int computed from the input sizes). Empty: a flat list.
    output_tree: dict[str, Any] = field(default_factory=dict)
    # Graph nodes left out of `nodes` because they compute nothing RLX needs: runtime checks
    # torch.export proved or that the binding checks make ({"node", "target", "reason"}).
    dropped: list[dict[str, Any]] = field(default_factory=list)
    # Control-flow operators inlined before capture (`frontend.torch.control_flow`): {"node", "kind", "how"}.
    control_flow: list[dict[str, Any]] = field(default_factory=list)
    # Extra input sets verification runs besides the example (`verify_inputs`): {"label",
    # "description", "error" (eager PyTorch's error on it, or why it cannot run), "values"
    # (Python-value outputs eager PyTorch gave)}; their inputs and eager outputs are
    # `set.<k>.input.<name>` / `set.<k>.output.<name>` in reference.safetensors.
    input_sets: list[dict[str, Any]] = field(default_factory=list)
    # Weight-only quantization (`--quantize`; `quant.schemes.parse_record`): {} none, else {"scheme", "rlx",
    # "block", "weights" (keys stored quantized in the bundle), "kept_float" ({"weight", "reason"})}.
    quantize: dict[str, Any] = field(default_factory=dict)
    # Outputs whose eager values changed when torch's seed did (`frontend.torch.randomness`): they depend on random
    # draws, which RLX makes with its own generator, so they get the "random" verdict. Written only when set.
    random_outputs: list[str] = field(default_factory=list)
    # Set by `bind` on the program it returns (never written to the file): the symbolic
    # program's value shapes, its symbols, and the binding.
    symbolic_shapes: dict[str, list[Dim]] = field(default_factory=dict)
    bound_symbols: list[Symbol] = field(default_factory=list)
    binding: dict[str, int] = field(default_factory=dict)
    # The file this program was read from (set by `parse`; never written), for error messages.
    origin: str = ""

    @property
    def is_dynamic(self) -> bool:
        return bool(self.symbols)

    @property
    def frontend(self) -> str:
        """The front end that wrote this torch-ir (`producer["frontend"]`; "torch" when unnamed)."""
        return self.producer.get("frontend", "torch")

    @property
    def boundary_only(self) -> bool:
        """Whether torch-ir holds the graph's boundary only: its program is the front end's (`BOUNDARY_ONLY`)."""
        return self.decomposition == BOUNDARY_ONLY

    @property
    def made_by(self) -> str:
        """How the program was made, as bundles and reports name it: the decomposition level, or for a
        torch-ir holding its boundary only, the front end whose program hook made the program ("onnx")."""
        return self.frontend if self.boundary_only else self.decomposition

    def to_json(self) -> str:
        """Strict JSON text (no NaN/Infinity tokens)."""
        doc = {"format": FORMAT, "version": VERSION, **asdict(self)}
        for transient in ("symbolic_shapes", "bound_symbols", "binding", "origin"):
            del doc[transient]
        if not doc["quantize"]:  # a float conversion's file is as it was before the field existed
            del doc["quantize"]
        if not doc["random_outputs"]:
            del doc["random_outputs"]
        for spec in [*doc["inputs"], *(o for node in doc["nodes"] for o in node["outputs"])]:
            if not spec["path"]:
                del spec["path"]
        for sym in doc["symbols"]:  # an input-size symbol's record is as it was before size stages
            if not sym["stage"]:
                del sym["stage"], sym["defined_by"]
            if not sym["derived"]:
                del sym["derived"]
        for node in doc["nodes"]:
            if not node["layouts"]:
                del node["layouts"]
            if not node["sym"]:
                del node["sym"]
        return json.dumps(doc, indent=1, allow_nan=False) + "\n"

    def declared(self) -> list[tuple[str, TensorSpec | WeightSpec | OutputSpec]]:
        """Every declared tensor with its field path in the file (`nodes[3].outputs[0]`)."""
        found: list[tuple[str, TensorSpec | WeightSpec | OutputSpec]] = []
        found += [(f"inputs[{i}]", s) for i, s in enumerate(self.inputs)]
        found += [(f"weights[{i}]", w) for i, w in enumerate(self.weights)]
        for i, n in enumerate(self.nodes):
            found += [(f"nodes[{i}].outputs[{j}]", o) for j, o in enumerate(n.outputs)]
        found += [(f"outputs[{i}]", o) for i, o in enumerate(self.outputs)]
        return found

    def value_shapes(self) -> dict[str, list[Dim]]:
        """Every tensor value's shape (inputs, weights, node outputs) by name."""
        shapes: dict[str, list[Dim]] = {s.name: list(s.shape) for s in self.inputs}
        shapes.update({w.name: list(w.shape) for w in self.weights})
        for n in self.nodes:
            shapes.update({o.name: list(o.shape) for o in n.outputs})
        return shapes

    def save(self, directory: Path) -> Path:
        path = directory / TORCH_IR
        write_text(path, self.to_json())
        return path


def encode_float(value: float) -> dict[str, Any]:
    """Tag a float; non-finite values become strings so the file stays strict JSON."""
    if math.isnan(value):
        return {"float": "nan"}
    if math.isinf(value):
        return {"float": "inf" if value > 0 else "-inf"}
    return {"float": value}


def decode_float(tagged: Any) -> float:
    """Inverse of `encode_float` on the tag's payload."""
    if isinstance(tagged, str):
        return {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}[tagged]
    return float(tagged)
