"""Per-node budget classes are declared on the registration (`@lowers(..., kind=...)`) and
`verify.nodes.op_kind` reads them: for every registered op and dtype it answers as the sets it
replaced did (frozen below, as they were in verify/nodes.py)."""

from __future__ import annotations

import pytest

from rlx_torch_import.lower import REGISTRY
from rlx_torch_import.lower.registry import KINDS, lowers
from rlx_torch_import.verify.nodes import op_kind

# fmt: off
_MOVEMENT = {
    "view", "_unsafe_view", "reshape", "permute", "transpose", "t", "expand", "slice", "select", "cat", "stack",
    "clone", "index", "gather", "embedding", "squeeze", "unsqueeze", "flatten", "split", "split_with_sizes",
    "narrow", "constant_pad_nd", "alias", "contiguous", "unfold", "as_strided", "as_strided_copy", "index_select",
    "repeat", "roll", "flip", "chunk", "unbind", "where", "detach", "lift_fresh_copy", "expand_copy", "view_copy",
    "permute_copy", "unsqueeze_copy", "squeeze_copy", "slice_copy", "select_copy", "t_copy", "transpose_copy",
    "max_pool2d", "max_pool2d_with_indices", "max_pool3d", "max_pool1d", "item", "_local_scalar_dense", "masked_fill",
    "full", "zeros", "ones", "empty", "zeros_like", "ones_like", "full_like", "new_zeros", "new_ones", "fill",
    "tril", "triu", "relu", "index_put", "scatter", "pad", "reflection_pad1d", "reflection_pad2d",
    "replication_pad1d", "replication_pad2d", "pixel_shuffle", "pixel_unshuffle", "channel_shuffle",
}
_CONTRACTION = {
    "mm", "bmm", "addmm", "matmul", "linear", "baddbmm", "addbmm", "convolution", "conv1d", "conv2d", "conv3d",
    "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "_convolution", "einsum", "_int_mm", "addmv", "mv",
    "dot", "tensordot", "scaled_dot_product_attention", "_scaled_dot_product_flash_attention_for_cpu",
}
_REDUCTION = {
    "sum", "mean", "var", "std", "var_mean", "std_mean", "prod", "norm", "linalg_vector_norm", "softmax", "_softmax",
    "log_softmax", "_log_softmax", "logsumexp", "cumsum", "cumprod", "logcumsumexp", "layer_norm",
    "native_layer_norm", "group_norm", "native_group_norm", "batch_norm", "_native_batch_norm_legit_no_training",
    "rms_norm", "avg_pool1d", "avg_pool2d", "avg_pool3d", "adaptive_avg_pool1d", "adaptive_avg_pool2d",
    "adaptive_avg_pool3d", "mse_loss", "amax", "amin", "max", "min", "_log_softmax_backward_data", "cross_entropy",
    "nll_loss_forward", "upsample_bilinear2d", "upsample_bicubic2d", "grid_sampler_2d", "_linalg_det", "linalg_det",
}
# fmt: on
_FLOATS = {"float64", "float32", "float16", "bfloat16"}
DTYPES = ("float32", "float16", "bfloat16", "float64", "int64", "bool")


def _old_op_kind(target: str, dtype: str) -> str:
    """verify.nodes.op_kind before the kinds moved onto the registrations."""
    if dtype not in _FLOATS:
        return "exact"
    packet = target.split(".")[1] if target.startswith(("aten.", "prims.")) else target
    packet = packet.rstrip("_") if packet not in ("_softmax", "_log_softmax") else packet
    if packet in _MOVEMENT:
        return "movement"
    if packet in _CONTRACTION:
        return "contraction"
    if packet in _REDUCTION:
        return "reduction"
    return "elementwise"


# Ops registered after the sets were frozen, whose kind the sets' default (elementwise) does not give.
_DECLARED_SINCE = {
    "quantized_decomposed.choose_qparams.tensor": "reduction",  # min and max of the whole input
    "quantized_decomposed.choose_qparams_symmetric.tensor": "reduction",
    # value-exact (issue 38): judged bit for bit, locally and where their inputs are exactly known
    "aten.round.default": "exact",
    "aten.floor.default": "exact",
    "aten.ceil.default": "exact",
    "aten.trunc.default": "exact",
    "aten.sign.default": "exact",
    "aten.neg.default": "exact",
    "aten.abs.default": "exact",
    "aten.fix.default": "exact",
    "aten.frac.default": "exact",
    "aten.sgn.default": "exact",
    "aten.round.decimals": "exact",
    "aten.special_round.default": "exact",
    # uninitialized memory: no value to judge bit for bit (eager torch's is whatever the memory held)
    "aten.empty.memory_format": "elementwise",
    # issue 39: complex numbers as float pairs, FFT, size stages, ties, bucketize/searchsorted
    "aten._conj.default": "exact",
    "aten._conj_physical.default": "exact",
    "aten._fft_c2c.default": "reduction",
    "aten._fft_c2r.default": "reduction",
    "aten._fft_r2c.default": "reduction",
    "aten._neg_view.default": "exact",
    "aten._unique2.default": "movement",
    "aten.argwhere.default": "movement",
    "aten.bucketize.Scalar": "exact",
    "aten.bucketize.Tensor": "exact",
    "aten.complex.default": "movement",
    "aten.conj_physical.default": "exact",
    "aten.imag.default": "movement",
    "aten.kthvalue.default": "movement",
    "aten.masked_select.default": "movement",
    "aten.median.dim": "movement",
    "aten.nanmedian.dim": "movement",
    "aten.nonzero.default": "movement",
    "aten.real.default": "movement",
    "aten.repeat_interleave.self_Tensor": "movement",
    "aten.resolve_conj.default": "movement",
    "aten.resolve_neg.default": "movement",
    "aten.searchsorted.Scalar": "exact",
    "aten.searchsorted.Tensor": "exact",
    "aten.view_as_complex.default": "movement",
    "aten.view_as_real.default": "movement",
    "prims.fft_c2c.default": "reduction",
    "prims.fft_c2r.default": "reduction",
    "prims.fft_r2c.default": "reduction",
}


def test_op_kind_reads_the_registry_as_the_old_sets_answered() -> None:
    differ = [
        (target, dtype, _old_op_kind(target, dtype), op_kind(target, dtype))
        for target in sorted(REGISTRY)
        for dtype in DTYPES
        if target not in _DECLARED_SINCE and _old_op_kind(target, dtype) != op_kind(target, dtype)
    ]
    assert not differ, differ


def test_ops_declared_since_read_their_declared_kind() -> None:
    for target, kind in _DECLARED_SINCE.items():
        assert op_kind(target, "float32") == kind and op_kind(target, "int64") == "exact", target


def test_every_registration_declares_a_known_kind() -> None:
    assert {low.kind for low in REGISTRY.values()} <= set(KINDS)


def test_an_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="kind"):
        lowers("aten.test_only.default", kind="matmul")
