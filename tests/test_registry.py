"""The registry: one lowering per exact ATen overload, all of them real, documented and tabled."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlx_torch_import.lower import REGISTRY
from rlx_torch_import.lower.registry import lowers
from tools import opsdoc


def test_every_key_is_a_real_op_overload() -> None:
    pytest.importorskip("transformers.integrations.moe")  # registers the transformers:: custom ops
    import math
    import operator

    import torch.ao.quantization.fx._decomposed  # registers the quantized_decomposed:: ops (PT2E graphs)

    python_level = {"operator": operator, "math": math, "torch": torch}  # lower/ops/scalars.py: Python ops on SymInts
    for target in REGISTRY:
        if target.count(".") == 1:
            module, name = target.split(".")
            assert callable(getattr(python_level[module], name)), target
            continue
        ns, packet, overload = target.split(".", 2)
        assert ns in ("aten", "prims", "transformers", "quantized_decomposed"), target
        op = getattr(getattr(getattr(torch.ops, ns), packet), overload)
        assert str(op) == target


def test_registering_twice_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="registered twice"):
        lowers("aten.relu.default")(lambda b, call: call)


def test_every_lowering_has_a_docstring() -> None:
    for target, low in REGISTRY.items():
        assert (low.fn.__doc__ or "").strip(), f"{target}: {low.fn.__name__} has no docstring"


def test_supported_op_table_is_generated_and_current() -> None:
    table = opsdoc.table()
    for target in REGISTRY:
        assert f"`{target}`" in table
    root = Path(__file__).resolve().parents[1]
    assert opsdoc.main(["--check", "--root", str(root)]) == 0, (
        "README.md / docs/supported-ops.md are stale: run `make docs`"
    )


@pytest.mark.parametrize("which", ["ops", "defects"])
def test_generated_tables_keep_every_row_in_its_columns(which: str) -> None:
    """A `|` in a cell's text (`|x|`, `|sums|`) would split the cell: every row of the generated tables
    has as many cell separators as its header."""
    import re

    text = opsdoc.table() if which == "ops" else opsdoc.defect_table()
    header = None
    for line in text.splitlines():
        if not line.startswith("|"):
            header = None
            continue
        bars = len(re.findall(r"(?<!\\)\|", line))
        if header is None:
            header = bars
        assert bars == header, line
