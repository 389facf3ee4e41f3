//! The lowered program (written by the Python registry) → `HirModule`.
//!
//! A program is a flat list of values: graph inputs, parameters, then nodes in
//! topological order. Each node carries an RLX `Op` in rlx-ir's own serde form,
//! so this file never decides a mapping: it only checks wiring and builds.

use std::collections::HashMap;

use rlx_ir::hir::{HirModule, HirNodeId};
use rlx_ir::{Op, Shape};
use serde::Deserialize;

use crate::error::CoreError;

/// A graph input or parameter declaration.
#[derive(Debug, Deserialize)]
pub struct ValueDecl {
    pub name: String,
    pub shape: Shape,
}

/// One RLX node: `op` is kept as raw JSON so a bad op names its node.
#[derive(Debug, Deserialize)]
pub struct NodeDecl {
    pub id: String,
    pub op: serde_json::Value,
    pub inputs: Vec<String>,
    pub shape: Shape,
    #[serde(default)]
    pub label: Option<String>,
}

/// The whole lowered program as the Python side serializes it.
#[derive(Debug, Deserialize)]
pub struct Program {
    pub name: String,
    pub inputs: Vec<ValueDecl>,
    pub params: Vec<ValueDecl>,
    pub nodes: Vec<NodeDecl>,
    pub outputs: Vec<String>,
}

/// Parse a program from its JSON text.
pub fn parse_program(text: &str) -> Result<Program, CoreError> {
    serde_json::from_str(text)
        .map_err(|e| CoreError::Check(format!("lowered program is not valid JSON: {e}")))
}

fn node_context(node: &NodeDecl) -> String {
    match &node.label {
        Some(label) => format!("node {:?} ({label})", node.id),
        None => format!("node {:?}", node.id),
    }
}

fn define<'a>(
    ids: &mut HashMap<&'a str, HirNodeId>,
    name: &'a str,
    id: HirNodeId,
) -> Result<(), CoreError> {
    if ids.insert(name, id).is_some() {
        Err(CoreError::Check(format!("value {name:?} is defined twice")))
    } else {
        Ok(())
    }
}

/// Build the `HirModule`; every error names the node (and its provenance label).
pub fn build_hir(program: &Program) -> Result<HirModule, CoreError> {
    let mut hir = HirModule::new(program.name.clone());
    let mut ids: HashMap<&str, HirNodeId> = HashMap::new();
    for input in &program.inputs {
        let id = hir.input(input.name.clone(), input.shape.clone());
        define(&mut ids, &input.name, id)?;
    }
    for param in &program.params {
        let id = hir.param(param.name.clone(), param.shape.clone());
        define(&mut ids, &param.name, id)?;
    }
    for node in &program.nodes {
        let op: Op = serde_json::from_value(node.op.clone()).map_err(|e| {
            CoreError::Check(format!(
                "{}: op {} is not a valid rlx_ir::Op for RLX {}: {e}",
                node_context(node),
                node.op,
                crate::RLX_VERSION
            ))
        })?;
        let mut inputs = Vec::with_capacity(node.inputs.len());
        for name in &node.inputs {
            let id = ids.get(name.as_str()).copied().ok_or_else(|| {
                CoreError::Check(format!(
                    "{}: input {name:?} is not defined before it is used",
                    node_context(node)
                ))
            })?;
            inputs.push(id);
        }
        let id = hir.mir(op, inputs, node.shape.clone());
        if let Some(label) = &node.label {
            hir.node_mut(id).name = Some(label.clone());
        }
        define(&mut ids, &node.id, id)?;
    }
    let mut outputs = Vec::with_capacity(program.outputs.len());
    for name in &program.outputs {
        let id = ids.get(name.as_str()).copied().ok_or_else(|| {
            CoreError::Check(format!("graph output {name:?} is not a defined value"))
        })?;
        outputs.push(id);
    }
    hir.set_outputs(outputs);
    Ok(hir)
}

/// Program JSON → rlx-ir's own HIR JSON (what a bundle stores).
pub fn program_to_hir_json(text: &str) -> Result<String, CoreError> {
    let hir = build_hir(&parse_program(text)?)?;
    rlx_ir::serialize::hir_to_json(&hir)
        .map_err(|e| CoreError::Check(format!("cannot serialize HIR: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::test_support::MATMUL_RELU;

    #[test]
    fn builds_and_round_trips_through_rlx_json() {
        let json = program_to_hir_json(MATMUL_RELU).unwrap();
        let hir = rlx_ir::serialize::hir_from_json(&json).unwrap();
        assert_eq!(hir.len(), 4);
        assert_eq!(hir.outputs.len(), 1);
        assert_eq!(hir.nodes()[2].name.as_deref(), Some("aten.mm"));
    }

    #[test]
    fn unknown_input_names_the_node() {
        let bad = MATMUL_RELU.replace(r#"["mm"]"#, r#"["nope"]"#);
        let err = program_to_hir_json(&bad).unwrap_err();
        assert_eq!(
            err,
            CoreError::Check("node \"r\": input \"nope\" is not defined before it is used".into())
        );
    }

    #[test]
    fn bad_op_names_the_node_and_label() {
        let bad = MATMUL_RELU.replace(r#""op": "MatMul""#, r#""op": "MatMulz""#);
        let err = program_to_hir_json(&bad).unwrap_err();
        assert!(
            err.is_check()
                && err
                    .message()
                    .starts_with("node \"mm\" (aten.mm): op \"MatMulz\""),
            "{err}"
        );
    }

    #[test]
    fn duplicate_value_is_rejected() {
        let bad = MATMUL_RELU.replace(r#""id": "r""#, r#""id": "mm""#);
        assert_eq!(
            program_to_hir_json(&bad).unwrap_err(),
            CoreError::Check("value \"mm\" is defined twice".into())
        );
    }
}
