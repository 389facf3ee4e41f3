//! Model `golden`, converted from PyTorch by rlx-torch-import 0.1.0
//! (torch 2.15.0+cu132, RLX 0.2.19, decomposition `high`, style `tensor`).
//!
//! ATen ops in the source graph:
//! - `aten.conv2d.default` x 1
//! - `aten.linear.default` x 1
//! - `aten.max_pool2d.default` x 1
//! - `aten.relu.default` x 1
//! - `aten.view.default` x 1
//!
//! Generated file: regenerate it rather than editing it, or own it from here on.
//!
//! The graph written with the `rlx_tensor::Tensor` DSL: one statement per RLX
//! node, each under a comment naming the ATen op, module path and source line.

use rlx_ir::op::ReduceOp;
use rlx_ir::{DType, Graph, Shape};
use rlx_tensor::GraphScope;

use crate::NAME;

/// The whole model as an RLX graph.
pub fn build() -> Graph {
    let mut s = GraphScope::new(NAME);
    let input = s.input("input", Shape::new(&[1, 1, 4, 4], DType::F32));
    let w_0_weight = s.param("0.weight", Shape::new(&[2, 1, 3, 3], DType::F32));
    let w_4_bias = s.param("4.bias", Shape::new(&[3], DType::F32));
    let w_0_bias_reshape_1x2x1x1 = s.param(
        "0.bias.reshape_1x2x1x1",
        Shape::new(&[1, 2, 1, 1], DType::F32),
    );
    let w_4_weight_t = s.param("4.weight.T", Shape::new(&[8, 3], DType::F32));

    // aten.conv2d.default `conv2d` in 0 at conv.py:565
    //   Conv(input: F32[1, 1, 4, 4], 0.weight: F32[2, 1, 3, 3]) -> F32[1, 2, 4, 4]
    let conv2d_1 = input.conv2d(&w_0_weight, [3, 3], [1, 1], [1, 1], [1, 1], 1);

    // aten.conv2d.default `conv2d` in 0 at conv.py:565
    //   Binary.Add(conv2d#1: F32[1, 2, 4, 4], 0.bias.reshape_1x2x1x1: F32[1, 2, 1, 1]) -> F32[1, 2, 4, 4]
    let conv2d_3 = &conv2d_1 + &w_0_bias_reshape_1x2x1x1;

    // aten.relu.default `relu` in 1 at activation.py:143
    //   Activation.Relu(conv2d#3: F32[1, 2, 4, 4]) -> F32[1, 2, 4, 4]
    let relu_4 = conv2d_3.relu();

    // aten.max_pool2d.default `max_pool2d` in 2 at pooling.py:224
    //   Pool(relu#4: F32[1, 2, 4, 4]) -> F32[1, 2, 2, 2]
    let max_pool2d_5 = relu_4.pool2d(ReduceOp::Max, [2, 2], [2, 2], [0, 0]);

    // aten.view.default `view` in 3 at flatten.py:55
    //   Reshape(max_pool2d#5: F32[1, 2, 2, 2]) -> F32[1, 8]
    let view_6 = max_pool2d_5.reshape(vec![1, 8]);

    // aten.linear.default `linear` in 4 at linear.py:134
    //   MatMul(view#6: F32[1, 8], 4.weight.T: F32[8, 3]) -> F32[1, 3]
    let linear_8 = view_6.matmul(&w_4_weight_t);

    // aten.linear.default `linear` in 4 at linear.py:134
    //   Binary.Add(linear#8: F32[1, 3], 4.bias: F32[3]) -> F32[1, 3]
    let linear_9 = &linear_8 + &w_4_bias;

    s.set_outputs([linear_9.id()]);
    s.finish()
}
