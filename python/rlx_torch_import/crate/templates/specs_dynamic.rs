/// The dynamic dims' symbols: RLX symbol number, name, and inclusive range (max None: unbounded).
pub const SYMBOLS: &[Symbol] = &[
@@SYMBOLS@@
];

/// Input axes whose size is `scale * symbol + offset`: (input index, axis, symbol number, scale,
/// offset); the binding is read from them.
pub const SYMBOL_AXES: &[(usize, usize, u32, i64, i64)] = &[
@@AXES@@
];

/// Key prefixes of the sweep points recorded in the reference file (`check_reference_at`).
pub const SWEEP: &[&str] = &[
@@SWEEP@@
];
