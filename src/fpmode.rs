//! Flush-to-zero / denormals-are-zero for RLX's CPU threads (x86-64 MXCSR).
//!
//! A subnormal operand makes x86 floating-point units take a microcode assist,
//! ~100x slower per operation. RLX's vector `exp` gives ~1e-39 (subnormal) rather
//! than 0 for very negative inputs, so attention probabilities of masked keys are
//! subnormal and the matmul after them slows down (docs/design.md). The mode is
//! per thread: `set` applies it to the calling thread and to every thread of
//! RLX's Rayon pool (the global pool, which RLX builds). Other platforms: no-op.

/// MXCSR bits: FTZ (bit 15) flushes subnormal results, DAZ (bit 6) reads subnormal inputs as zero.
#[cfg(target_arch = "x86_64")]
const FTZ_DAZ: u32 = (1 << 15) | (1 << 6);

#[cfg(target_arch = "x86_64")]
fn read_csr() -> u32 {
    let mut csr: u32 = 0;
    // SAFETY: stmxcsr stores the 32-bit MXCSR register to the given address.
    unsafe { std::arch::asm!("stmxcsr [{}]", in(reg) &mut csr, options(nostack)) };
    csr
}

#[cfg(target_arch = "x86_64")]
fn write_csr(csr: u32) {
    // SAFETY: ldmxcsr loads MXCSR; only the FTZ/DAZ bits are changed by callers.
    unsafe { std::arch::asm!("ldmxcsr [{}]", in(reg) &csr, options(nostack, readonly)) };
}

/// Set (or clear) FTZ+DAZ on this thread; returns the previous MXCSR to restore with [`restore`].
#[cfg(target_arch = "x86_64")]
pub fn set_this_thread(on: bool) -> u32 {
    let old = read_csr();
    write_csr(if on { old | FTZ_DAZ } else { old & !FTZ_DAZ });
    old
}

/// Put back an MXCSR saved by [`set_this_thread`].
#[cfg(target_arch = "x86_64")]
pub fn restore(csr: u32) {
    write_csr(csr);
}

/// Set (or clear) FTZ+DAZ on every thread of the global Rayon pool (RLX's workers). The pool's
/// mode is remembered, so only a change costs a broadcast (a few microseconds per pool thread).
/// Callers go through [`enter_pool`], which never changes the mode under a run in flight.
#[cfg(target_arch = "x86_64")]
fn set_pool(on: bool) {
    use std::sync::atomic::{AtomicU8, Ordering};
    // 0: never set, 1: off, 2: on.
    static POOL_MODE: AtomicU8 = AtomicU8::new(0);
    let want = if on { 2 } else { 1 };
    if POOL_MODE.swap(want, Ordering::SeqCst) == want {
        return;
    }
    rlx_cpu::pool::num_threads(); // RLX builds its pool (sized by RLX_WORKERS) first, never Rayon's default
    rayon::broadcast(|_| {
        set_this_thread(on);
    });
}

/// Which mode RLX's pool threads are in while runs are in flight, and how many runs are.
struct PoolState {
    on: bool,
    running: usize,
}

static POOL_STATE: std::sync::Mutex<PoolState> = std::sync::Mutex::new(PoolState {
    on: false,
    running: 0,
});
static POOL_IDLE: std::sync::Condvar = std::sync::Condvar::new();

/// A run in flight on RLX's pool with one denormal mode; dropping it ends the run.
pub struct PoolRun;

/// Put RLX's pool threads in mode `on` for a run and hold it there until the returned
/// [`PoolRun`] drops. The pool is shared by every model in the process, so runs that want the
/// same mode overlap freely, and a run that wants the other mode waits until the runs in
/// flight end (models run from several threads keep their own mode, bit for bit).
pub fn enter_pool(on: bool) -> PoolRun {
    let mut state = POOL_STATE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    while state.running > 0 && state.on != on {
        state = POOL_IDLE
            .wait(state)
            .unwrap_or_else(std::sync::PoisonError::into_inner);
    }
    if state.running == 0 {
        set_pool(on);
        state.on = on;
    }
    state.running += 1;
    PoolRun
}

impl Drop for PoolRun {
    fn drop(&mut self) {
        let mut state = POOL_STATE
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        state.running -= 1;
        if state.running == 0 {
            POOL_IDLE.notify_all();
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
pub fn set_this_thread(_on: bool) -> u32 {
    0
}

#[cfg(not(target_arch = "x86_64"))]
pub fn restore(_csr: u32) {}

#[cfg(not(target_arch = "x86_64"))]
fn set_pool(_on: bool) {}

#[cfg(test)]
mod tests {
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn flushes_subnormal_results_on_this_thread_and_restores() {
        let tiny = std::hint::black_box(1e-30f32);
        let old = super::set_this_thread(true);
        let flushed = std::hint::black_box(tiny) * std::hint::black_box(1e-10f32);
        super::restore(old);
        let kept = std::hint::black_box(tiny) * std::hint::black_box(1e-10f32);
        assert_eq!(flushed, 0.0);
        assert!(kept > 0.0 && kept < f32::MIN_POSITIVE);
    }
}
