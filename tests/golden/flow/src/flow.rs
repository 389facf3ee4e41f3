//! The model as an rlx-flow [`ModelFlow`]: the graph inputs, then one custom
//! stage that emits every node through [`crate::graph::emit`] (the same
//! emitter the `graph` style uses), wired to [`MapWeights`] / [`BuiltModel`].

use rlx_flow::escape::Emit;
use rlx_flow::prelude::CustomStage;
use rlx_flow::{BuiltModel, FlowStage, FlowValue, MapWeights, ModelFlow};
use rlx_ir::hir::HirMut;
use rlx_ir::{DType, Shape};

use crate::{INPUTS, NAME, OUTPUTS, PARAMS, graph};

/// The flow: inputs in [`INPUTS`] order, outputs in [`OUTPUTS`] order.
pub fn model_flow() -> ModelFlow {
    let mut flow = ModelFlow::new(NAME);
    for spec in INPUTS {
        flow = flow.input(spec.name, Shape::new(spec.dims, spec.carrier));
    }
    flow.stage(FlowStage::Custom(CustomStage::named(NAME, emit_stage)))
        .outputs(OUTPUTS.iter().map(|s| s.name))
}

/// Assemble the flow. `weights` holds the f32 parameters; any other dtype is
/// declared here and bound as raw bytes after compiling (MapWeights is f32-only).
pub fn build(weights: &mut MapWeights) -> anyhow::Result<BuiltModel> {
    model_flow().build(weights)
}

fn emit_stage(e: &mut Emit<'_>, _first: Option<FlowValue>) -> anyhow::Result<Option<FlowValue>> {
    let inputs = INPUTS
        .iter()
        .map(|s| e.flow_input(s.name).map(|v| v.hir_id()))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut params = Vec::with_capacity(PARAMS.len());
    for spec in PARAMS {
        params.push(if spec.dtype == DType::F32 {
            e.load_param(spec.name, false)?
        } else {
            e.hir().param(spec.name, Shape::new(spec.dims, spec.dtype))
        });
    }
    let outputs = graph::emit(&mut HirMut::new(e.hir()), &inputs, &params);
    let (first, rest) = outputs
        .split_first()
        .ok_or_else(|| anyhow::anyhow!("{NAME} has no outputs"))?;
    for (spec, &id) in OUTPUTS[1..].iter().zip(rest) {
        e.state.side_outputs.push((spec.name.to_string(), id));
    }
    let shape = e.hir().node(*first).shape.clone();
    Ok(Some(e.wrap(*first, shape)))
}
