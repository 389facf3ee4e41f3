"""The RLX workaround layer: one probe per known defect, and the guarantees of the layer.

A probe runs the raw RLX op; when it finds the op right, its test fails and names the
workaround in the workaround layer (`lower/rlx/`) that can go (the check an RLX upgrade needs).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rlx_torch_import import _core
from rlx_torch_import.errors import LoweringError
from rlx_torch_import.lower.builder import Builder
from rlx_torch_import.lower.call import Value
from rlx_torch_import.lower.rlx import audit, boundary, defects
from rlx_torch_import.program import Program, ValueDecl
from rlx_torch_import.torchir import Node, TensorSpec, WeightSpec

RLX = Path(defects.__file__).parent
LOWER = RLX.parent
# The workaround layer: the modules of lower/rlx/ that route, rewrite and check RLX nodes (the
# others are the defect catalogue, its probes and exact arithmetic).
LAYER = (
    "workarounds.py",
    "routing.py",
    "rules_elementwise.py",
    "rules_movement.py",
    "rules_compute.py",
    "boundary.py",
    "audit.py",
)


@pytest.mark.parametrize("defect", defects.DEFECTS, ids=[d.key for d in defects.DEFECTS])
def test_probe_still_finds_the_defect(defect: defects.Defect) -> None:
    found = defect.probe()
    assert found is not None, (
        f"RLX {_core.rlx_version()} now computes the {defect.key!r} case right; drop or narrow the workaround "
        f"({defect.workaround}) in lower/rlx/ (the workaround layer), then this row of lower/rlx/defects.py"
    )


def test_defect_keys_are_unique_and_named_in_the_layer() -> None:
    keys = [d.key for d in defects.DEFECTS]
    assert len(keys) == len(set(keys))
    layer = "".join((RLX / name).read_text() for name in LAYER)
    missing = [d.key for d in defects.DEFECTS if not d.accepted and d.key not in layer]
    assert not missing, f"the workaround layer (lower/rlx/) names no route for {missing}"


def test_only_the_layer_emits_raw_nodes() -> None:
    """Op families call Builder.emit; only the workaround layer appends raw nodes."""
    allowed = {RLX / name for name in LAYER} | {LOWER / "builder.py"}
    offenders = [
        str(p.relative_to(LOWER))
        for p in LOWER.rglob("*.py")
        if p not in allowed and re.search(r"\.raw\(", p.read_text())
    ]
    assert not offenders, f"raw RLX nodes emitted outside the workaround layer (lower/rlx/): {offenders}"


def _builder(*inputs: tuple[str, str, tuple[int, ...]]) -> tuple[Builder, list[Value]]:
    program = Program("t")
    values = []
    for name, dtype, dims in inputs:
        program.inputs.append(ValueDecl(name, dims, {"float64": "F64", "int32": "I32", "float32": "F32"}[dtype]))
        values.append(Value(name, dims, dtype))
    return Builder(program), values


def test_audit_rejects_a_raw_op_on_a_defect_path() -> None:
    b, (x, y) = _builder(("x", "float64", (4,)), ("y", "float64", (4,)))
    b.raw({"Compare": "Lt"}, [x, y], (4,), "bool")
    with pytest.raises(LoweringError, match="compare-f64"):
        audit.audit(b.program)


@pytest.mark.parametrize(
    ("op", "dtype", "dims"),
    [
        ({"Compare": "Lt"}, "float64", (4,)),
        ({"Reduce": {"op": "Mean", "axes": [0], "keep_dim": False}}, "float64", ()),
        ({"Reverse": {"axes": [0]}}, "int32", (4,)),
        ({"Binary": "Max"}, "float32", (4,)),
    ],
)
def test_emit_routes_around_the_defect(op, dtype: str, dims: tuple[int, ...]) -> None:
    """The same op through Builder.emit leaves no raw node the audit would reject."""
    b, inputs = _builder(("x", dtype, (4,)), ("y", dtype, (4,)))
    n_in = 2 if ("Compare" in op or "Binary" in op) else 1
    out_dtype = "bool" if "Compare" in op else dtype
    b.emit(op, inputs[:n_in], dims, out_dtype)
    audit.audit(b.program, b.nan_free_ids, b.compensated)
    assert len(b.program.nodes) > 1


@pytest.mark.parametrize("shape", [(1, 1), (2, 3), (16, 8)])
def test_a_transpose_that_is_an_output_and_a_matmul_operand_verifies(shape: tuple[int, int], tmp_path: Path) -> None:
    """transpose-output, found by the program fuzzer: (x @ x.T, x.T) gave garbage for x.T before
    `boundary.protect_outputs` gave the output a second reader."""
    import torch

    import rlx_torch_import as rti

    class Gram(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            t = x.permute(1, 0)
            return x @ t, t

    report = rti.from_torch(Gram(), (torch.randn(*shape),), tmp_path / "o", per_node=False)
    assert report.ok, report.summary()
    assert all(o.max_abs_error == 0 for o in report.outputs[1:]), report.summary()  # the transpose is exact


def test_int16_weights_are_refused_and_wider_ones_bound() -> None:
    """weight-int16: the capability pass refuses an int16 parameter or buffer (RLX panics binding it),
    naming the dtype to store it as; other integer weights pass (`tests/test_layouts.py` end to end)."""
    weights = [WeightSpec(f"w_{d}", f"w.{d}", "buffer", [3], d) for d in ("int16", "int32", "int64", "int8")]
    (refused,) = boundary.unbindable_weights(weights)
    assert (refused.target, refused.node) == ("<weight>", "w_int16")
    assert "buffer 'w.int16' is int16" in refused.reason and "int32 or int64" in refused.reason


@pytest.mark.parametrize("dtype", ["float64", "int64", "float32", "bool"])
def test_a_call_whose_outputs_are_all_empty_runs_as_constants(dtype: str) -> None:
    """zero-size-output: a call with only zero-element results becomes empty constants, which RLX
    runs (the raw F64/I64 kernel panics, the probe shows); a call with a non-empty result is lowered."""
    b, _ = _builder()
    empty = Node("add", "aten.add.Tensor", [], {}, [TensorSpec("add", [0, 3], dtype)])
    (value,) = boundary.empty_outputs(b, empty)
    assert (value.dims, value.dtype) == ((0, 3), dtype)
    b.program.outputs.append(b.cast(value, "float32").id)
    model = _core.CompiledModel(_core.program_to_hir_json(b.program.to_core_json()))
    ((data, _, dims),) = model.run([])
    assert list(dims) == [0, 3] and len(bytes(data)) == 0
    full = Node("add", "aten.add.Tensor", [], {}, [TensorSpec("add", [2, 0], dtype), TensorSpec("n", [1], dtype)])
    assert boundary.empty_outputs(b, full) is None
