/// Graph inputs, in call order (PyTorch dtype, and the dtype that carries it into RLX).
pub const INPUTS: &[TensorSpec] = &[
@@INPUTS@@
];

/// Graph outputs, in order.
pub const OUTPUTS: &[TensorSpec] = &[
@@OUTPUTS@@
];

/// Parameters by `state_dict` name, in declaration order, with the dtype the graph computes them in.
pub const PARAMS: &[ParamSpec] = &[
@@PARAMS@@
];

/// Inputs that feed an index, with the range PyTorch allows there: `run` refuses a value outside it.
pub const INDEX_RANGES: &[IndexRange] = &[
@@INDEX_RANGES@@
];

@@SYMBOLIC@@
