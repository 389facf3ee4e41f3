//! The CBLAS/LAPACK provider under RLX, chosen per CPU when the process first needs it.
//!
//! RLX's CPU backend (rlx-cpu 0.2.19) computes MatMul and im2col convolution with `cblas_sgemm`
//! and its linear algebra with LAPACK. It is built here against the generic CBLAS ABI
//! (`RLX_BLAS_LINK`, set in `.cargo/config.toml`; rlx-cpu's build.rs), so its references to
//! `cblas_sgemm`, `dgesv_`, ... resolve to the forwarders below, which call the provider loaded
//! on first use. One build thereby runs on whichever library is fastest on the CPU it finds
//! (docs/design.md, "BLAS provider"):
//!
//! - `RTI_BLAS=auto` (default): Intel MKL on Intel CPUs (CPUID vendor `GenuineIntel`), OpenBLAS
//!   (scipy-openblas32's current build) on every other CPU; a provider that is not installed
//!   falls through to the next, ending at the system's `libopenblas.so.0`.
//! - `RTI_BLAS=mkl | openblas | system`: that provider (an error if it cannot be loaded);
//!   `system` is the OS's OpenBLAS (Debian's `libopenblas0`), the way back.
//! - `RTI_BLAS=/path/to/lib.so`: any library exporting the unprefixed CBLAS + LAPACK symbols.
//!
//! Library paths come from `RTI_BLAS_MKL` (MKL's `libmkl_rt.so.*`) and `RTI_BLAS_OPENBLAS`
//! (scipy-openblas32's `libscipy_openblas.so`, symbols prefixed `scipy_`) at run time, or from
//! the same variables when the crate was compiled (generated crates bake the paths the bundle ran
//! with). Every provider runs single-threaded: RLX splits GEMMs over its own Rayon pool and calls
//! the BLAS from inside it (rlx-cpu `par_sgemm`), so a threaded BLAS would only oversubscribe.
//!
//! This file is shared verbatim with generated crates (`crate/templates/blas.rs`), so a crate
//! computes with the same library as the bundle it came from.

#![allow(clippy::too_many_arguments)] // the CBLAS signatures are what they are

use std::sync::OnceLock;

/// `RTI_BLAS` values other than a path.
pub const PROVIDERS: &[&str] = &["auto", "mkl", "openblas", "system"];

/// The provider in use: its name, the library file, and what it says about itself.
#[derive(Debug, Clone)]
pub struct BlasInfo {
    /// `mkl`, `openblas`, `system` or `custom`.
    pub provider: String,
    /// The shared library that was loaded.
    pub path: String,
    /// MKL's version string or OpenBLAS's config and kernel family.
    pub detail: String,
    /// How it was chosen: `RTI_BLAS=...` or `auto (<cpu vendor>)`.
    pub chosen_by: String,
}

macro_rules! forwarders {
    ($( $sym:ident ( $($arg:ident : $ty:ty),* ); )*) => {
        /// The provider's entry points, resolved once.
        #[allow(non_snake_case)]
        struct Table { $( $sym: unsafe extern "C" fn($($ty),*), )* }

        impl Table {
            fn resolve(lib: &libloading::Library, prefix: &str) -> Result<Table, String> {
                Ok(Table { $( $sym: symbol(lib, prefix, stringify!($sym))?, )* })
            }
        }

        $(
            /// Forwarded to the provider chosen at run time (see the module docs).
            ///
            /// # Safety
            /// The CBLAS/LAPACK contract of the symbol of the same name.
            #[unsafe(no_mangle)]
            pub unsafe extern "C" fn $sym($($arg: $ty),*) {
                unsafe { (provider().table.$sym)($($arg),*) }
            }
        )*
    };
}

// Exactly the symbols rlx-cpu 0.2.19 references, with its own declarations (src/blas.rs there).
forwarders! {
    cblas_sgemm(order: i32, ta: i32, tb: i32, m: i32, n: i32, k: i32, alpha: f32, a: *const f32,
        lda: i32, b: *const f32, ldb: i32, beta: f32, c: *mut f32, ldc: i32);
    cblas_dgemm(order: i32, ta: i32, tb: i32, m: i32, n: i32, k: i32, alpha: f64, a: *const f64,
        lda: i32, b: *const f64, ldb: i32, beta: f64, c: *mut f64, ldc: i32);
    cblas_sgemv(order: i32, trans: i32, m: i32, n: i32, alpha: f32, a: *const f32, lda: i32,
        x: *const f32, incx: i32, beta: f32, y: *mut f32, incy: i32);
    cblas_sger(order: i32, m: i32, n: i32, alpha: f32, x: *const f32, incx: i32, y: *const f32,
        incy: i32, a: *mut f32, lda: i32);
    cblas_sscal(n: i32, alpha: f32, x: *mut f32, incx: i32);
    cblas_dtrsm(order: i32, side: i32, uplo: i32, ta: i32, diag: i32, m: i32, n: i32, alpha: f64,
        a: *const f64, lda: i32, b: *mut f64, ldb: i32);
    dgesv_(n: *const i32, nrhs: *const i32, a: *mut f64, lda: *const i32, ipiv: *mut i32,
        b: *mut f64, ldb: *const i32, info: *mut i32);
    sgesv_(n: *const i32, nrhs: *const i32, a: *mut f32, lda: *const i32, ipiv: *mut i32,
        b: *mut f32, ldb: *const i32, info: *mut i32);
    dpotrf_(uplo: *const i8, n: *const i32, a: *mut f64, lda: *const i32, info: *mut i32);
    dgetrf_(m: *const i32, n: *const i32, a: *mut f64, lda: *const i32, ipiv: *mut i32,
        info: *mut i32);
    dsyevd_(jobz: *const i8, uplo: *const i8, n: *const i32, a: *mut f64, lda: *const i32,
        w: *mut f64, work: *mut f64, lwork: *const i32, iwork: *mut i32, liwork: *const i32,
        info: *mut i32);
    dgeqrf_(m: *const i32, n: *const i32, a: *mut f64, lda: *const i32, tau: *mut f64,
        work: *mut f64, lwork: *const i32, info: *mut i32);
    dorgqr_(m: *const i32, n: *const i32, k: *const i32, a: *mut f64, lda: *const i32,
        tau: *const f64, work: *mut f64, lwork: *const i32, info: *mut i32);
    dgesdd_(jobz: *const i8, m: *const i32, n: *const i32, a: *mut f64, lda: *const i32,
        s: *mut f64, u: *mut f64, ldu: *const i32, vt: *mut f64, ldvt: *const i32,
        work: *mut f64, lwork: *const i32, iwork: *mut i32, info: *mut i32);
}

struct Provider {
    info: BlasInfo,
    table: Table,
    _lib: libloading::Library,
}

static PROVIDER: OnceLock<Result<Provider, String>> = OnceLock::new();

fn symbol<T: Copy>(lib: &libloading::Library, prefix: &str, name: &str) -> Result<T, String> {
    let full = format!("{prefix}{name}");
    // SAFETY: the type is the CBLAS/LAPACK signature of `name` (the forwarders' declarations).
    unsafe { lib.get::<T>(full.as_bytes()) }
        .map(|s| *s)
        .map_err(|e| format!("{full} not found: {e}"))
}

fn provider() -> &'static Provider {
    match PROVIDER.get_or_init(load) {
        Ok(p) => p,
        Err(why) => {
            // A BLAS call cannot return an error; Python asks `info()` first and raises there.
            eprintln!("rlx-torch-import: no BLAS provider: {why}");
            std::process::abort()
        }
    }
}

/// Load the provider now (if not yet) and say which it is; `Err` says why none could be loaded.
pub fn info() -> Result<BlasInfo, String> {
    PROVIDER
        .get_or_init(load)
        .as_ref()
        .map(|p| p.info.clone())
        .map_err(Clone::clone)
}

/// The name `auto` picks on this CPU, in order of preference.
pub fn auto_order() -> (&'static [&'static str], String) {
    let vendor = cpu_vendor();
    let order: &'static [&'static str] = if vendor == "GenuineIntel" {
        &["mkl", "openblas", "system"]
    } else {
        &["openblas", "system"]
    };
    (order, vendor)
}

fn cpu_vendor() -> String {
    #[cfg(target_arch = "x86_64")]
    {
        // CPUID leaf 0 (the vendor string) exists on every x86_64 CPU.
        let r = std::arch::x86_64::__cpuid(0);
        let bytes: Vec<u8> = [r.ebx, r.edx, r.ecx]
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        std::env::consts::ARCH.to_string()
    }
}

fn env_or_baked(run_time: &str, baked: Option<&'static str>) -> Option<String> {
    std::env::var(run_time)
        .ok()
        .filter(|s| !s.is_empty())
        .or(baked.map(str::to_string))
}

/// Where a named provider's library is (None: not installed / not known).
fn location(name: &str) -> Option<String> {
    match name {
        "mkl" => env_or_baked("RTI_BLAS_MKL", option_env!("RTI_BLAS_MKL")),
        "openblas" => env_or_baked("RTI_BLAS_OPENBLAS", option_env!("RTI_BLAS_OPENBLAS")),
        "system" => Some("libopenblas.so.0".to_string()),
        _ => None,
    }
}

fn load() -> Result<Provider, String> {
    let wanted = std::env::var("RTI_BLAS").unwrap_or_default();
    let wanted = if wanted.is_empty() {
        "auto".to_string()
    } else {
        wanted
    };
    if wanted == "auto" {
        let (order, vendor) = auto_order();
        let mut tried = Vec::new();
        for name in order {
            match location(name)
                .ok_or_else(|| "not installed".to_string())
                .and_then(|p| open(name, &p))
            {
                Ok(mut p) => {
                    p.info.chosen_by = format!("auto ({vendor})");
                    return Ok(p);
                }
                Err(why) => tried.push(format!("{name}: {why}")),
            }
        }
        return Err(format!(
            "RTI_BLAS=auto found none of them ({})",
            tried.join("; ")
        ));
    }
    let (name, path) = if PROVIDERS.contains(&wanted.as_str()) {
        let path = location(&wanted).ok_or_else(|| {
            format!(
                "RTI_BLAS={wanted}: its library is not installed (RTI_BLAS_{} unset)",
                wanted.to_uppercase()
            )
        })?;
        (wanted.clone(), path)
    } else if wanted.contains('/') {
        ("custom".to_string(), wanted.clone())
    } else {
        return Err(format!(
            "RTI_BLAS={wanted:?}: expected one of {PROVIDERS:?} or a path to a shared library"
        ));
    };
    let mut p = open(&name, &path).map_err(|why| format!("RTI_BLAS={wanted}: {why}"))?;
    p.info.chosen_by = format!("RTI_BLAS={wanted}");
    Ok(p)
}

fn open(name: &str, path: &str) -> Result<Provider, String> {
    // SAFETY: loading a BLAS runs its initializers, which is what linking it would do.
    let lib = unsafe { libloading::Library::new(path) }
        .map_err(|e| format!("cannot load {path}: {e}"))?;
    let prefix = if name == "openblas" { "scipy_" } else { "" };
    let detail = if name == "mkl" {
        mkl_sequential(&lib)?
    } else {
        openblas_single(&lib, prefix)?
    };
    let table = Table::resolve(&lib, prefix).map_err(|e| format!("{path}: {e}"))?;
    let info = BlasInfo {
        provider: name.to_string(),
        path: path.to_string(),
        detail,
        chosen_by: String::new(),
    };
    Ok(Provider {
        info,
        table,
        _lib: lib,
    })
}

/// MKL: the sequential threading layer and the LP64 interface (32-bit integers, as rlx-cpu
/// declares them), set before any other MKL call; returns MKL's version string.
fn mkl_sequential(lib: &libloading::Library) -> Result<String, String> {
    let threading: unsafe extern "C" fn(i32) -> i32 = symbol(lib, "", "MKL_Set_Threading_Layer")?;
    let interface: unsafe extern "C" fn(i32) -> i32 = symbol(lib, "", "MKL_Set_Interface_Layer")?;
    let version: unsafe extern "C" fn(*mut u8, i32) = symbol(lib, "", "MKL_Get_Version_String")?;
    let mut buf = [0u8; 256];
    // SAFETY: documented MKL service functions; 1 = MKL_THREADING_SEQUENTIAL, 0 = MKL_INTERFACE_LP64.
    unsafe {
        threading(1);
        interface(0);
        version(buf.as_mut_ptr(), buf.len() as i32);
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    Ok(String::from_utf8_lossy(&buf[..end]).trim().to_string())
}

/// OpenBLAS: one thread (RLX parallelizes around it); returns its build config and kernel family.
fn openblas_single(lib: &libloading::Library, prefix: &str) -> Result<String, String> {
    let threads: unsafe extern "C" fn(i32) = symbol(lib, prefix, "openblas_set_num_threads")?;
    let config: unsafe extern "C" fn() -> *const std::ffi::c_char =
        symbol(lib, prefix, "openblas_get_config")?;
    let core: unsafe extern "C" fn() -> *const std::ffi::c_char =
        symbol(lib, prefix, "openblas_get_corename")?;
    // SAFETY: OpenBLAS's own service functions; the strings are static in the library.
    unsafe {
        threads(1);
        let text = |p: *const std::ffi::c_char| {
            if p.is_null() {
                String::new()
            } else {
                std::ffi::CStr::from_ptr(p)
                    .to_string_lossy()
                    .trim()
                    .to_string()
            }
        };
        Ok(format!("{} ({} kernels)", text(config()), text(core())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sgemm_through_the_chosen_provider() {
        let info = info().expect("a BLAS provider loads (at least the system OpenBLAS)");
        assert!(!info.path.is_empty());
        // [2x3] x [3x2]
        let a = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
        let b = [7.0f32, 8.0, 9.0, 10.0, 11.0, 12.0];
        let mut c = [0.0f32; 4];
        unsafe {
            cblas_sgemm(
                101,
                111,
                111,
                2,
                2,
                3,
                1.0,
                a.as_ptr(),
                3,
                b.as_ptr(),
                2,
                0.0,
                c.as_mut_ptr(),
                2,
            )
        };
        assert_eq!(c, [58.0, 64.0, 139.0, 154.0]);
    }

    #[test]
    fn auto_prefers_a_provider_per_vendor() {
        let (order, vendor) = auto_order();
        assert_eq!(order.last(), Some(&"system"));
        assert_eq!(order.first() == Some(&"mkl"), vendor == "GenuineIntel");
    }
}
