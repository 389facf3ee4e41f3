//! Model `golden`, converted from PyTorch by rlx-torch-import 0.1.0
//! (torch 2.15.0+cu132, RLX 0.2.19, decomposition `high`, style `flow`).
//!
//! ATen ops in the source graph:
//! - `aten.hardtanh.default` x 1
//! - `aten.linear.default` x 2
//!
//! Generated file: regenerate it rather than editing it, or own it from here on.
//!
//! The graph on RLX's HIR builder: one `add_node` per RLX node, each under a
//! comment naming the ATen op, module path and source line it came from.

use rlx_ir::hir::{HirGraphExt, HirModule, HirMut, HirNodeId};
use rlx_ir::op::{BinaryOp, CmpOp, Op};
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
    let input = inputs[0]; // input: F32[3, 4]
    let w_0_bias = params[0]; // 0.bias: F32[6]
    let w_2_bias = params[1]; // 2.bias: F32[2]
    let w_0_weight_t = params[2]; // 0.weight.T: F32[4, 6]
    let w_2_weight_t = params[3]; // 2.weight.T: F32[6, 2]

    // aten.linear.default `linear` in 0 at linear.py:134
    //   MatMul(input: F32[3, 4], 0.weight.T: F32[4, 6]) -> F32[3, 6]
    let linear_2 = g.add_node(
        Op::MatMul,
        vec![input, w_0_weight_t],
        Shape::new(&[3, 6], DType::F32),
    );

    // aten.linear.default `linear` in 0 at linear.py:134
    //   Binary.Add(linear#2: F32[3, 6], 0.bias: F32[6]) -> F32[3, 6]
    let linear_3 = g.add_node(
        Op::Binary(BinaryOp::Add),
        vec![linear_2, w_0_bias],
        Shape::new(&[3, 6], DType::F32),
    );

    // aten.hardtanh.default `hardtanh` in 1 at activation.py:294
    //   Constant() -> F32[]
    let hardtanh_4 = g.add_node(
        Op::Constant {
            data: vec![0, 0, 128, 191],
        },
        vec![],
        Shape::new(&[], DType::F32),
    );

    // aten.hardtanh.default `hardtanh` in 1 at activation.py:294
    //   Binary.Max(linear#3: F32[3, 6], hardtanh#4: F32[]) -> F32[3, 6]
    let hardtanh_5 = g.add_node(
        Op::Binary(BinaryOp::Max),
        vec![linear_3, hardtanh_4],
        Shape::new(&[3, 6], DType::F32),
    );

    // aten.hardtanh.default `hardtanh` in 1 at activation.py:294
    //   Compare.Ne(linear#3: F32[3, 6], linear#3: F32[3, 6]) -> Bool[3, 6]
    let hardtanh_6 = g.add_node(
        Op::Compare(CmpOp::Ne),
        vec![linear_3, linear_3],
        Shape::new(&[3, 6], DType::Bool),
    );

    // aten.hardtanh.default `hardtanh` in 1 at activation.py:294
    //   Where(hardtanh#6: Bool[3, 6], linear#3: F32[3, 6], hardtanh#5: F32[3, 6]) -> F32[3, 6]
    let hardtanh_7 = g.add_node(
        Op::Where,
        vec![hardtanh_6, linear_3, hardtanh_5],
        Shape::new(&[3, 6], DType::F32),
    );

    // aten.hardtanh.default `hardtanh` in 1 at activation.py:294
    //   Constant() -> F32[]
    let hardtanh_8 = g.add_node(
        Op::Constant {
            data: vec![0, 0, 128, 63],
        },
        vec![],
        Shape::new(&[], DType::F32),
    );

    // aten.hardtanh.default `hardtanh` in 1 at activation.py:294
    //   Binary.Min(hardtanh#7: F32[3, 6], hardtanh#8: F32[]) -> F32[3, 6]
    let hardtanh_9 = g.add_node(
        Op::Binary(BinaryOp::Min),
        vec![hardtanh_7, hardtanh_8],
        Shape::new(&[3, 6], DType::F32),
    );

    // aten.hardtanh.default `hardtanh` in 1 at activation.py:294
    //   Compare.Ne(hardtanh#7: F32[3, 6], hardtanh#7: F32[3, 6]) -> Bool[3, 6]
    let hardtanh_10 = g.add_node(
        Op::Compare(CmpOp::Ne),
        vec![hardtanh_7, hardtanh_7],
        Shape::new(&[3, 6], DType::Bool),
    );

    // aten.hardtanh.default `hardtanh` in 1 at activation.py:294
    //   Where(hardtanh#10: Bool[3, 6], hardtanh#7: F32[3, 6], hardtanh#9: F32[3, 6]) -> F32[3, 6]
    let hardtanh_11 = g.add_node(
        Op::Where,
        vec![hardtanh_10, hardtanh_7, hardtanh_9],
        Shape::new(&[3, 6], DType::F32),
    );

    // aten.linear.default `linear_1` in 2 at linear.py:134
    //   MatMul(hardtanh#11: F32[3, 6], 2.weight.T: F32[6, 2]) -> F32[3, 2]
    let linear_1_13 = g.add_node(
        Op::MatMul,
        vec![hardtanh_11, w_2_weight_t],
        Shape::new(&[3, 2], DType::F32),
    );

    // aten.linear.default `linear_1` in 2 at linear.py:134
    //   Binary.Add(linear_1#13: F32[3, 2], 2.bias: F32[2]) -> F32[3, 2]
    let linear_1_14 = g.add_node(
        Op::Binary(BinaryOp::Add),
        vec![linear_1_13, w_2_bias],
        Shape::new(&[3, 2], DType::F32),
    );

    vec![linear_1_14]
}
