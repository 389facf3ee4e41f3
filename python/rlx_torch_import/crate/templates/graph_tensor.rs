@@HEADER@@
//!
//! The graph written with the `rlx_tensor::Tensor` DSL: one statement per RLX
//! node, each under a comment naming the ATen op, module path and source line.

@@OP_USES@@
use rlx_ir::{DType, Graph, Shape};
use rlx_tensor::{@@DSL@@};

use crate::NAME;

/// The whole model as an RLX graph.
pub fn build() -> Graph {
    let mut s = GraphScope::new(NAME);
@@BODY@@

    s.set_outputs([@@OUTPUTS@@]);
    s.finish()
}
