//! Host tensors, the dtype conversions at the graph boundary, and the parity
//! check against PyTorch's reference outputs.
//!
//! This file is the same in every crate rlx-torch-import writes. RLX 0.2.17's
//! CPU arena cannot read or write bool, narrow-integer or half-precision values
//! at the graph boundary, so those cross it as `f32` (exact for their ranges).
//! The parity check applies the Python verifier's rules: integer and bool outputs
//! are compared exactly in their own dtype (as `i64`, never through `f64`), float
//! outputs within the budgets below, which are written from the verifier's table
//! when the crate is generated.

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
    /// An output that may be empty at run time is read flattened with one padding element after it
    /// (RLX cannot read an empty int64/float64 output): the axis whose size may be 0.
    pub padded: Option<usize>,
}

/// A parameter: its `state_dict` name and the dtype the graph computes it in.
#[derive(Debug, Clone, Copy)]
pub struct ParamSpec {
    pub name: &'static str,
    pub dims: &'static [usize],
    pub dtype: DType,
}

/// A dynamic dim's symbol: its RLX number, name, and inclusive range (`max` None: unbounded).
#[derive(Debug, Clone, Copy)]
pub struct Symbol {
    pub id: u32,
    pub name: &'static str,
    pub min: usize,
    pub max: Option<usize>,
}

/// An input that feeds an index (an embedding's ids, a gather's indices) unchanged, and the range
/// PyTorch allows there, `[low, high)` (negative `low`: negative indices count from the end).
#[derive(Debug, Clone, Copy)]
pub struct IndexRange {
    /// Position of the input in `INPUTS`.
    pub input: usize,
    pub low: i64,
    pub high: i64,
    /// The ATen op indexed, its node, and the axis of its table.
    pub op: &'static str,
    pub node: &'static str,
    pub axis: usize,
}

/// Refuse inputs (in `specs` order) holding an index outside its range, naming the input, the
/// position and value, the range and the op: what PyTorch raises an IndexError for, and what RLX's
/// gathers would read past their table for.
pub fn check_index_ranges(
    ranges: &[IndexRange],
    specs: &[TensorSpec],
    inputs: &[HostTensor],
) -> Result<(), String> {
    for r in ranges {
        let (Some(spec), Some(t)) = (specs.get(r.input), inputs.get(r.input)) else {
            continue;
        };
        let Values::Int(values) = t.values() else {
            continue;
        };
        if let Some((p, v)) = values
            .iter()
            .enumerate()
            .find(|(_, v)| **v < r.low || **v >= r.high)
        {
            return Err(format!(
                "input {:?} holds {v} at position {:?}, outside the valid range [{}, {}) of the index it feeds: \
                 axis {} of {} (node {}); PyTorch raises IndexError for it",
                spec.name,
                unravel(p, &t.dims),
                r.low,
                r.high,
                r.axis,
                r.op,
                r.node
            ));
        }
    }
    Ok(())
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

    /// Every element widened to `f64` (exact for all supported dtypes but int64 beyond 2^53;
    /// use [`HostTensor::values`] to compare).
    pub fn to_f64(&self) -> Vec<f64> {
        let d = &self.data;
        match self.dtype.as_str() {
            "bool" | "uint8" => d.iter().map(|&b| f64::from(b)).collect(),
            "int8" => d.iter().map(|&b| f64::from(b as i8)).collect(),
            "int16" => d
                .chunks_exact(2)
                .map(|c| f64::from(i16::from_le_bytes([c[0], c[1]])))
                .collect(),
            "int32" => d
                .chunks_exact(4)
                .map(|c| f64::from(i32::from_le_bytes(c.try_into().unwrap())))
                .collect(),
            "int64" => d
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().unwrap()) as f64)
                .collect(),
            "float16" => d
                .chunks_exact(2)
                .map(|c| f64::from(f16_to_f32(u16::from_le_bytes([c[0], c[1]]))))
                .collect(),
            "bfloat16" => d
                .chunks_exact(2)
                .map(|c| {
                    f64::from(f32::from_bits(
                        u32::from(u16::from_le_bytes([c[0], c[1]])) << 16,
                    ))
                })
                .collect(),
            "float32" => d
                .chunks_exact(4)
                .map(|c| f64::from(f32::from_le_bytes(c.try_into().unwrap())))
                .collect(),
            "float64" => d
                .chunks_exact(8)
                .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
                .collect(),
            other => panic!("dtype {other} is not supported"),
        }
    }

    /// Every element exactly: integers and bool as `i64`, floats as `f64`.
    pub fn values(&self) -> Values {
        let d = &self.data;
        match self.dtype.as_str() {
            "bool" | "uint8" => Values::Int(d.iter().map(|&b| i64::from(b)).collect()),
            "int8" => Values::Int(d.iter().map(|&b| i64::from(b as i8)).collect()),
            "int16" => Values::Int(
                d.chunks_exact(2)
                    .map(|c| i64::from(i16::from_le_bytes([c[0], c[1]])))
                    .collect(),
            ),
            "int32" => Values::Int(
                d.chunks_exact(4)
                    .map(|c| i64::from(i32::from_le_bytes(c.try_into().unwrap())))
                    .collect(),
            ),
            "int64" => Values::Int(
                d.chunks_exact(8)
                    .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
                    .collect(),
            ),
            _ => Values::Float(self.to_f64()),
        }
    }
}

/// Element values as exact as their dtype: integers and bool as `i64`, floats as `f64`.
#[derive(Debug, Clone, PartialEq)]
pub enum Values {
    Int(Vec<i64>),
    Float(Vec<f64>),
}

impl Values {
    /// Whether element `i` differs between `self` and `other` (exactly; NaN equals NaN).
    fn differs(&self, other: &Values, i: usize) -> bool {
        match (self, other) {
            (Values::Int(a), Values::Int(b)) => a[i] != b[i],
            (Values::Float(a), Values::Float(b)) => {
                !(a[i] == b[i] || (a[i].is_nan() && b[i].is_nan()))
            }
            (Values::Int(a), Values::Float(b)) | (Values::Float(b), Values::Int(a)) => {
                !int_equals_float(a[i], b[i])
            }
        }
    }

    /// |self[i] - other[i]|, exact for two integers.
    fn abs_diff(&self, other: &Values, i: usize) -> f64 {
        match (self, other) {
            (Values::Int(a), Values::Int(b)) => {
                (i128::from(a[i]) - i128::from(b[i])).unsigned_abs() as f64
            }
            (Values::Float(a), Values::Float(b)) => (a[i] - b[i]).abs(),
            (Values::Int(a), Values::Float(b)) | (Values::Float(b), Values::Int(a)) => {
                (a[i] as f64 - b[i]).abs()
            }
        }
    }

    /// Element `i` as its dtype prints it (bool as true/false, floats in their own precision).
    fn show(&self, i: usize, dtype: &str) -> String {
        match self {
            Values::Int(v) if dtype == "bool" => (v[i] != 0).to_string(),
            Values::Int(v) => v[i].to_string(),
            Values::Float(v) if dtype == "float64" => format!("{:?}", v[i]),
            Values::Float(v) => format!("{:?}", v[i] as f32),
        }
    }
}

/// Whether an integer and a float are the same number (no rounding on either side).
fn int_equals_float(i: i64, f: f64) -> bool {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    f.is_finite() && f.fract() == 0.0 && (-TWO_63..TWO_63).contains(&f) && f as i64 == i
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
    data.chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
}

/// Input bytes as RLX takes them: unchanged, or widened to `f32` for a carried dtype.
pub fn to_carrier(t: &HostTensor, carrier: DType) -> Vec<u8> {
    if rlx_dtype(&t.dtype) == Some(carrier) {
        return t.data.clone();
    }
    assert_eq!(carrier, DType::F32, "only f32 carries other dtypes");
    t.to_f64()
        .into_iter()
        .flat_map(|v| (v as f32).to_le_bytes())
        .collect()
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
        "float16" => f32s(&data)
            .flat_map(|v| f32_to_f16(v).to_le_bytes())
            .collect(),
        "bfloat16" => f32s(&data)
            .flat_map(|v| f32_to_bf16(v).to_le_bytes())
            .collect(),
        other => panic!("dtype {other} does not travel as f32"),
    }
}

/// An output read flattened with one padding element after it (`TensorSpec::padded`) given back its
/// shape (`spec.dims` with the padded axis sized from the element count) and its elements.
pub fn unpad(spec: &TensorSpec, mut t: HostTensor) -> HostTensor {
    let Some(axis) = spec.padded else { return t };
    let n = t.dims.iter().product::<usize>().saturating_sub(1);
    let others: usize = spec
        .dims
        .iter()
        .enumerate()
        .filter(|&(i, _)| i != axis)
        .map(|(_, &d)| d)
        .product();
    t.data.truncate(t.data.len() / (n + 1) * n);
    t.dims = spec.dims.to_vec();
    t.dims[axis] = n.checked_div(others).unwrap_or(0);
    t
}

/// How far a result may be from PyTorch and still pass.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Budget {
    pub atol: f64,
    pub rtol: f64,
    pub min_cosine: f64,
}

/// The float budgets by PyTorch dtype, written from the Python verifier's table
/// (`rlx_torch_import.verify.parity`) when this crate was generated.
pub const FLOAT_BUDGETS: &[(&str, Budget)] = &[
    (
        "float64",
        Budget {
            atol: 1e-9,
            rtol: 1e-7,
            min_cosine: 0.9999999,
        },
    ),
    (
        "float32",
        Budget {
            atol: 0.0001,
            rtol: 0.0001,
            min_cosine: 0.99999,
        },
    ),
    (
        "float16",
        Budget {
            atol: 0.002,
            rtol: 0.002,
            min_cosine: 0.999,
        },
    ),
    (
        "bfloat16",
        Budget {
            atol: 0.016,
            rtol: 0.016,
            min_cosine: 0.995,
        },
    ),
];

/// Integers and bool: every element equal (cosine is reported, not judged).
pub const EXACT: Budget = Budget {
    atol: 0.0,
    rtol: 0.0,
    min_cosine: -1.0,
};

/// The pass budget for an output of this dtype (exact for integers and bool).
pub fn budget_for(dtype: &str) -> Budget {
    FLOAT_BUDGETS
        .iter()
        .find(|(d, _)| *d == dtype)
        .map_or(EXACT, |(_, b)| *b)
}

/// Whether outputs of this dtype must match element for element (integers and bool).
pub fn is_exact(dtype: &str) -> bool {
    !FLOAT_BUDGETS.iter().any(|(d, _)| *d == dtype)
}

/// The first differing element of an output: its index and both values.
#[derive(Debug, Clone, PartialEq)]
pub struct Mismatch {
    /// Multi-dimensional index, row-major.
    pub index: Vec<usize>,
    /// RLX's value there.
    pub actual: String,
    /// PyTorch's value there.
    pub expected: String,
}

/// Parity of one output against PyTorch.
#[derive(Debug, Clone)]
pub struct Parity {
    pub name: String,
    pub max_abs_error: f64,
    pub allowed_abs_error: f64,
    pub cosine: f64,
    /// Elements that differ (integers and bool: not equal; floats: outside the budget, or
    /// NaN/inf moved); `None` when the shapes differ and elements cannot be paired.
    pub mismatches: Option<usize>,
    /// The row-major first of them.
    pub first_mismatch: Option<Mismatch>,
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
        match (&self.mismatches, &self.first_mismatch) {
            (None, _) => write!(f, " elements not comparable (shapes differ)")?,
            (Some(n), Some(m)) => write!(
                f,
                " {n} differ, first at {:?}: RLX {} vs PyTorch {}",
                m.index, m.actual, m.expected
            )?,
            (Some(n), None) => write!(f, " {n} differ")?,
        }
        for r in &self.reasons {
            write!(f, "; {r}")?;
        }
        Ok(())
    }
}

/// Row-major flat position -> multi-dimensional index.
fn unravel(mut flat: usize, dims: &[usize]) -> Vec<usize> {
    let mut index = vec![0; dims.len()];
    for (slot, &d) in index.iter_mut().zip(dims).rev() {
        *slot = flat % d;
        flat /= d;
    }
    index
}

/// Cosine similarity on values divided by their largest magnitude (no overflow at 1e300).
fn scaled_cosine(pairs: &[(f64, f64)]) -> f64 {
    let scale = pairs
        .iter()
        .fold(0.0f64, |m, (x, y)| m.max(x.abs()).max(y.abs()));
    if scale == 0.0 {
        return 1.0;
    }
    let (mut dot, mut na, mut ne) = (0.0f64, 0.0f64, 0.0f64);
    for (x, y) in pairs {
        let (x, y) = (x / scale, y / scale);
        dot += x * y;
        na += x * x;
        ne += y * y;
    }
    if na == 0.0 || ne == 0.0 {
        return 0.0;
    }
    dot / na.sqrt() / ne.sqrt()
}

/// Compare `actual` (RLX) with `expected` (PyTorch) the way the Python verifier does.
pub fn compare(name: &str, actual: &HostTensor, expected: &HostTensor) -> Parity {
    let budget = budget_for(&expected.dtype);
    let exact = is_exact(&expected.dtype);
    let mut reasons = Vec::new();
    if actual.dtype != expected.dtype {
        reasons.push(format!("dtype {} != {}", actual.dtype, expected.dtype));
    }
    if actual.dims != expected.dims {
        // A failure even when the element counts agree, or both are all zeros.
        reasons.push(format!("shape {:?} != {:?}", actual.dims, expected.dims));
        return Parity {
            name: name.into(),
            max_abs_error: f64::INFINITY,
            allowed_abs_error: 0.0,
            cosine: 0.0,
            mismatches: None,
            first_mismatch: None,
            reasons,
        };
    }
    let (a, e) = (actual.to_f64(), expected.to_f64());
    let moved = |x: f64, y: f64| {
        x.is_nan() != y.is_nan() || ((x.is_infinite() || y.is_infinite()) && x != y)
    };
    if a.iter().zip(&e).any(|(&x, &y)| moved(x, y)) {
        reasons.push("NaN/inf positions differ".into());
    }
    // Entirely NaN fails, unless PyTorch's output is NaN at the same positions (nothing differs).
    if !a.is_empty() && a.iter().all(|x| x.is_nan()) && !e.iter().all(|y| y.is_nan()) {
        reasons.push("output is entirely NaN".into());
    }
    let finite: Vec<(f64, f64)> = a
        .iter()
        .zip(&e)
        .filter(|(x, y)| x.is_finite() && y.is_finite())
        .map(|(&x, &y)| (x, y))
        .collect();
    let cosine = scaled_cosine(&finite);
    let (av, ev) = (actual.values(), expected.values());
    let (mut mismatches, mut first, mut max_abs) = (0usize, None, 0.0f64);
    let allowed = if exact {
        0.0
    } else {
        let scale = finite.iter().fold(0.0f64, |m, (_, y)| m.max(y.abs()));
        budget.atol + budget.rtol * scale
    };
    for (i, (&x, &y)) in a.iter().zip(&e).enumerate() {
        let bad = if exact {
            let bad = av.differs(&ev, i);
            if bad {
                max_abs = max_abs.max(av.abs_diff(&ev, i));
            }
            bad
        } else {
            let diff = if x.is_finite() && y.is_finite() {
                (x - y).abs()
            } else {
                0.0
            };
            max_abs = max_abs.max(diff);
            moved(x, y) || diff > allowed
        };
        if bad {
            mismatches += 1;
            if first.is_none() {
                first = Some(i);
            }
        }
    }
    if exact {
        if mismatches > 0 {
            reasons.push(format!(
                "{mismatches} of {} elements differ ({} must match exactly)",
                a.len(),
                expected.dtype
            ));
        }
    } else {
        if max_abs > allowed {
            reasons.push(format!(
                "max abs error {max_abs:.3e} > allowed {allowed:.3e}"
            ));
        }
        if cosine.is_nan() || cosine < budget.min_cosine {
            reasons.push(format!("cosine {cosine:.8} < {}", budget.min_cosine));
        }
    }
    Parity {
        name: name.into(),
        max_abs_error: max_abs,
        allowed_abs_error: allowed,
        cosine,
        mismatches: Some(mismatches),
        first_mismatch: first.map(|i| Mismatch {
            index: unravel(i, &expected.dims),
            actual: av.show(i, &actual.dtype),
            expected: ev.show(i, &expected.dtype),
        }),
        reasons,
    }
}
