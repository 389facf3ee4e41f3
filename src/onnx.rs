//! An ONNX file → the lowered program (the same JSON `program.rs` reads) plus its weights, through
//! RLX's own importer, `rlx-onnx-import` (the `onnx` feature). The importer decides every ONNX → RLX
//! mapping; this file only runs it with the sizes the caller bound and re-spells its `HirModule` in
//! our program vocabulary, so the bundle, crate and verification see one kind of program whatever
//! the front end.

use std::collections::HashMap;
use std::path::Path;

use rlx_ir::hir::HirOp;
use rlx_ir::{DType, Shape};
use rlx_onnx_import::{ImportOptions, build_hir_from_parts, prepare_onnx_file};
use serde_json::{Value, json};

/// One weight the program reads: its name (the ONNX initializer's, or the importer's for a
/// tensor it made), RLX dtype and little-endian bytes.
pub struct Weight {
    pub name: String,
    pub dtype: DType,
    pub data: Vec<u8>,
}

/// What one import produced: the program JSON, its weights, and the importer's own counts
/// (`lowered`, `stubbed` nodes by name, `unsupported` op types with counts).
pub struct Imported {
    pub program_json: String,
    pub weights: Vec<Weight>,
    pub report_json: String,
}

/// The importer names the placeholder of a node it could not lower `__stub__/<output>`; its report
/// lists the node (`stubbed_nodes`), which the Python side refuses, so the placeholder's values are
/// never computed with: zeros of its size keep the report reachable.
const STUB_PREFIX: &str = "__stub__/";

fn stub_bytes(shape: &Shape) -> Vec<u8> {
    let numel: usize = shape
        .dims()
        .iter()
        .map(|d| match d {
            rlx_ir::Dim::Static(n) => *n,
            _ => 1,
        })
        .product();
    vec![0u8; numel * shape.dtype().size_bytes()]
}

fn shape_json(shape: &Shape) -> Result<Value, String> {
    serde_json::to_value(shape).map_err(|e| format!("cannot serialize a shape: {e}"))
}

fn value_name(id: usize) -> String {
    format!("v{id}")
}

/// Import `path` with every named symbolic dim in `dims` bound to its size (the importer's
/// `named_lengths`); `strict` refuses a stubbed or unsupported node (the importer's own check).
pub fn import(
    path: &Path,
    dims: &HashMap<String, usize>,
    strict: bool,
) -> Result<Imported, String> {
    let opts = ImportOptions {
        named_lengths: dims.clone(),
        strict,
        // Keep the graph in float arithmetic as the file says; integer kernels are issue 28's.
        use_quantized_kernels: false,
        ..ImportOptions::default()
    };
    let (manifest, nodes, params, i64_params, init_shapes) =
        prepare_onnx_file(path).map_err(|e| format!("{e:#}"))?;
    let (hir, params, typed, report) = build_hir_from_parts(
        &manifest,
        nodes,
        params,
        rlx_onnx_import::TypedParams::new(),
        i64_params,
        &init_shapes,
        opts,
    )
    .map_err(|e| format!("{e:#}"))?;

    let mut inputs = Vec::new();
    let mut declared = Vec::new();
    let mut program_nodes = Vec::new();
    let mut weights = Vec::new();
    let mut names: HashMap<usize, String> = HashMap::new();
    for node in hir.nodes() {
        let id = node.id.0 as usize;
        match &node.op {
            HirOp::Input { name } => {
                names.insert(id, name.clone());
                inputs.push(json!({"name": name, "shape": shape_json(&node.shape)?}));
            }
            HirOp::Param { name } => {
                names.insert(id, name.clone());
                declared.push(json!({"name": name, "shape": shape_json(&node.shape)?}));
                let data = if let Some((bytes, _)) = typed.get(name) {
                    bytes.clone()
                } else if let Some(values) = params.get(name) {
                    match node.shape.dtype() {
                        DType::F32 => values.iter().flat_map(|v| v.to_le_bytes()).collect(),
                        _ if name.starts_with(STUB_PREFIX) => stub_bytes(&node.shape),
                        other => {
                            return Err(format!(
                                "parameter {name:?}: the importer holds float32 values for a {} tensor",
                                crate::dtype_name(other)
                            ));
                        }
                    }
                } else if name.starts_with(STUB_PREFIX) {
                    stub_bytes(&node.shape)
                } else {
                    return Err(format!(
                        "parameter {name:?}: the importer gave no values for it"
                    ));
                };
                weights.push(Weight {
                    name: name.clone(),
                    dtype: node.shape.dtype(),
                    data,
                });
            }
            HirOp::Mir(op) => {
                let inputs: Vec<String> = node
                    .inputs
                    .iter()
                    .map(|i| {
                        names
                            .get(&(i.0 as usize))
                            .cloned()
                            .unwrap_or_else(|| value_name(i.0 as usize))
                    })
                    .collect();
                names.insert(id, value_name(id));
                program_nodes.push(json!({
                    "id": value_name(id),
                    "op": serde_json::to_value(op).map_err(|e| format!("cannot serialize an op: {e}"))?,
                    "inputs": inputs,
                    "shape": shape_json(&node.shape)?,
                    "label": node.name,
                }));
            }
            other => {
                return Err(format!(
                    "the importer made a {} block node; only plain RLX ops are carried",
                    format!("{other:?}")
                        .split([' ', '{', '('])
                        .next()
                        .unwrap_or("?")
                ));
            }
        }
    }
    let outputs: Vec<String> = hir
        .outputs
        .iter()
        .map(|i| {
            names
                .get(&(i.0 as usize))
                .cloned()
                .unwrap_or_else(|| value_name(i.0 as usize))
        })
        .collect();
    let program = json!({
        "name": hir.name,
        "inputs": inputs,
        "params": declared,
        "nodes": program_nodes,
        "outputs": outputs,
    });
    let mut unsupported: Vec<(&String, &usize)> = report.unsupported.iter().collect();
    unsupported.sort();
    let report_json = json!({
        "lowered": report.lowered,
        "skipped": report.skipped,
        "stubbed": report.stubbed,
        "stubbed_nodes": report.stubbed_nodes,
        "unsupported": unsupported.into_iter().map(|(k, v)| json!([k, v])).collect::<Vec<_>>(),
    });
    Ok(Imported {
        program_json: serde_json::to_string(&program).map_err(|e| e.to_string())?,
        weights,
        report_json: report_json.to_string(),
    })
}

/// The ONNX op types the importer lowers or rewrites (its own registry).
pub fn known_op_types() -> Vec<&'static str> {
    let mut ops = rlx_onnx_import::coverage::lowered_ops_list();
    ops.extend(rlx_onnx_import::coverage::rewritten_ops_list());
    ops.sort_unstable();
    ops.dedup();
    ops
}
