//! Tensor sizes: a shape's element count and byte size in checked arithmetic, refused when a dim
//! is dynamic, the size overflows, or one tensor is larger than the machine's memory
//! ([`check_shape`]); and the declarations (`TensorDecl`) `run` and `set_param` check their data
//! against. RLX trusts its graph: a byte size that overflows wraps to a tiny arena the kernels
//! then write past.

use rlx_ir::{DType, Dim, Shape};

use crate::dtype_name;
use crate::error::CoreError;
use crate::memory::{MemoryLimit, human};

/// A declared graph input or parameter: what `run` / `set_param` must be given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorDecl {
    pub name: String,
    pub dims: Vec<usize>,
    pub dtype: DType,
    pub elements: usize,
    pub bytes: usize,
}

impl TensorDecl {
    /// `F32 [2, 3] (6 elements, 24 bytes)`.
    pub fn describe(&self) -> String {
        format!(
            "{} {:?} ({} elements, {} bytes)",
            dtype_name(self.dtype),
            self.dims,
            self.elements,
            self.bytes
        )
    }
}

/// Element count and byte size of `dims` in `dtype`; None when either overflows `usize`.
pub fn tensor_size(dims: &[usize], dtype: DType) -> Option<(usize, usize)> {
    let elements = dims.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))?;
    let bytes = elements.checked_mul(dtype.size_bytes())?;
    Some((elements, bytes))
}

/// `[2, ?4, 3]`: static dims as numbers, a dynamic one as `?<symbol>`.
pub(crate) fn dims_text(shape: &Shape) -> String {
    let dims: Vec<String> = shape
        .dims()
        .iter()
        .map(|d| match d {
            Dim::Static(n) => n.to_string(),
            Dim::Dynamic(s) => format!("?{s}"),
        })
        .collect();
    format!("[{}]", dims.join(", "))
}

/// The static dims, element count and bytes of `shape` (a value `what` names), refusing a
/// dynamic dim, an overflowing size and a tensor larger than `limit`.
pub fn check_shape(
    what: &str,
    shape: &Shape,
    limit: &MemoryLimit,
) -> Result<(Vec<usize>, usize, usize), CoreError> {
    let dtype = dtype_name(shape.dtype());
    let mut dims = Vec::with_capacity(shape.rank());
    for d in shape.dims() {
        match d {
            Dim::Static(n) => dims.push(*n),
            Dim::Dynamic(s) => {
                return Err(CoreError::Check(format!(
                    "{what}: {dtype} {} has a dynamic dim (symbol {s}); a graph must be static \
                     (bound to sizes) before it is compiled",
                    dims_text(shape)
                )));
            }
        }
    }
    let Some((elements, bytes)) = tensor_size(&dims, shape.dtype()) else {
        return Err(CoreError::Check(format!(
            "{what}: {dtype} {dims:?} has more elements or bytes than a 64-bit size can count \
             (the product of its dims, times {} bytes per element, overflows)",
            shape.dtype().size_bytes()
        )));
    };
    if bytes as u64 > limit.bytes {
        return Err(CoreError::Check(format!(
            "{what}: {dtype} {dims:?} ({elements} elements) takes {}, more than this machine's \
             memory, {}",
            human(bytes as u64),
            limit.describe()
        )));
    }
    Ok((dims, elements, bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::test_support::{f32s, limit};

    #[test]
    fn sizes_use_checked_arithmetic() {
        assert_eq!(tensor_size(&[2, 3], DType::F64), Some((6, 48)));
        assert_eq!(tensor_size(&[], DType::Bool), Some((1, 1)));
        assert_eq!(tensor_size(&[1 << 31, 1 << 31], DType::F32), None);
        assert_eq!(tensor_size(&[usize::MAX, 2], DType::I8), None);
    }

    #[test]
    fn an_overflowing_shape_is_refused_naming_dims_and_dtype() {
        let shape = f32s(&[1 << 31, 1 << 31]);
        let err = check_shape("node %3 (Relu)", &shape, &limit(u64::MAX)).unwrap_err();
        assert!(err.is_check());
        let m = err.message();
        assert!(
            m.starts_with("node %3 (Relu): F32 [2147483648, 2147483648]")
                && m.contains("overflows"),
            "{m}"
        );
    }

    #[test]
    fn a_tensor_larger_than_memory_is_refused_naming_bytes_and_limit() {
        let err = check_shape("input \"x\"", &f32s(&[1000, 1000]), &limit(1 << 20)).unwrap_err();
        let m = err.message();
        assert!(
            m.contains("F32 [1000, 1000] (1000000 elements)")
                && m.contains("(4000000 bytes)")
                && m.contains("1.0 MiB (1048576 bytes) (a test limit)"),
            "{m}"
        );
        assert_eq!(
            check_shape("x", &f32s(&[256, 1024]), &limit(1 << 20)).unwrap(),
            (vec![256, 1024], 262144, 1 << 20)
        );
    }

    #[test]
    fn a_dynamic_dim_is_refused() {
        let shape = Shape::from_dims(&[Dim::Dynamic(4), Dim::Static(3)], DType::F32);
        let err = check_shape("node %1", &shape, &limit(u64::MAX)).unwrap_err();
        assert!(
            err.message()
                .contains("[?4, 3] has a dynamic dim (symbol 4)"),
            "{err}"
        );
        assert_eq!(dims_text(&shape), "[?4, 3]");
        assert_eq!(dims_text(&Shape::new(&[], DType::F32)), "[]");
    }

    #[test]
    fn a_declaration_describes_itself() {
        let decl = TensorDecl {
            name: "x".into(),
            dims: vec![2, 3],
            dtype: DType::F32,
            elements: 6,
            bytes: 24,
        };
        assert_eq!(decl.describe(), "F32 [2, 3] (6 elements, 24 bytes)");
    }
}
