//! Read and write safetensors files: the `state_dict`-named weights, and the
//! reference inputs/outputs recorded at conversion time.
//!
//! This file is the same in every crate rlx-torch-import writes. The format is
//! an 8-byte little-endian header length, a JSON header mapping each name to
//! `{dtype, shape, data_offsets}`, then the raw bytes.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use crate::host::{HostTensor, ParamSpec, element_size, rlx_dtype};

/// safetensors dtype tag ↔ PyTorch dtype name.
const DTYPES: [(&str, &str); 10] = [
    ("BOOL", "bool"),
    ("U8", "uint8"),
    ("I8", "int8"),
    ("I16", "int16"),
    ("I32", "int32"),
    ("I64", "int64"),
    ("F16", "float16"),
    ("BF16", "bfloat16"),
    ("F32", "float32"),
    ("F64", "float64"),
];

fn torch_dtype(tag: &str) -> Option<&'static str> {
    DTYPES.iter().find(|(t, _)| *t == tag).map(|(_, d)| *d)
}

fn tag_of(dtype: &str) -> Option<&'static str> {
    DTYPES.iter().find(|(_, d)| *d == dtype).map(|(t, _)| *t)
}

/// Every tensor in a safetensors file, by name. Errors name the file and tensor.
pub fn read(path: &Path) -> Result<BTreeMap<String, HostTensor>, String> {
    let bytes = fs::read(path).map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    let bad = |what: String| format!("{}: not a safetensors file: {what}", path.display());
    let len = bytes
        .get(..8)
        .ok_or_else(|| bad("shorter than 8 bytes".into()))?;
    let len = u64::from_le_bytes(len.try_into().unwrap()) as usize;
    let header = bytes
        .get(8..8 + len)
        .ok_or_else(|| bad("header runs past the end".into()))?;
    let header: serde_json::Value =
        serde_json::from_slice(header).map_err(|e| bad(format!("header is not JSON: {e}")))?;
    let header = header
        .as_object()
        .ok_or_else(|| bad("header is not an object".into()))?;
    let body = &bytes[8 + len..];
    let mut out = BTreeMap::new();
    for (name, entry) in header.iter().filter(|(k, _)| *k != "__metadata__") {
        let field = |f: &str| {
            entry
                .get(f)
                .ok_or_else(|| bad(format!("tensor {name:?} has no {f}")))
        };
        let tag = field("dtype")?.as_str().unwrap_or_default();
        let dtype =
            torch_dtype(tag).ok_or_else(|| bad(format!("tensor {name:?} has dtype {tag}")))?;
        let numbers = |f: &str| -> Result<Vec<usize>, String> {
            field(f)?
                .as_array()
                .and_then(|a| a.iter().map(|v| v.as_u64().map(|n| n as usize)).collect())
                .ok_or_else(|| bad(format!("tensor {name:?} has a malformed {f}")))
        };
        let dims = numbers("shape")?;
        let span = numbers("data_offsets")?;
        let (start, end) = (span[0], span[1]);
        let size = dims.iter().product::<usize>() * element_size(dtype).unwrap_or(0);
        if end < start || end > body.len() || end - start != size {
            return Err(bad(format!(
                "tensor {name:?} has data_offsets that do not fit its shape"
            )));
        }
        let data = body[start..end].to_vec();
        out.insert(
            name.clone(),
            HostTensor {
                dtype: dtype.into(),
                dims,
                data,
            },
        );
    }
    Ok(out)
}

/// The weights `params` names, read from the safetensors file at `path`.
///
/// Every parameter must be present with its declared dims; extra tensors in the
/// file are ignored. The bytes stay in their stored dtype (RLX widens f16/bf16
/// weights to the graph's f32 when they are bound).
pub fn load(path: &Path, params: &[ParamSpec]) -> Result<Vec<(ParamSpec, HostTensor)>, String> {
    let mut all = read(path)?;
    let mut out = Vec::with_capacity(params.len());
    for spec in params {
        let t = all
            .remove(spec.name)
            .ok_or_else(|| format!("{}: weight {:?} is missing", path.display(), spec.name))?;
        if t.dims != spec.dims {
            return Err(format!(
                "{}: weight {:?} has shape {:?}, the model expects {:?}",
                path.display(),
                spec.name,
                t.dims,
                spec.dims
            ));
        }
        if rlx_dtype(&t.dtype).is_none() {
            return Err(format!(
                "{}: weight {:?} has unsupported dtype {}",
                path.display(),
                spec.name,
                t.dtype
            ));
        }
        out.push((*spec, t));
    }
    Ok(out)
}

/// Write tensors (in name order) to a safetensors file.
pub fn write(path: &Path, tensors: &BTreeMap<String, HostTensor>) -> Result<(), String> {
    let mut header = serde_json::Map::new();
    let mut offset = 0;
    for (name, t) in tensors {
        let tag = tag_of(&t.dtype)
            .ok_or_else(|| format!("tensor {name:?}: dtype {} cannot be saved", t.dtype))?;
        let entry = serde_json::json!({
            "dtype": tag,
            "shape": t.dims,
            "data_offsets": [offset, offset + t.data.len()],
        });
        header.insert(name.clone(), entry);
        offset += t.data.len();
    }
    let mut head = serde_json::to_vec(&header).map_err(|e| e.to_string())?;
    while head.len() % 8 != 0 {
        head.push(b' ');
    }
    let mut bytes = (head.len() as u64).to_le_bytes().to_vec();
    bytes.extend(head);
    for t in tensors.values() {
        bytes.extend(&t.data);
    }
    fs::write(path, bytes).map_err(|e| format!("{}: cannot write: {e}", path.display()))
}
