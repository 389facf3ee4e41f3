"""The report's `quantization` section of a weight-only quantized conversion (`quant/schemes.py`): what was
packed, what stayed float and why, and the bundle's weight bytes as the bundle writer stores them
(`weights.py`); `add_to` puts it, and its note, in a conversion's report. The accuracy cost against the
float model (`feature_errors`) is measured by the front end, which has the float model."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import numpy as np

from ..dtypes import RECORDS, from_rlx
from ..program import QuantizedTable, QuantizedWeight
from ..weights import derived_spec
from .schemes import BLOCK, SCHEMES

if TYPE_CHECKING:
    from ..program import Program
    from ..torchir import TorchIR
    from ..verify.report import ParityReport


def add_to(report: ParityReport, program: Program, ir: TorchIR) -> None:
    """A weight-only quantized conversion's (torch-ir's `quantize` record set) `quantization` section into
    `report` (`summary`), with a note when no weight was packed; nothing for a float conversion."""
    if not ir.quantize:
        return
    report.quantization = summary(program, ir.quantize, {w.key: w.dtype for w in ir.weights})
    if not report.quantization["quantized"]:
        report.notes.append(
            f"quantize={ir.quantize['scheme']}: no weight was packed (only float32 nn.Linear weights and "
            "nn.Embedding tables whose inner dim is a multiple of 32 are; a PT2E graph is quantized already)"
        )


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
        "feature_limit": FEATURE_LIMIT,
    }


# An output feature is flagged when its largest error against the float model exceeds this share of its own
# largest float magnitude (a feature quantization destroyed, zeroed or sign-flipped, is near 1 or past it;
# int8/int4 noise on the test models stays far below).
FEATURE_LIMIT = 0.5


def _rows(values: np.ndarray) -> np.ndarray:
    """An output as float64 [rows, features]: the last axis is the features (a scalar is one)."""
    width = values.shape[-1] if values.ndim else 1
    return values.astype(np.float64).reshape(values.size // width if width else 0, width)


def feature_magnitude(float_out: np.ndarray) -> np.ndarray:
    """Each output feature's (last-axis element's) largest finite |value| over the rows, float64 [features]."""
    f = _rows(float_out)
    return np.where(np.isfinite(f), np.abs(f), 0.0).max(0) if f.size else np.zeros(f.shape[1])


def feature_errors(float_out: np.ndarray, quant_out: np.ndarray, magnitude: np.ndarray | None = None) -> dict[str, Any]:
    """Each output feature's error against the float model, for its own magnitude: a feature is one element
    of the last axis (a scalar output is one feature), its rows every other index. For feature j, with f the
    float model's values and q the quantized one's over the rows: error_j = max |q - f| (inf where one is
    finite and the other not, or both non-finite and different), magnitude_j = `magnitude[j]` (the caller's
    `feature_magnitude` over several inputs) or max |f| (finite f), relative_j = error_j / magnitude_j (0 for
    0 / 0, inf for an error on a feature that is 0 throughout). Returns {"features": count,
    "flagged_features": how many have relative_j > FEATURE_LIMIT, "worst_feature": {"index", "max_abs_error",
    "magnitude", "relative_error"} of the largest relative_j (absent with no element)}. ValueError when the
    shapes (or `magnitude`'s length) do not match."""
    if float_out.shape != quant_out.shape:
        raise ValueError(f"float output {float_out.shape} and quantized output {quant_out.shape} differ in shape")
    f, q = _rows(float_out), _rows(quant_out)
    if magnitude is None:
        magnitude = feature_magnitude(float_out)
    if magnitude.shape != (f.shape[1],):
        raise ValueError(f"{f.shape[1]} features but {magnitude.shape} magnitudes")
    if f.size == 0:
        return {"features": f.shape[1], "flagged_features": 0}
    finite = np.isfinite(f) & np.isfinite(q)
    with np.errstate(invalid="ignore"):
        apart = ~finite & ~((f == q) | (np.isnan(f) & np.isnan(q)))  # inf vs finite, NaN vs a number, inf vs -inf
        error = np.where(finite, np.abs(q - f), 0.0).max(0)
    error = np.where(apart.any(0), np.inf, error)
    with np.errstate(divide="ignore", invalid="ignore"):
        relative = np.where(error == 0, 0.0, error / magnitude)
    worst = int(np.argmax(relative))
    return {
        "features": f.shape[1],
        "flagged_features": int((relative > FEATURE_LIMIT).sum()),
        "worst_feature": {
            "index": worst,
            "max_abs_error": float(error[worst]),
            "magnitude": float(magnitude[worst]),
            "relative_error": float(relative[worst]),
        },
    }
