//! What several modules' unit tests share: little-endian float bytes, the Check message of a refusal,
//! a memory limit, a float32 shape and a two-node program (MatMul then Relu) in our program JSON.

use crate::error::CoreError;
use crate::memory::MemoryLimit;
use rlx_ir::{DType, Shape};

/// A program of `x` [2, 3] @ `w` [3, 4] then Relu, in the JSON `program.rs` reads.
pub const MATMUL_RELU: &str = r#"{
    "name": "t",
    "inputs": [{"name": "x", "shape": {"dims": [{"Static": 2}, {"Static": 3}], "dtype": "F32"}}],
    "params": [{"name": "w", "shape": {"dims": [{"Static": 3}, {"Static": 4}], "dtype": "F32"}}],
    "nodes": [
        {"id": "mm", "op": "MatMul", "inputs": ["x", "w"],
         "shape": {"dims": [{"Static": 2}, {"Static": 4}], "dtype": "F32"}, "label": "aten.mm"},
        {"id": "r", "op": {"Activation": "Relu"}, "inputs": ["mm"],
         "shape": {"dims": [{"Static": 2}, {"Static": 4}], "dtype": "F32"}}
    ],
    "outputs": ["r"]
}"#;

pub fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub fn f32_from(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// The message of a `CoreError::Check`; panics on any other outcome.
pub fn check_message<T>(result: Result<T, CoreError>) -> String {
    match result {
        Err(CoreError::Check(m)) => m,
        Err(other) => panic!("expected a CheckError, got {other:?}"),
        Ok(_) => panic!("expected a CheckError, got a result"),
    }
}

pub fn limit(bytes: u64) -> MemoryLimit {
    MemoryLimit {
        bytes,
        source: "a test limit".into(),
    }
}

pub fn f32s(dims: &[usize]) -> Shape {
    Shape::new(dims, DType::F32)
}
