//! An ONNX file → the lowered program (the same JSON `program.rs` reads) plus its weights, through
//! RLX's own importer, `rlx-onnx-import` (the `onnx` feature). The importer decides every ONNX → RLX
//! mapping; this file only runs it with the sizes the caller bound and re-spells its `HirModule` in
//! our program vocabulary, so the bundle, crate and verification see one kind of program whatever
//! the front end.

use std::collections::HashMap;
use std::path::Path;

use rlx_ir::hir::{HirModule, HirNode, HirNodeId, HirOp};
use rlx_ir::{DType, Op, Shape};
use rlx_onnx_import::{
    ImportOptions, ImportReport, TypedParams, build_hir_from_parts, prepare_onnx_file,
};
use serde_json::{Value, json};

use crate::error::CoreError;

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

fn shape_json(shape: &Shape) -> Result<Value, CoreError> {
    serde_json::to_value(shape)
        .map_err(|e| CoreError::Check(format!("cannot serialize a shape: {e}")))
}

fn value_name(id: usize) -> String {
    format!("v{id}")
}

/// Import `path` with every named symbolic dim in `dims` bound to its size (the importer's
/// `named_lengths`); `strict` refuses a stubbed or unsupported node (the importer's own check).
/// Every failure, the importer's included, is a [`CoreError::Check`].
pub fn import(
    path: &Path,
    dims: &HashMap<String, usize>,
    strict: bool,
) -> Result<Imported, CoreError> {
    let (hir, params, typed, report) = run_importer(path, dims, strict)?;
    let (program, weights) = respell(&hir, &params, &typed)?;
    Ok(Imported {
        program_json: program.to_string(),
        weights,
        report_json: report_json(&report).to_string(),
    })
}

/// What RLX's importer makes of an ONNX file: the HIR, the float32 and typed weights, its report.
type Parts = (
    HirModule,
    HashMap<String, Vec<f32>>,
    TypedParams,
    ImportReport,
);

/// RLX's importer on `path`, its error (with its causes) as the message.
fn run_importer(
    path: &Path,
    dims: &HashMap<String, usize>,
    strict: bool,
) -> Result<Parts, CoreError> {
    let opts = ImportOptions {
        named_lengths: dims.clone(),
        strict,
        // Keep the graph in float arithmetic as the file says; integer kernels are issue 28's.
        use_quantized_kernels: false,
        ..ImportOptions::default()
    };
    let (manifest, nodes, params, i64_params, init_shapes) =
        prepare_onnx_file(path).map_err(|e| CoreError::Check(format!("{e:#}")))?;
    build_hir_from_parts(
        &manifest,
        nodes,
        params,
        TypedParams::new(),
        i64_params,
        &init_shapes,
        opts,
    )
    .map_err(|e| CoreError::Check(format!("{e:#}")))
}

/// `hir` in our program vocabulary (the JSON `program.rs` reads: inputs, params, nodes, outputs)
/// and the weights of its parameters. An input or parameter keeps its name; node `i` is `v<i>`.
fn respell(
    hir: &HirModule,
    params: &HashMap<String, Vec<f32>>,
    typed: &TypedParams,
) -> Result<(Value, Vec<Weight>), CoreError> {
    let mut inputs = Vec::new();
    let mut declared = Vec::new();
    let mut nodes = Vec::new();
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
                weights.push(Weight {
                    name: name.clone(),
                    dtype: node.shape.dtype(),
                    data: param_bytes(name, &node.shape, params, typed)?,
                });
            }
            HirOp::Mir(op) => {
                nodes.push(node_json(node, op, &names)?);
                names.insert(id, value_name(id));
            }
            other => return Err(block_node(other)),
        }
    }
    let outputs: Vec<String> = hir.outputs.iter().map(|i| name_of(&names, *i)).collect();
    let program = json!({
        "name": hir.name,
        "inputs": inputs,
        "params": declared,
        "nodes": nodes,
        "outputs": outputs,
    });
    Ok((program, weights))
}

/// The name the program gives HIR value `id`.
fn name_of(names: &HashMap<usize, String>, id: HirNodeId) -> String {
    let id = id.0 as usize;
    names.get(&id).cloned().unwrap_or_else(|| value_name(id))
}

/// One plain RLX op node as a program node: `v<id>`, its op in rlx-ir's serde form, the values it
/// reads, its shape and the importer's label.
fn node_json(node: &HirNode, op: &Op, names: &HashMap<usize, String>) -> Result<Value, CoreError> {
    let inputs: Vec<String> = node.inputs.iter().map(|i| name_of(names, *i)).collect();
    let op = serde_json::to_value(op)
        .map_err(|e| CoreError::Check(format!("cannot serialize an op: {e}")))?;
    Ok(json!({
        "id": value_name(node.id.0 as usize),
        "op": op,
        "inputs": inputs,
        "shape": shape_json(&node.shape)?,
        "label": node.name,
    }))
}

/// The bytes parameter `name` (of `shape`) holds: the importer's typed bytes, else its float32
/// values (for an F32 parameter), else zeros for a stub placeholder.
fn param_bytes(
    name: &str,
    shape: &Shape,
    params: &HashMap<String, Vec<f32>>,
    typed: &TypedParams,
) -> Result<Vec<u8>, CoreError> {
    let stub = name.starts_with(STUB_PREFIX);
    if let Some((bytes, _)) = typed.get(name) {
        return Ok(bytes.clone());
    }
    let Some(values) = params.get(name) else {
        return if stub {
            Ok(stub_bytes(shape))
        } else {
            Err(CoreError::Check(format!(
                "parameter {name:?}: the importer gave no values for it"
            )))
        };
    };
    match shape.dtype() {
        DType::F32 => Ok(values.iter().flat_map(|v| v.to_le_bytes()).collect()),
        _ if stub => Ok(stub_bytes(shape)),
        other => Err(CoreError::Check(format!(
            "parameter {name:?}: the importer holds float32 values for a {} tensor",
            crate::dtype_name(other)
        ))),
    }
}

/// The refusal of a HIR block node (`Linear`, `Attention`, ...): only plain RLX ops are carried.
fn block_node(op: &HirOp) -> CoreError {
    CoreError::Check(format!(
        "the importer made a {} block node; only plain RLX ops are carried",
        format!("{op:?}")
            .split([' ', '{', '('])
            .next()
            .unwrap_or("?")
    ))
}

/// The importer's report: node counts, the stubbed nodes, the unsupported op types (sorted, with
/// counts).
fn report_json(report: &ImportReport) -> Value {
    let mut unsupported: Vec<(&String, &usize)> = report.unsupported.iter().collect();
    unsupported.sort();
    json!({
        "lowered": report.lowered,
        "skipped": report.skipped,
        "stubbed": report.stubbed,
        "stubbed_nodes": report.stubbed_nodes,
        "unsupported": unsupported.into_iter().map(|(k, v)| json!([k, v])).collect::<Vec<_>>(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::Runner;

    /// Protobuf's wire format, as much as a tiny ONNX model needs.
    mod pb {
        fn varint(mut v: u64, out: &mut Vec<u8>) {
            while v >= 0x80 {
                out.push((v as u8) | 0x80);
                v >>= 7;
            }
            out.push(v as u8);
        }

        /// Field `field` holding the integer `v`.
        pub fn int(field: u64, v: u64) -> Vec<u8> {
            let mut out = Vec::new();
            varint(field << 3, &mut out);
            varint(v, &mut out);
            out
        }

        /// Field `field` holding `bytes` (a string, bytes or a nested message).
        pub fn bytes(field: u64, bytes: &[u8]) -> Vec<u8> {
            let mut out = Vec::new();
            varint((field << 3) | 2, &mut out);
            varint(bytes.len() as u64, &mut out);
            out.extend_from_slice(bytes);
            out
        }

        pub fn text(field: u64, s: &str) -> Vec<u8> {
            bytes(field, s.as_bytes())
        }

        pub fn msg(field: u64, parts: &[Vec<u8>]) -> Vec<u8> {
            bytes(field, &parts.concat())
        }
    }

    const FLOAT: u64 = 1; // TensorProto.DataType.FLOAT

    /// An ONNX `ValueInfoProto` (field `field` of the graph): a float tensor with `dims`, each a
    /// size or a named symbolic dim.
    fn value_info(field: u64, name: &str, dims: &[&str]) -> Vec<u8> {
        let dims: Vec<Vec<u8>> = dims
            .iter()
            .map(|d| match d.parse::<u64>() {
                Ok(n) => pb::msg(1, &[pb::int(1, n)]),
                Err(_) => pb::msg(1, &[pb::text(2, d)]),
            })
            .collect();
        let tensor = pb::msg(1, &[pb::int(1, FLOAT), pb::msg(2, &dims)]);
        pb::msg(field, &[pb::text(1, name), pb::msg(2, &[tensor])])
    }

    fn node(op_type: &str, inputs: &[&str], output: &str) -> Vec<u8> {
        let mut parts: Vec<Vec<u8>> = inputs.iter().map(|i| pb::text(1, i)).collect();
        parts.push(pb::text(2, output));
        parts.push(pb::text(3, &format!("{op_type}_0")));
        parts.push(pb::text(4, op_type));
        pb::msg(1, &parts)
    }

    /// `y = relu(x @ w)` (`w`, 3x2, an initializer; `x` is `[batch, 3]`), its middle op `op_type`.
    fn model_bytes(op_type: &str, w: &[f32]) -> Vec<u8> {
        let raw: Vec<u8> = w.iter().flat_map(|v| v.to_le_bytes()).collect();
        let init = pb::msg(
            5,
            &[
                pb::int(1, 3),
                pb::int(1, 2),
                pb::int(2, FLOAT),
                pb::text(8, "w"),
                pb::bytes(9, &raw),
            ],
        );
        let graph = [
            node("MatMul", &["x", "w"], "h"),
            node(op_type, &["h"], "y"),
            pb::text(2, "g"),
            init,
            value_info(11, "x", &["batch", "3"]),
            value_info(12, "y", &["batch", "2"]),
        ];
        let opset = pb::msg(8, &[pb::text(1, ""), pb::int(2, 17)]);
        [pb::int(1, 8), opset, pb::msg(7, &graph)].concat()
    }

    /// `bytes` written to a file of this test's own; removed when dropped.
    struct TempFile(std::path::PathBuf);

    impl TempFile {
        fn new(tag: &str, bytes: &[u8]) -> Self {
            let path = std::env::temp_dir().join(format!(
                "rlx-torch-import-onnx-{}-{tag}.onnx",
                std::process::id()
            ));
            std::fs::write(&path, bytes).unwrap();
            Self(path)
        }
    }

    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    fn batch(n: usize) -> HashMap<String, usize> {
        HashMap::from([("batch".to_string(), n)])
    }

    fn f32s(bytes: &[u8]) -> Vec<f32> {
        bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    }

    #[test]
    fn an_onnx_file_imports_as_a_program_that_runs() {
        let w = [1.0f32, -1.0, 2.0, -2.0, 3.0, -3.0];
        let file = TempFile::new("relu", &model_bytes("Relu", &w));
        let imported = import(&file.0, &batch(2), true).unwrap();
        let program: Value = serde_json::from_str(&imported.program_json).unwrap();
        assert_eq!(program["inputs"][0]["name"], "x");
        assert_eq!(
            program["inputs"][0]["shape"],
            json!({"dims": [{"Static": 2}, {"Static": 3}], "dtype": "F32"})
        );
        let report: Value = serde_json::from_str(&imported.report_json).unwrap();
        assert_eq!(report["stubbed"], 0);
        assert_eq!(report["unsupported"], json!([]));
        // The program is ours: it builds, compiles and computes relu(x @ w).
        let hir = crate::program::program_to_hir_json(&imported.program_json).unwrap();
        let mut runner = Runner::from_hir_json(&hir, rlx_runtime::Device::Cpu).unwrap();
        for weight in &imported.weights {
            runner
                .set_param(&weight.name, &weight.data, weight.dtype)
                .unwrap();
        }
        let x: Vec<u8> = [1.0f32, 1.0, 1.0, -1.0, 0.0, 2.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let out = runner.run(&[("x", &x, DType::F32)]).unwrap();
        assert_eq!(out[0].2, vec![2, 2]);
        assert_eq!(f32s(out[0].0.as_bytes()), vec![6.0, 0.0, 5.0, 0.0]);
    }

    #[test]
    fn an_op_the_importer_lacks_is_refused_when_strict_and_reported_when_not() {
        let file = TempFile::new("unknown", &model_bytes("NotAnOnnxOp", &[0.0; 6]));
        let err = import(&file.0, &batch(2), true).err().unwrap();
        assert!(err.is_check(), "{err:?}");
        assert!(err.message().contains("NotAnOnnxOp"), "{err}");
        let imported = import(&file.0, &batch(2), false).unwrap();
        let report: Value = serde_json::from_str(&imported.report_json).unwrap();
        let text = report.to_string();
        assert!(text.contains("NotAnOnnxOp"), "{text}");
    }

    #[test]
    fn a_file_that_is_not_onnx_is_a_check_error() {
        let missing = std::env::temp_dir().join("rlx-torch-import-no-such-file.onnx");
        let err = import(&missing, &batch(2), false).err().unwrap();
        assert!(
            err.is_check() && err.message().starts_with("read "),
            "{err:?}"
        );
        let file = TempFile::new("garbage", b"\xff\xff\xff\xff not a protobuf");
        let err = import(&file.0, &batch(2), false).err().unwrap();
        assert!(err.is_check(), "{err:?}");
        assert!(err.message().contains("parse ONNX protobuf"), "{err}");
    }

    use crate::test_support::MATMUL_RELU as PROGRAM;

    #[test]
    fn the_respelling_is_the_inverse_of_building_the_hir() {
        let hir =
            crate::program::build_hir(&crate::program::parse_program(PROGRAM).unwrap()).unwrap();
        let values: Vec<f32> = (0..12).map(|i| i as f32 - 5.5).collect();
        let params = HashMap::from([("w".to_string(), values.clone())]);
        let (program, weights) = respell(&hir, &params, &TypedParams::new()).unwrap();
        assert_eq!(program["nodes"][0]["id"], "v2");
        assert_eq!(program["nodes"][0]["inputs"], json!(["x", "w"]));
        assert_eq!(program["nodes"][0]["label"], "aten.mm");
        assert_eq!(program["nodes"][1]["inputs"], json!(["v2"]));
        assert_eq!(program["outputs"], json!(["v3"]));
        let again = crate::program::program_to_hir_json(&program.to_string()).unwrap();
        assert_eq!(
            again,
            rlx_ir::serialize::hir_to_json(&hir).unwrap(),
            "the same HIR"
        );
        assert_eq!(weights.len(), 1);
        assert_eq!(
            (weights[0].name.as_str(), weights[0].dtype),
            ("w", DType::F32)
        );
        assert_eq!(f32s(&weights[0].data), values);
    }

    #[test]
    fn a_parameter_holds_the_importers_bytes_or_is_refused() {
        let i64s = Shape::new(&[2], DType::I64);
        let typed = TypedParams::from([("t".to_string(), (vec![7u8; 16], DType::I64))]);
        let floats = HashMap::from([
            ("t".to_string(), vec![1.0, 2.0]),
            ("f".to_string(), vec![1.5, -2.0]),
            ("__stub__/y".to_string(), vec![9.0]),
        ]);
        let bytes = |name: &str, shape: &Shape| param_bytes(name, shape, &floats, &typed);
        assert_eq!(
            bytes("t", &i64s).unwrap(),
            vec![7u8; 16],
            "typed bytes first"
        );
        let f32x2 = Shape::new(&[2], DType::F32);
        assert_eq!(f32s(&bytes("f", &f32x2).unwrap()), vec![1.5, -2.0]);
        assert_eq!(
            bytes("f", &i64s).unwrap_err(),
            CoreError::Check(
                "parameter \"f\": the importer holds float32 values for a I64 tensor".into()
            )
        );
        assert_eq!(bytes("__stub__/y", &i64s).unwrap(), vec![0u8; 16]);
        assert_eq!(bytes("__stub__/z", &f32x2).unwrap(), vec![0u8; 8]);
        assert_eq!(
            bytes("g", &f32x2).unwrap_err(),
            CoreError::Check("parameter \"g\": the importer gave no values for it".into())
        );
        let dynamic = Shape::from_dims(
            &[rlx_ir::Dim::Dynamic(0), rlx_ir::Dim::Static(3)],
            DType::F32,
        );
        assert_eq!(stub_bytes(&dynamic).len(), 12, "a dynamic dim counts 1");
    }

    #[test]
    fn a_block_node_is_refused() {
        let mut hir = HirModule::new("t");
        let x = hir.input("x", Shape::new(&[2, 3], DType::F32));
        let w = hir.param("w", Shape::new(&[3, 4], DType::F32));
        let y = hir.linear(x, w, None, None, Shape::new(&[2, 4], DType::F32));
        hir.set_outputs(vec![y]);
        let params = HashMap::from([("w".to_string(), vec![0.0; 12])]);
        let err = respell(&hir, &params, &TypedParams::new()).err().unwrap();
        assert_eq!(
            err,
            CoreError::Check(
                "the importer made a Linear block node; only plain RLX ops are carried".into()
            )
        );
    }

    #[test]
    fn the_report_lists_unsupported_op_types_sorted() {
        let report = ImportReport {
            lowered: 3,
            skipped: 1,
            stubbed: 2,
            stubbed_nodes: vec!["a".into(), "b".into()],
            unsupported: HashMap::from([("Zeta".to_string(), 1), ("Alpha".to_string(), 2)]),
        };
        assert_eq!(
            report_json(&report),
            json!({"lowered": 3, "skipped": 1, "stubbed": 2, "stubbed_nodes": ["a", "b"],
                   "unsupported": [["Alpha", 2], ["Zeta", 1]]})
        );
    }
}
