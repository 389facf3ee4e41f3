"""torch-ir: our own versioned, documented record of an exported graph (docs/torch-ir.md).

* `schema`: the dataclasses (`TorchIR`, `TensorSpec`, `WeightSpec`, `Node`, `OutputSpec`), the
  format's names and the tagged float encoding; `save` writes a program.
* `parse`: `load` a conversion folder's torch-ir.json, `parse` a decoded document, every field
  validated (errors name the file, the field path and the value).
* `bind`: `specialize`, a symbolic program at one binding of its symbols; `size_valued`, the nodes of
  such a bound program whose values depend on a symbol.
* `check`: `check_ops` (each node against torch's schema and meta kernels), `check_weights`
  (weights.safetensors against the declared weights) and `check_reference` (reference.safetensors
  against the declared inputs and outputs at every point verification reads).
"""

from __future__ import annotations

from ..errors import TorchIRError
from ..sizes import Symbol
from .bind import size_valued, specialize
from .check import check_ops, check_reference, check_weights
from .parse import check_output_tree, load, parse
from .schema import (
    ARG_TAGS,
    BOUNDARY_ONLY,
    DECOMPOSITIONS,
    FORMAT,
    LAYOUT_SENSITIVE,
    READABLE_VERSIONS,
    VERSION,
    WEIGHT_KINDS,
    Node,
    OutputSpec,
    TensorSpec,
    TorchIR,
    WeightSpec,
    arg_reads,
    decode_float,
    encode_float,
)

__all__ = [
    "ARG_TAGS",
    "BOUNDARY_ONLY",
    "DECOMPOSITIONS",
    "FORMAT",
    "LAYOUT_SENSITIVE",
    "READABLE_VERSIONS",
    "VERSION",
    "WEIGHT_KINDS",
    "Node",
    "OutputSpec",
    "Symbol",
    "TensorSpec",
    "TorchIR",
    "TorchIRError",
    "WeightSpec",
    "arg_reads",
    "check_ops",
    "check_output_tree",
    "check_reference",
    "check_weights",
    "decode_float",
    "encode_float",
    "load",
    "parse",
    "size_valued",
    "specialize",
]
