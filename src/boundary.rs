//! Which dtypes cross RLX's graph boundary as float32: the one statement of the rule, read by
//! the core's checks (`defects`, `runner`) and exported to Python (`_core.BOUNDARY_NARROW`,
//! `_core.BOUNDARY_HALF`, read by `rlx_torch_import.dtypes`).
//!
//! * Bool and narrow integers: RLX 0.2.19's CPU arena is f32-aliased, so their slots cannot
//!   pass the boundary natively, and several kernels move 1- and 2-byte data with the wrong
//!   width (`defects::KERNEL_DEFECTS`). The importer carries them as F32 (exact for these
//!   ranges) and casts to the dtype as the graph's first step.
//! * Half precision: computes as F32 inside RLX (RLX widens F16/BF16 parameters bound to an
//!   F32 declaration) and is rounded where torch rounds, on the host for outputs.

use rlx_ir::DType;

/// Bool and the integers narrower than 32 bits: carried across the boundary as F32.
pub const NARROW: &[DType] = &[DType::Bool, DType::I8, DType::U8, DType::I16];

/// Half precision: computed (and carried across the boundary) as F32.
pub const HALF: &[DType] = &[DType::F16, DType::BF16];
