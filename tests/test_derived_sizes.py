"""Derived sizes (docs/design.md, decision bb): the non-line parts of shapes over staged sizes become
symbols of their own; lines, input dims and mixed expressions are left as they are."""

from __future__ import annotations

import pytest

from rlx_torch_import.errors import InputError
from rlx_torch_import.frontend.torch.derived import derive_sizes
from rlx_torch_import.sizes import Symbol
from rlx_torch_import.torchir import Node, OutputSpec, TensorSpec, TorchIR

S0 = Symbol(0, "s0", "x.0", 2, 64, 8)
U0 = Symbol(1, "u0", "item.size", 0, 31, 12, 1, "item")
U1 = Symbol(2, "u1", "index.size", 0, None, 3, 2, "index")


def _ir(*dims: int | str, symbols: tuple[Symbol, ...] = (S0, U0)) -> TorchIR:
    outputs = [TensorSpec("t", list(dims), "float32")]
    node = Node("t", "aten.slice.Tensor", [{"tensor": "x"}, {"int": 0}, {"int": 0}, {"sym": str(dims[0])}], {}, outputs)
    return TorchIR(
        name="m",
        decomposition="high",
        inputs=[TensorSpec("x", ["s0"], "float32")],
        weights=[],
        nodes=[node],
        outputs=[OutputSpec("t", "t", list(dims), "float32")],
        symbols=list(symbols),
    )


def test_a_floor_division_becomes_a_symbol_and_the_shape_a_line_of_it() -> None:
    ir = derive_sizes(_ir("((u0//8)) + 1", "8*((u0//8)) + 8"))
    (d,) = [s for s in ir.symbols if s.derived]
    assert (d.name, d.derived, d.stage, d.defined_by, d.min, d.max, d.example) == ("d0", "u0 // 8", 1, "item", 0, 3, 1)
    assert ir.nodes[0].outputs[0].shape == ["d0 + 1", "8 * d0 + 8"]
    assert ir.nodes[0].args[3] == {"sym": "d0 + 1"} and ir.outputs[0].shape == ["d0 + 1", "8 * d0 + 8"]


def test_a_negative_inner_part_is_negated_so_the_symbol_is_a_size() -> None:
    ir = derive_sizes(_ir("-((-u0 - 1)//8)"))
    (d,) = [s for s in ir.symbols if s.derived]
    assert d.derived == "-((-u0 - 1) // 8)" and (d.min, d.max, d.example) == (1, 4, 2)
    assert ir.nodes[0].outputs[0].shape == ["d0"]


@pytest.mark.parametrize("dims", [("u0 + 1", "2*u0"), ("s0//2",), ("Max(s0, u0)",), (5,)])
def test_lines_input_dims_and_mixed_expressions_are_left_as_they_are(dims: tuple[int | str, ...]) -> None:
    ir = _ir(*dims)
    assert derive_sizes(ir) is ir


def test_functions_of_several_staged_sizes_are_one_symbol_with_an_open_range() -> None:
    u2 = Symbol(3, "u2", "index_1.size", 0, None, 5, 2, "index_1")
    ir = derive_sizes(_ir("Max(u1, u2)", symbols=(S0, U0, U1, u2)))
    (d,) = [s for s in ir.symbols if s.derived]
    assert (d.derived, d.stage, d.min, d.max, d.example) == ("Max(u1, u2)", 2, 0, None, 5)


def test_sizes_from_different_stages_in_one_function_are_refused_naming_both() -> None:
    with pytest.raises(InputError, match=r"u0: stage 1, u1: stage 2"):
        derive_sizes(_ir("Max(u0, u1)", symbols=(S0, U0, U1)))


def test_an_expression_taking_both_signs_is_refused() -> None:
    with pytest.raises(InputError, match=r"takes both signs"):
        derive_sizes(_ir("(u0 - 16)//4"))
