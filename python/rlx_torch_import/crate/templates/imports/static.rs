use rlx_ir::DType;
use rlx_runtime::{CompileOptions, CompiledGraph, Device, FusionOptions, Session};
