//! The kinds of failure the core reports, and the panic shield every entry point runs under.
//!
//! * [`CoreError::Check`]: the core's own checks refused the input before RLX saw it (a size
//!   past the machine's memory, a dtype or byte length other than declared, an unknown name,
//!   an invalid model file, an op and dtype whose kernel is known to corrupt memory, a symbolic
//!   graph that does not specialize). Python sees `_core.CheckError`, a `ValueError`.
//! * [`CoreError::Rlx`]: RLX failed or panicked on a graph the checks accepted. Python sees
//!   `_core.RlxFailure`, a `RuntimeError`.
//! * [`CoreError::Device`]: the device asked for is not in this build or not on this machine,
//!   or cannot run this graph or input as the budgets need (`device.rs`). Python sees
//!   `_core.DeviceError`, a `RuntimeError`.

use std::cell::RefCell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A failure of a core call; see the module docs for the two kinds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CoreError {
    Check(String),
    Rlx(String),
    Device(String),
}

impl CoreError {
    /// The message, without the kind.
    pub fn message(&self) -> &str {
        match self {
            Self::Check(m) | Self::Rlx(m) | Self::Device(m) => m,
        }
    }

    /// The same kind with `f` applied to the message (e.g. to prefix where it happened).
    pub fn map(self, f: impl FnOnce(String) -> String) -> Self {
        match self {
            Self::Check(m) => Self::Check(f(m)),
            Self::Rlx(m) => Self::Rlx(f(m)),
            Self::Device(m) => Self::Device(f(m)),
        }
    }

    pub fn is_check(&self) -> bool {
        matches!(self, Self::Check(_))
    }
}

impl std::fmt::Display for CoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for CoreError {}

/// Guarded calls in flight (on any thread): while there are any, the panic hook
/// installed by [`install_panic_hook`] keeps the default report off stderr.
static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Where the last panic on this thread happened (`crate/src/file.rs:line`).
    static LAST_PANIC_AT: RefCell<Option<String>> = const { RefCell::new(None) };
}

struct InFlight;

impl InFlight {
    fn enter() -> Self {
        IN_FLIGHT.fetch_add(1, Ordering::SeqCst);
        LAST_PANIC_AT.with(|c| c.borrow_mut().take());
        Self
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        IN_FLIGHT.fetch_sub(1, Ordering::SeqCst);
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_string()
    }
}

/// Run `f`; a panic anywhere in it (RLX's or the core's own) becomes [`CoreError::Rlx`] with the
/// message "RLX panicked while `what`: <the panic's message> (at <where>)", the place given when
/// the panic happened on this thread. (`f`'s own result, an error included, passes through.)
pub fn catch<T>(what: &str, f: impl FnOnce() -> T) -> Result<T, CoreError> {
    let _guard = InFlight::enter();
    catch_unwind(AssertUnwindSafe(f)).map_err(|payload| {
        let at = LAST_PANIC_AT.with(|c| c.borrow_mut().take());
        let at = at.map(|a| format!(" (at {a})")).unwrap_or_default();
        CoreError::Rlx(format!(
            "RLX panicked while {what}: {}{at}",
            panic_message(payload.as_ref())
        ))
    })
}

/// `path` from the crate directory on (`rlx-cpu-0.2.19/src/thunk.rs`), or as is.
fn short_path(path: &str) -> &str {
    let parts: Vec<&str> = path.split('/').collect();
    match parts.iter().rposition(|p| *p == "src") {
        Some(i) if i >= 1 => {
            let start = parts[..i - 1].iter().map(|p| p.len() + 1).sum::<usize>();
            &path[start..]
        }
        _ => path,
    }
}

/// Keep the default panic report (message, "run with RUST_BACKTRACE" note) off stderr while a
/// shielded call is in flight: the panic becomes a Python exception carrying the same message
/// and location, so the report would only repeat it out of order. `RUST_BACKTRACE` set (and not
/// `0`) keeps the default report, backtrace included. Panics outside any core call (none are
/// expected) are reported as before. Installed once, when the Python module loads.
pub fn install_panic_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let at = info
                .location()
                .map(|l| format!("{}:{}", short_path(l.file()), l.line()));
            LAST_PANIC_AT.with(|c| *c.borrow_mut() = at);
            let backtrace = std::env::var_os("RUST_BACKTRACE").is_some_and(|v| v != "0");
            if IN_FLIGHT.load(Ordering::SeqCst) == 0 || backtrace {
                default(info);
            }
        }));
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_an_rlx_error_naming_the_step() {
        let err = catch("running the graph", || {
            let v: Vec<u8> = Vec::new();
            let i = std::hint::black_box(3);
            v[i]
        })
        .unwrap_err();
        assert!(!err.is_check());
        assert!(
            err.message()
                .starts_with("RLX panicked while running the graph: ")
                && err.message().contains("index out of bounds"),
            "{err}"
        );
    }

    #[test]
    fn errors_and_values_pass_through() {
        assert_eq!(catch("x", || 7).unwrap(), 7);
        let inner = catch("x", || Err::<(), _>(CoreError::Check("bad".into()))).unwrap();
        assert_eq!(inner, Err(CoreError::Check("bad".into())));
    }

    #[test]
    fn paths_are_shortened_to_the_crate() {
        assert_eq!(
            short_path(
                "/root/.cargo/registry/src/index.crates.io-1/rlx-cpu-0.2.19/src/thunk/mm.rs"
            ),
            "rlx-cpu-0.2.19/src/thunk/mm.rs"
        );
        assert_eq!(short_path("src/runner.rs"), "src/runner.rs");
    }
}
