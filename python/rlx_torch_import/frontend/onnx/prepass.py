"""The ONNX-level pre-pass: the model RLX's importer reads, rewritten into forms it handles. Each
pass keeps what the file computes; which passes run and why is docs/design.md, decision (ah).

- `static_inputs`: every graph input at the sizes this conversion runs (the importer specializes
  symbolic dims by name heuristics; binding them here makes its shapes the ones ONNX Runtime sees);
- graph inputs that fix shapes baked in as constants (`operands.bake_operands`);
- graph inputs that a shape-fixing operand or an `If`'s condition is computed from baked in too,
  before and after constant folding at those sizes (`fold`, onnxscript's optimizer), folding again
  until none is left (`operands.bake_read_values`: RLX's importer would pick one branch whatever
  their value, and the optimizer would fold a computed shape into the one the file declares);
- rewrites of op types the importer lacks into ones it has (`rewrite.rewrite`), and broadcasting
  operands brought to one rank (`rewrite.align_ranks`: the importer aligns a lower-rank operand by size);
- ONNX's own shape inference (with data propagation), so every intermediate has a static shape;
- `expose`: chosen intermediates made graph outputs (per-node parity)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

# Protobuf's own limit on one serialized message; larger models keep their weights in a data file.
PROTO_LIMIT = 2**31 - 1
# Rounds of baking the inputs an If condition or a shape operand is computed from, then folding.
BAKE_ROUNDS = 4


def static_inputs(model: Any, shapes: dict[str, tuple[int, ...]]) -> None:
    """Set each named graph input's declared shape to `shapes[name]` (in place)."""
    for vi in model.graph.input:
        if vi.name not in shapes:
            continue
        dims = vi.type.tensor_type.shape.dim
        del dims[:]
        for size in shapes[vi.name]:
            dims.add().dim_value = int(size)


def expose(model: Any, names: Iterable[str]) -> list[str]:
    """Make each named value a graph output (after the model's own), in place; returns the names
    added (values already outputs, or without a known element type, are skipped)."""
    import onnx

    have = {o.name for o in model.graph.output}
    types = {vi.name: vi for vi in model.graph.value_info}
    added = []
    for name in names:
        if name in have or name not in types:
            continue
        vi = onnx.ValueInfoProto()
        vi.CopyFrom(types[name])
        model.graph.output.append(vi)
        added.append(name)
        have.add(name)
    return added


def infer(model: Any) -> Any:
    """ONNX shape inference with data propagation; a model it refuses is returned as it was (the
    importer's own shape propagation then decides, and parity judges the result)."""
    import onnx

    if model.ByteSize() >= PROTO_LIMIT:
        return model  # inferred by `save` from the file instead
    try:
        return onnx.shape_inference.infer_shapes(model, check_type=False, strict_mode=False, data_prop=True)
    except Exception:
        return model


def save(model: Any, path: Path) -> Path:
    """Write `model` to `path` (weights into `<path name>.data` beside it when the model is past
    protobuf's 2 GB limit, shape inference then run on the file); returns `path`."""
    import onnx

    path.parent.mkdir(parents=True, exist_ok=True)
    if model.ByteSize() < PROTO_LIMIT:
        onnx.save(model, str(path))
        return path
    onnx.save(
        model, str(path), save_as_external_data=True, all_tensors_to_one_file=True, location=f"{path.name}.data",
        size_threshold=0,
    )  # fmt: skip
    try:
        onnx.shape_inference.infer_shapes_path(
            str(path), str(path), check_type=False, strict_mode=False, data_prop=True
        )
    except Exception:
        pass  # as `infer`: the importer's shape propagation decides
    return path


def fold(model: Any) -> Any:
    """Constant folding at the static sizes (onnxscript's optimizer: shape computations such as
    Shape -> Gather -> Concat become constants, unused nodes go, model-local functions are inlined),
    so the importer sees the values it reads at import as constants. A model the optimizer refuses
    is returned as it was (the importer then decides, and parity judges the result)."""
    import logging

    import onnxscript.optimizer

    if model.ByteSize() >= PROTO_LIMIT:
        return model
    loggers = [logging.getLogger(n) for n in ("onnxscript", "onnx_ir")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)  # their per-initializer info lines are not the user's concern
    try:
        return onnxscript.optimizer.optimize(model)
    except Exception:
        return model
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


def prepare(
    model: Any, shapes: dict[str, tuple[int, ...]], given: dict[str, Any] | None = None
) -> tuple[Any, dict[str, str]]:
    """A copy of `model` with static inputs at `shapes`, shape-fixing operand inputs and the inputs an
    If condition or such an operand is computed from baked in from `given` (`operands.bake_operands`,
    `operands.bake_read_values`), the rewrite rules applied (`rewrite.rewrite`), constants folded and
    shapes inferred; and the baked inputs (name -> what reads it). Raises InputError naming each such
    input the user did not give."""
    import onnx

    from .operands import bake_operands, bake_read_values
    from .rewrite import align_ranks, constant_outputs, rewrite

    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    static_inputs(copy, shapes)
    baked = bake_operands(copy, given or {}, set(given or {}))
    # before folding too: the optimizer folds a computed shape operand into the shape the file declares
    baked.update(bake_read_values(copy, given or {}, set(given or {})))
    copy = fold(infer(copy))
    for _ in range(BAKE_ROUNDS):  # a folded If can bring another (nested) one to the main graph
        more = bake_read_values(copy, given or {}, set(given or {}))
        if not more:
            break
        baked.update(more)
        copy = fold(infer(copy))
    rewrite(copy)
    constant_outputs(copy)
    copy = infer(copy)
    align_ranks(copy)
    return infer(copy), baked
