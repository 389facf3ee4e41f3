//! Model `golden`, converted from PyTorch by rlx-torch-import 0.1.0
//! (torch 2.15.0+cu132, RLX 0.2.19, decomposition `high`, style `graph`).
//!
//! ATen ops in the source graph:
//! - `aten.linear.default` x 2
//! - `aten.relu.default` x 1
//!
//! Generated file: regenerate it rather than editing it, or own it from here on.
//!
//! The graph on RLX's HIR builder: one `add_node` per RLX node, each under a
//! comment naming the ATen op, module path and source line it came from.

use rlx_ir::hir::{HirGraphExt, HirModule, HirMut, HirNodeId};
use rlx_ir::op::{Activation, BinaryOp, Op};
use rlx_ir::{DType, Shape};

use crate::{INPUTS, NAME, PARAMS};

/// The whole model as a HIR module: inputs, parameters, nodes and outputs.
pub fn build() -> HirModule {
    let mut hir = HirModule::new(NAME);
    let mut g = HirMut::new(&mut hir);
    let inputs: Vec<HirNodeId> = INPUTS
        .iter()
        .map(|s| g.input(s.name, Shape::new(s.dims, s.carrier)))
        .collect();
    let params: Vec<HirNodeId> = PARAMS
        .iter()
        .map(|s| g.param(s.name, Shape::new(s.dims, s.dtype)))
        .collect();
    let outputs = emit(&mut g, &inputs, &params);
    g.set_outputs(outputs);
    hir
}

/// Emit every node onto `g`. `inputs` and `params` are the declared graph
/// inputs and parameters in `INPUTS` / `PARAMS` order; returns the outputs
/// in `OUTPUTS` order.
pub fn emit(g: &mut HirMut<'_>, inputs: &[HirNodeId], params: &[HirNodeId]) -> Vec<HirNodeId> {
    let input = inputs[0]; // input: F32[2, 4]
    let w_0_bias = params[0]; // 0.bias: F32[3]
    let w_2_bias = params[1]; // 2.bias: F32[2]
    let w_0_weight_t = params[2]; // 0.weight.T: F32[4, 3]
    let w_2_weight_t = params[3]; // 2.weight.T: F32[3, 2]

    // aten.linear.default `linear` in 0 at linear.py:134
    //   MatMul(input: F32[2, 4], 0.weight.T: F32[4, 3]) -> F32[2, 3]
    let linear_2 = g.add_node(
        Op::MatMul,
        vec![input, w_0_weight_t],
        Shape::new(&[2, 3], DType::F32),
    );

    // aten.linear.default `linear` in 0 at linear.py:134
    //   Binary.Add(linear#2: F32[2, 3], 0.bias: F32[3]) -> F32[2, 3]
    let linear_3 = g.add_node(
        Op::Binary(BinaryOp::Add),
        vec![linear_2, w_0_bias],
        Shape::new(&[2, 3], DType::F32),
    );

    // aten.relu.default `relu` in 1 at activation.py:143
    //   Activation.Relu(linear#3: F32[2, 3]) -> F32[2, 3]
    let relu_4 = g.add_node(
        Op::Activation(Activation::Relu),
        vec![linear_3],
        Shape::new(&[2, 3], DType::F32),
    );

    // aten.linear.default `linear_1` in 2 at linear.py:134
    //   MatMul(relu#4: F32[2, 3], 2.weight.T: F32[3, 2]) -> F32[2, 2]
    let linear_1_6 = g.add_node(
        Op::MatMul,
        vec![relu_4, w_2_weight_t],
        Shape::new(&[2, 2], DType::F32),
    );

    // aten.linear.default `linear_1` in 2 at linear.py:134
    //   Binary.Add(linear_1#6: F32[2, 2], 2.bias: F32[2]) -> F32[2, 2]
    let linear_1_7 = g.add_node(
        Op::Binary(BinaryOp::Add),
        vec![linear_1_6, w_2_bias],
        Shape::new(&[2, 2], DType::F32),
    );

    vec![linear_1_7]
}
