use rlx_ir::{DType, Graph};
use rlx_runtime::{CompileOptions, CompiledGraph, Device, FusionOptions, Session};
