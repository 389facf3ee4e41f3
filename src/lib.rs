//! Thin Rust core of rlx-torch-import.
//!
//! Python decides every mapping (the aten → RLX registry); this crate only
//! turns the lowered program into an `rlx_ir::HirModule`, serializes it, and
//! compiles/runs it on an RLX device (CPU, or CUDA with the `cuda` feature), and prints each `Op` as Rust
//! source for the generated crates. Everything here is plain Rust and
//! testable with `cargo test`; PyO3 types live in `python.rs` only.

#[cfg(target_endian = "big")]
compile_error!("tensors cross the core as little-endian bytes");

// One file with the generated crates, which copy it verbatim (crate/write.py).
#[path = "../python/rlx_torch_import/crate/templates/blas.rs"]
pub mod blas;
pub mod boundary;
pub mod bounds;
pub mod defects;
pub mod device;
pub mod dynamic;
pub mod error;
pub mod fpmode;
pub mod graph_check;
pub mod memory;
#[cfg(feature = "onnx")]
pub mod onnx;
pub mod program;
pub mod runner;
pub mod rust_syntax;
pub mod sizing;
#[cfg(test)]
mod test_support;

#[cfg(feature = "python")]
mod python;

/// Version of the RLX crates this core is built against (the `=` pin in Cargo.toml).
pub const RLX_VERSION: &str = "0.2.19";

/// Parse a dtype name in rlx-ir's serde spelling (`"F32"`, `"I64"`, ...).
pub fn parse_dtype(name: &str) -> Result<rlx_ir::DType, error::CoreError> {
    serde_json::from_value(serde_json::Value::String(name.to_string()))
        .map_err(|_| error::CoreError::Check(format!("unknown RLX dtype {name:?}")))
}

/// The serde spelling of a dtype, the inverse of [`parse_dtype`].
pub fn dtype_name(dtype: rlx_ir::DType) -> String {
    match serde_json::to_value(dtype) {
        Ok(serde_json::Value::String(s)) => s,
        _ => format!("{dtype:?}"),
    }
}
