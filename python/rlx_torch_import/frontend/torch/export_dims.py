"""The exported program's size symbols (torch's ranges, the user's labels, the example sizes),
and the axes asked to be dynamic that torch.export made static, with torch's reason."""

from __future__ import annotations

import re
from typing import Any

import torch

from ...errors import InputError
from ...sizes import Symbol, free_symbols, line_of
from ...torchir import TensorSpec
from .unbacked import stage_symbols


def program_symbols(
    ep: torch.export.ExportedProgram,
    inputs: list[TensorSpec],
    example_inputs: tuple[torch.Tensor, ...],
    requested: dict[tuple[str, int], str],
) -> list[Symbol]:
    """The backed symbols the inputs' shapes use, with torch's ranges, the user's labels and the
    example sizes (solved from the input dims that are a*s + b of one symbol); then the sizes that
    depend on tensor values, computed by a size stage (`unbacked.stage_symbols`)."""
    ranges = {str(k): v for k, v in ep.range_constraints.items()}
    labels: dict[str, str] = {}
    examples: dict[str, int] = {}
    for spec, tensor in zip(inputs, example_inputs, strict=True):
        for axis, (d, n) in enumerate(zip(spec.shape, tensor.shape, strict=True)):
            if isinstance(d, int) or len(free_symbols(d)) != 1:
                continue
            (sym,) = free_symbols(d)
            fallback = f"{spec.name}.{axis}" if d == sym else ""
            if not labels.get(sym):
                labels[sym] = requested.get((spec.name, axis), fallback)
            if sym not in examples:
                _, a, b = line_of(d)
                examples[sym] = (int(n) - b) // a
    used = list(dict.fromkeys(s for spec in inputs for d in spec.shape for s in sorted(free_symbols(d))))
    found = []
    for i, name in enumerate(used):
        if name not in examples:
            raise InputError(f"symbol {name} of the exported inputs has no example size (no input axis is it alone)")
        vr = ranges.get(name)
        lo = _finite(vr.lower) if vr is not None else None
        hi = _finite(vr.upper) if vr is not None else None
        found.append(Symbol(i, name, labels.get(name) or name, lo or 0, hi, examples[name]))
    return found + stage_symbols(ep, example_inputs, len(found))


def _finite(bound: Any) -> int | None:
    """A range bound as an int; None for torch's `int_oo` (unbounded)."""
    try:
        value = int(bound)
    except (TypeError, ValueError, AttributeError, OverflowError):
        return None
    return value if abs(value) < 2**62 else None


def _torch_reason(name: str, axis: int, size: int, shape_log: list[str]) -> str:
    """torch's own reason a dim became a constant, from its symbolic-shape log: the guard that fixed
    the dim's symbol and the op whose shape rule added it."""
    created = re.compile(rf"create_symbol (\w+) = {size} for L\['{re.escape(name)}'\]\.size\(\)\[{axis}\]")
    symbol = next((m[1] for line in shape_log if (m := created.search(line))), None)
    if symbol is None:
        return "torch.export traced it as a constant (an example size of 0 or 1 is always specialized)"
    guard = re.compile(rf"eval (Eq\({symbol}, \d+\)) \[guard added\] \(([^)]*)\)")
    for line in shape_log:
        m = guard.search(line)
        if m:
            return f"torch added the guard {m[1]} at {m[2]}, so the traced program only works at this size"
    return f"torch.export fixed its symbol {symbol} to {size}"


def specialized_axes(
    inputs: list[TensorSpec], requested: dict[tuple[str, int], str], shape_log: list[str]
) -> list[dict[str, Any]]:
    """Axes the user asked to be dynamic that torch.export traced as constants, with a warning each
    giving torch's reason."""
    import warnings

    dims = {s.name: s.shape for s in inputs}
    found = []
    for (name, axis), label in requested.items():
        shape = dims.get(name)
        if shape is None or axis >= len(shape) or not isinstance(size := shape[axis], int):
            continue
        reason = _torch_reason(name, axis, size, shape_log)
        found.append({"input": name, "axis": axis, "label": label, "size": size, "reason": reason})
        warnings.warn(
            f"input {name!r} axis {axis} ({label}) was asked to be dynamic, but is static at size "
            f"{shape[axis]}: {reason}",
            stacklevel=7,  # the caller of from_torch: <- capture <- recapture <- FrontEnd._run <- run <- from_torch
        )
    return found
