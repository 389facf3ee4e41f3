"""The report's `quantization` section of a weight-only quantized conversion (`quantize.py`): what was packed,
what stayed float and why, and the bundle's weight bytes as the bundle writer stores them (`weights.py`)."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

from .dtypes import RECORDS, from_rlx
from .program import QuantizedTable, QuantizedWeight
from .quantize import BLOCK, SCHEMES
from .weights import derived_spec


def _stored_bytes(program: Any, param: Any, stored: dict[str, str]) -> int:
    """Bytes of a parameter as the bundle stores it (`stored`: state_dict key -> torch-ir dtype): a weight in
    its own dtype (a float16 weight computes as float32 but is stored as float16), a derived one as the bundle
    writer makes it (`weights.derived_spec`: moves keep the source's dtype, a table's scales are float16)."""
    if param.name in program.derived_params:
        dtype, dims = derived_spec(program, param.name, {k: SimpleNamespace(dtype=v) for k, v in stored.items()})
        return math.prod(dims) * RECORDS[dtype].itemsize
    return math.prod(param.dims) * RECORDS[stored.get(param.name, from_rlx(param.dtype))].itemsize


def summary(program: Any, record: dict[str, Any], weight_keys: dict[str, str]) -> dict[str, Any]:
    """The report's `quantization` section for a lowered `program` (`program.Program`) of a conversion whose
    torch-ir holds `record`: the scheme, each weight stored packed ({"weight", "dims", "float_bytes",
    "packed_bytes"}), each left float with why (of the listed names, those torch-ir's weights use:
    `weight_keys`, state_dict key -> torch-ir dtype), and the bundle's parameter bytes: as stored, and had
    every weight stayed float32 (`float_bytes`), with their ratio."""
    scheme = SCHEMES[record["scheme"]]
    params = {p.name: p for p in program.params}
    stored_bytes: dict[tuple[str, str], int] = {}  # (weight, use) -> bytes of its packed form(s)
    dims: dict[str, tuple[int, int]] = {}
    for name, d in program.derived_params.items():
        if isinstance(d, (QuantizedWeight, QuantizedTable)) and name in params:
            use = "matmul" if isinstance(d, QuantizedWeight) else "gather"
            size = _stored_bytes(program, params[name], weight_keys)
            stored_bytes[(d.source, use)] = stored_bytes.get((d.source, use), 0) + size
            dims[d.source] = d.dims
    rows: list[dict[str, Any]] = [
        {
            "weight": src,
            "use": use,
            "dims": list(dims[src]),
            "float_bytes": 4 * dims[src][0] * dims[src][1],
            "packed_bytes": size,
        }
        for (src, use), size in sorted(stored_bytes.items())
    ]
    done = {r["weight"] for r in rows}
    kept = list(record.get("kept_float", [])) + [
        {"weight": w, "reason": "not read as a Linear's x @ W^T in the lowered graph (stays float, dequantized values)"}
        for w in record["weights"]
        if w not in done and w in weight_keys and w in params  # a name the graph reads (not an unused alias)
    ]
    stored = sum(_stored_bytes(program, p, weight_keys) for p in program.params)
    as_float = stored + sum(r["float_bytes"] - r["packed_bytes"] for r in rows)
    return {
        "scheme": scheme.name,
        "rlx_scheme": scheme.rlx,
        "block": BLOCK,
        "quantized": rows,
        "kept_float": kept,
        "bundle_weight_bytes": stored,
        "float_weight_bytes": as_float,
        "ratio": stored / as_float if as_float else 1.0,
        "accuracy_cost": [],
    }
