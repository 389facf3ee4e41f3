/// No sweep points: every dim is static.
pub const SWEEP: &[&str] = &[];
