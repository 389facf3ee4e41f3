//! Host tensors, the dtype conversions at the graph boundary, and the parity
//! check against PyTorch's reference outputs.
//!
//! This file is the same in every crate rlx-torch-import writes. RLX 0.2.17's
//! CPU arena cannot read or write bool, narrow-integer or half-precision values
//! at the graph boundary, so those cross it as `f32` (exact for their ranges);
//! the budgets are the ones the Python verifier applies.

use rlx_ir::DType;

/// A tensor on the host: little-endian bytes in its PyTorch dtype.
#[derive(Debug, Clone, PartialEq)]
pub struct HostTensor {
    /// PyTorch dtype name (`"float32"`, `"int64"`, `"bfloat16"`, `"bool"`, ...).
    pub dtype: String,
    pub dims: Vec<usize>,
    pub data: Vec<u8>,
}

/// A graph input or output as the model declares it.
#[derive(Debug, Clone, Copy)]
pub struct TensorSpec {
    pub name: &'static str,
    pub dims: &'static [usize],
    /// PyTorch dtype name.
    pub dtype: &'static str,
    /// The dtype the value has inside RLX at the boundary.
    pub carrier: DType,
}

/// A parameter: its `state_dict` name and the dtype the graph computes it in.
#[derive(Debug, Clone, Copy)]
pub struct ParamSpec {
    pub name: &'static str,
    pub dims: &'static [usize],
    pub dtype: DType,
}

/// Bytes per element of a PyTorch dtype, or `None` for one RLX cannot hold.
pub fn element_size(dtype: &str) -> Option<usize> {
    Some(match dtype {
        "bool" | "int8" | "uint8" => 1,
        "int16" | "float16" | "bfloat16" => 2,
        "int32" | "float32" => 4,
        "int64" | "float64" => 8,
        _ => return None,
    })
}

/// The RLX dtype of a PyTorch dtype name.
pub fn rlx_dtype(dtype: &str) -> Option<DType> {
    Some(match dtype {
        "bool" => DType::Bool,
        "int8" => DType::I8,
        "uint8" => DType::U8,
        "int16" => DType::I16,
        "int32" => DType::I32,
        "int64" => DType::I64,
        "float16" => DType::F16,
        "bfloat16" => DType::BF16,
        "float32" => DType::F32,
        "float64" => DType::F64,
        _ => return None,
    })
}

impl HostTensor {
    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.dims.iter().product()
    }

    /// Every element widened to `f64` (exact for all supported dtypes but int64 beyond 2^53).
    pub fn to_f64(&self) -> Vec<f64> {
        let d = &self.data;
        match self.dtype.as_str() {
            "bool" | "uint8" => d.iter().map(|&b| f64::from(b)).collect(),
            "int8" => d.iter().map(|&b| f64::from(b as i8)).collect(),
            "int16" => d.chunks_exact(2).map(|c| f64::from(i16::from_le_bytes([c[0], c[1]]))).collect(),
            "int32" => d.chunks_exact(4).map(|c| f64::from(i32::from_le_bytes(c.try_into().unwrap()))).collect(),
            "int64" => d.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap()) as f64).collect(),
            "float16" => d.chunks_exact(2).map(|c| f64::from(f16_to_f32(u16::from_le_bytes([c[0], c[1]])))).collect(),
            "bfloat16" => d
                .chunks_exact(2)
                .map(|c| f64::from(f32::from_bits(u32::from(u16::from_le_bytes([c[0], c[1]])) << 16)))
                .collect(),
            "float32" => d.chunks_exact(4).map(|c| f64::from(f32::from_le_bytes(c.try_into().unwrap()))).collect(),
            "float64" => d.chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().unwrap())).collect(),
            other => panic!("dtype {other} is not supported"),
        }
    }
}

/// `f16` bits → `f32` (exact).
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = u32::from(h >> 15) << 31;
    let exp = u32::from((h >> 10) & 0x1f);
    let man = u32::from(h & 0x3ff);
    let bits = match (exp, man) {
        (0, 0) => sign,
        (0, _) => {
            // Subnormal: renormalize.
            let shift = man.leading_zeros() - 21;
            sign | ((113 - shift) << 23) | ((man << shift) & 0x3ff) << 13
        }
        (0x1f, _) => sign | 0x7f80_0000 | (man << 13),
        _ => sign | ((exp + 112) << 23) | (man << 13),
    };
    f32::from_bits(bits)
}

/// `f32` → `f16` bits, rounding to nearest even (like numpy's `astype(float16)`).
pub fn f32_to_f16(x: f32) -> u16 {
    let bits = x.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exp = ((bits >> 23) & 0xff) as i32;
    let man = bits & 0x7f_ffff;
    if exp == 0xff {
        return sign | 0x7c00 | if man != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    let (mantissa, shift) = if e <= 0 {
        if e < -10 {
            return sign;
        }
        (man | 0x80_0000, (14 - e) as u32)
    } else {
        (man, 13)
    };
    let half = 1u32 << (shift - 1);
    let rest = mantissa & ((1u32 << shift) - 1);
    let mut out = mantissa >> shift;
    if rest > half || (rest == half && out & 1 == 1) {
        out += 1;
    }
    let base = if e <= 0 { 0 } else { (e as u32) << 10 };
    sign | (base + out) as u16
}

/// `f32` → `bf16` bits, rounding to nearest even (as the Python side does).
pub fn f32_to_bf16(x: f32) -> u16 {
    let bits = u64::from(x.to_bits());
    ((bits + 0x7fff + ((bits >> 16) & 1)) >> 16) as u16
}

fn f32s(data: &[u8]) -> impl Iterator<Item = f32> + '_ {
    data.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap()))
}

/// Input bytes as RLX takes them: unchanged, or widened to `f32` for a carried dtype.
pub fn to_carrier(t: &HostTensor, carrier: DType) -> Vec<u8> {
    if rlx_dtype(&t.dtype) == Some(carrier) {
        return t.data.clone();
    }
    assert_eq!(carrier, DType::F32, "only f32 carries other dtypes");
    t.to_f64().into_iter().flat_map(|v| (v as f32).to_le_bytes()).collect()
}

/// Output bytes from RLX back in the PyTorch dtype (rounding half floats on the host).
pub fn from_carrier(data: Vec<u8>, carrier: DType, dtype: &str) -> Vec<u8> {
    if rlx_dtype(dtype) == Some(carrier) {
        return data;
    }
    assert_eq!(carrier, DType::F32, "only f32 carries other dtypes");
    match dtype {
        "bool" => f32s(&data).map(|v| u8::from(v != 0.0)).collect(),
        "int8" => f32s(&data).map(|v| (v as i8) as u8).collect(),
        "uint8" => f32s(&data).map(|v| v as u8).collect(),
        "int16" => f32s(&data).flat_map(|v| (v as i16).to_le_bytes()).collect(),
        "float16" => f32s(&data).flat_map(|v| f32_to_f16(v).to_le_bytes()).collect(),
        "bfloat16" => f32s(&data).flat_map(|v| f32_to_bf16(v).to_le_bytes()).collect(),
        other => panic!("dtype {other} does not travel as f32"),
    }
}

/// How far a result may be from PyTorch and still pass.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    pub atol: f64,
    pub rtol: f64,
    pub min_cosine: f64,
}

/// The pass budget for an output of this dtype (exact for integers and bool).
pub fn budget_for(dtype: &str) -> Budget {
    let (atol, rtol, min_cosine) = match dtype {
        "float64" => (1e-9, 1e-7, 0.9999999),
        "float32" => (1e-4, 1e-4, 0.99999),
        "float16" => (2e-3, 2e-3, 0.999),
        "bfloat16" => (1.6e-2, 1.6e-2, 0.995),
        _ => (0.0, 0.0, -1.0),
    };
    Budget {
        atol,
        rtol,
        min_cosine,
    }
}

/// Parity of one output against PyTorch.
#[derive(Debug, Clone)]
pub struct Parity {
    pub name: String,
    pub max_abs_error: f64,
    pub allowed_abs_error: f64,
    pub cosine: f64,
    /// Why it failed; empty when it passed.
    pub reasons: Vec<String>,
}

impl Parity {
    pub fn ok(&self) -> bool {
        self.reasons.is_empty()
    }
}

impl std::fmt::Display for Parity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let verdict = if self.ok() { "ok" } else { "FAIL" };
        write!(
            f,
            "{}: {verdict} max_abs_err={:.3e} (allowed {:.3e}) cosine={:.8}",
            self.name, self.max_abs_error, self.allowed_abs_error, self.cosine
        )?;
        for r in &self.reasons {
            write!(f, "; {r}")?;
        }
        Ok(())
    }
}

/// Compare `actual` with `expected` the way the Python verifier does.
pub fn compare(name: &str, actual: &HostTensor, expected: &HostTensor) -> Parity {
    let budget = budget_for(&expected.dtype);
    let mut reasons = Vec::new();
    if actual.dtype != expected.dtype {
        reasons.push(format!("dtype {} != {}", actual.dtype, expected.dtype));
    }
    if actual.dims != expected.dims {
        reasons.push(format!("shape {:?} != {:?}", actual.dims, expected.dims));
        return Parity {
            name: name.into(),
            max_abs_error: f64::INFINITY,
            allowed_abs_error: 0.0,
            cosine: 0.0,
            reasons,
        };
    }
    let (a, e) = (actual.to_f64(), expected.to_f64());
    let nonfinite_match = a
        .iter()
        .zip(&e)
        .all(|(x, y)| x.is_nan() == y.is_nan() && (!(x.is_infinite() || y.is_infinite()) || x == y));
    if !nonfinite_match {
        reasons.push("NaN/inf positions differ".into());
    }
    if !a.is_empty() && a.iter().all(|x| x.is_nan()) {
        reasons.push("output is entirely NaN".into());
    }
    let (mut max_abs, mut scale, mut dot, mut na, mut ne) = (0.0f64, 0.0f64, 0.0, 0.0, 0.0);
    for (x, y) in a.iter().zip(&e).filter(|(x, y)| x.is_finite() && y.is_finite()) {
        max_abs = max_abs.max((x - y).abs());
        scale = scale.max(y.abs());
        dot += x * y;
        na += x * x;
        ne += y * y;
    }
    let cosine = match (na == 0.0, ne == 0.0) {
        (true, true) => 1.0,
        (false, false) => dot / (na.sqrt() * ne.sqrt()),
        _ => 0.0,
    };
    let allowed = budget.atol + budget.rtol * scale;
    if max_abs > allowed {
        reasons.push(format!("max abs error {max_abs:.3e} > allowed {allowed:.3e}"));
    }
    if cosine < budget.min_cosine {
        reasons.push(format!("cosine {cosine:.8} < {}", budget.min_cosine));
    }
    Parity {
        name: name.into(),
        max_abs_error: max_abs,
        allowed_abs_error: allowed,
        cosine,
        reasons,
    }
}
