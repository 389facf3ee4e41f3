@@HEADER@@
//!
//! The graph on RLX's HIR builder: one `add_node` per RLX node, each under a
//! comment naming the ATen op, module path and source line it came from.

use rlx_ir::hir::{HirGraphExt, HirModule, HirMut, HirNodeId};
@@USES@@

use crate::{INPUTS, NAME, PARAMS};
@@CONSTANTS@@

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
pub fn emit(g: &mut HirMut<'_>, @@INPUTS_ARG@@: &[HirNodeId], @@PARAMS_ARG@@: &[HirNodeId]) -> Vec<HirNodeId> {
@@BODY@@

    vec![@@OUTPUTS@@]
}
