"""Inline snapshots of the Rust printed for a handful of ops, in the `graph` and `tensor` crate styles.

Each test lowers one small module and prints the statements the crate's `graph.rs` gets for it (the
provenance comment line naming the Python source is left out: it moves with this file's lines). A change to
a printer shows up as a diff here; `make golden` (EXPECTTEST_ACCEPT=1) rewrites the snapshots in place.
"""

from __future__ import annotations

from pathlib import Path
from tempfile import TemporaryDirectory

import pytest
import torch
from torch import nn

import rlx_torch_import as rti
from _samples import of_inputs
from rlx_torch_import import torchir
from rlx_torch_import.crate.graph import graph_statements
from rlx_torch_import.crate.rust_names import RustNames
from rlx_torch_import.crate.tensor import tensor_statements
from rlx_torch_import.lower import lower

expecttest = pytest.importorskip("expecttest")


def printed(module: nn.Module, *inputs: torch.Tensor) -> tuple[str, str]:
    """The `graph`-style and `tensor`-style statements for `module(*inputs)`, without source locations."""
    torch.manual_seed(0)
    with TemporaryDirectory() as tmp:
        rti.from_torch(module.eval(), inputs, Path(tmp) / "o", verify=False)
        program = lower(torchir.load(Path(tmp) / "o"))
    texts = []
    for statements in (graph_statements, tensor_statements):
        lines = statements(program, RustNames()).lines
        texts.append("\n".join(line for line in lines if not (line.startswith("// ") and not line.startswith("//   "))))
    return texts[0], texts[1]


def _seeded(make: type[nn.Module], *args: int, **kw: int) -> nn.Module:
    torch.manual_seed(0)
    return make(*args, **kw)


class TestPrintedRust(expecttest.TestCase):
    def test_linear(self) -> None:
        graph, tensor = printed(_seeded(nn.Linear, 4, 3), torch.randn(2, 4))
        self.assertExpectedInline(
            graph,
            """\
let input = inputs[0]; // input: F32[2, 4]
let w_bias = params[0]; // bias: F32[3]
let w_weight_t = params[1]; // weight.T: F32[4, 3]

//   MatMul(input: F32[2, 4], weight.T: F32[4, 3]) -> F32[2, 3]
let linear_2 = g.add_node(Op::MatMul, vec![input, w_weight_t], Shape::new(&[2, 3], DType::F32));

//   Binary.Add(linear#2: F32[2, 3], bias: F32[3]) -> F32[2, 3]
let linear_3 = g.add_node(Op::Binary(BinaryOp::Add), vec![linear_2, w_bias], Shape::new(&[2, 3], DType::F32));""",
        )
        self.assertExpectedInline(
            tensor,
            """\
let input = s.input("input", Shape::new(&[2, 4], DType::F32));
let w_bias = s.param("bias", Shape::new(&[3], DType::F32));
let w_weight_t = s.param("weight.T", Shape::new(&[4, 3], DType::F32));

//   MatMul(input: F32[2, 4], weight.T: F32[4, 3]) -> F32[2, 3]
let linear_2 = input.matmul(&w_weight_t);

//   Binary.Add(linear#2: F32[2, 3], bias: F32[3]) -> F32[2, 3]
let linear_3 = &linear_2 + &w_bias;""",
        )

    def test_conv2d(self) -> None:
        graph, tensor = printed(_seeded(nn.Conv2d, 2, 3, 3, padding=1), torch.randn(1, 2, 5, 5))
        self.assertExpectedInline(
            graph,
            """\
let input = inputs[0]; // input: F32[1, 2, 5, 5]
let w_weight = params[0]; // weight: F32[3, 2, 3, 3]
let w_bias_reshape_1x3x1x1 = params[1]; // bias.reshape_1x3x1x1: F32[1, 3, 1, 1]

//   Conv(input: F32[1, 2, 5, 5], weight: F32[3, 2, 3, 3]) -> F32[1, 3, 5, 5]
let conv2d_1 = g.add_node(Op::Conv { kernel_size: vec![3, 3], stride: vec![1, 1], padding: vec![1, 1], dilation: vec![1, 1], groups: 1 }, vec![input, w_weight], Shape::new(&[1, 3, 5, 5], DType::F32));

//   Binary.Add(conv2d#1: F32[1, 3, 5, 5], bias.reshape_1x3x1x1: F32[1, 3, 1, 1]) -> F32[1, 3, 5, 5]
let conv2d_3 = g.add_node(Op::Binary(BinaryOp::Add), vec![conv2d_1, w_bias_reshape_1x3x1x1], Shape::new(&[1, 3, 5, 5], DType::F32));""",
        )
        self.assertExpectedInline(
            tensor,
            """\
let input = s.input("input", Shape::new(&[1, 2, 5, 5], DType::F32));
let w_weight = s.param("weight", Shape::new(&[3, 2, 3, 3], DType::F32));
let w_bias_reshape_1x3x1x1 = s.param("bias.reshape_1x3x1x1", Shape::new(&[1, 3, 1, 1], DType::F32));

//   Conv(input: F32[1, 2, 5, 5], weight: F32[3, 2, 3, 3]) -> F32[1, 3, 5, 5]
let conv2d_1 = input.conv2d(&w_weight, [3, 3], [1, 1], [1, 1], [1, 1], 1);

//   Binary.Add(conv2d#1: F32[1, 3, 5, 5], bias.reshape_1x3x1x1: F32[1, 3, 1, 1]) -> F32[1, 3, 5, 5]
let conv2d_3 = &conv2d_1 + &w_bias_reshape_1x3x1x1;""",
        )

    def test_softmax(self) -> None:
        graph, tensor = printed(of_inputs(lambda a: torch.softmax(a, dim=-1)), torch.randn(2, 5))
        self.assertExpectedInline(
            graph,
            """\
let xs_0 = inputs[0]; // xs_0: F32[2, 5]

//   Softmax(xs_0: F32[2, 5]) -> F32[2, 5]
let softmax_1 = g.add_node(Op::Softmax { axis: 1 }, vec![xs_0], Shape::new(&[2, 5], DType::F32));""",
        )
        self.assertExpectedInline(
            tensor,
            """\
let xs_0 = s.input("xs_0", Shape::new(&[2, 5], DType::F32));

//   Softmax(xs_0: F32[2, 5]) -> F32[2, 5]
let softmax_1 = xs_0.softmax(1);""",
        )

    def test_index_select(self) -> None:
        graph, tensor = printed(of_inputs(lambda a, i: a.index_select(1, i)), torch.randn(3, 5), torch.tensor([4, 0]))
        self.assertExpectedInline(
            graph,
            """\
let xs_0 = inputs[0]; // xs_0: F32[3, 5]
let xs_1 = inputs[1]; // xs_1: I64[2]

//   Gather(xs_0: F32[3, 5], xs_1: I64[2]) -> F32[3, 2]
let index_select_1 = g.add_node(Op::Gather { axis: 1 }, vec![xs_0, xs_1], Shape::new(&[3, 2], DType::F32));""",
        )
        self.assertExpectedInline(
            tensor,
            """\
let xs_0 = s.input("xs_0", Shape::new(&[3, 5], DType::F32));
let xs_1 = s.input("xs_1", Shape::new(&[2], DType::I64));

//   Gather(xs_0: F32[3, 5], xs_1: I64[2]) -> F32[3, 2]
let index_select_1 = xs_0.gather(&xs_1, 1);""",
        )

    def test_cast(self) -> None:
        graph, tensor = printed(of_inputs(lambda a: a.int()), torch.randn(2, 3))
        self.assertExpectedInline(
            graph,
            """\
let xs_0 = inputs[0]; // xs_0: F32[2, 3]

//   Cast(xs_0: F32[2, 3]) -> I64[2, 3]
let to_copy_1 = g.add_node(Op::Cast { to: DType::I64 }, vec![xs_0], Shape::new(&[2, 3], DType::I64));

//   Cast(_to_copy#1: I64[2, 3]) -> I32[2, 3]
let to_copy_2 = g.add_node(Op::Cast { to: DType::I32 }, vec![to_copy_1], Shape::new(&[2, 3], DType::I32));""",
        )
        self.assertExpectedInline(
            tensor,
            """\
let xs_0 = s.input("xs_0", Shape::new(&[2, 3], DType::F32));

//   Cast(xs_0: F32[2, 3]) -> I64[2, 3]
let to_copy_1 = xs_0.cast(DType::I64);

//   Cast(_to_copy#1: I64[2, 3]) -> I32[2, 3]
let to_copy_2 = to_copy_1.cast(DType::I32);""",
        )
