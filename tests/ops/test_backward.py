"""Parity samples of the backward ops (lower/ops/backward.py): convolution, layer norm, group norm and
embedding backward (repeated indices, padding_idx, scale_grad_by_freq), alone and chained after their forward.

Backward and training-mode overloads never appear in an eval/no_grad export of a model, so these samples
call the ATen overload explicitly (`torch.ops.aten.<op>.<overload>(...)`) and export records it.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from _samples import LEVELS, A, Sample, check_op_sample, of_inputs, sample_ids

_GEN = torch.Generator().manual_seed(11)


def _r(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=_GEN)


def _conv_bwd(x: tuple[int, ...], w: tuple[int, ...], mask: list[bool], **kw: object) -> tuple:
    """A convolution_backward sample: (dy, x, w) inputs; kw = stride/padding/dilation/groups/transposed."""
    n = len(w) - 2
    s, p, d = (list(kw.get(k, [v] * n)) for k, v in (("stride", 1), ("padding", 0), ("dilation", 1)))
    out_pad, groups = list(kw.get("output_padding", [0] * n)), int(kw.get("groups", 1))
    transposed = bool(kw.get("transposed", False))
    x_, w_ = _r(*x), _r(*w)
    forward = A.convolution.default(x_, w_, None, s, p, d, transposed, out_pad, groups)

    def fn(dy_: torch.Tensor, x_: torch.Tensor, w_: torch.Tensor) -> tuple[torch.Tensor, ...]:
        grads = A.convolution_backward.default(
            dy_, x_, w_, [forward.shape[1]], s, p, d, transposed, out_pad, groups, mask
        )
        return tuple(g for g, wanted in zip(grads, mask, strict=True) if wanted)

    return of_inputs(fn), (_r(*forward.shape), x_, w_)


def _ln_bwd(shape: tuple[int, ...], k: int, affine: bool, mask: list[bool]) -> tuple:
    """native_layer_norm_backward over the last k axes; mean/rstd are inputs computed from x."""
    x, dy = _r(*shape) * 2 + 1, _r(*shape)
    axes = list(range(len(shape) - k, len(shape)))
    mean = x.mean(axes, keepdim=True)
    rstd = (x.var(axes, unbiased=False, keepdim=True) + 1e-5).rsqrt()
    params = (_r(*shape[-k:]), _r(*shape[-k:])) if affine else ()

    def fn(dy_: torch.Tensor, x_: torch.Tensor, m: torch.Tensor, r: torch.Tensor, *wb: torch.Tensor) -> tuple:
        w, b = wb if wb else (None, None)
        grads = A.native_layer_norm_backward.default(dy_, x_, list(shape[-k:]), m, r, w, b, mask)
        return tuple(g for g, wanted in zip(grads, mask, strict=True) if wanted)

    return of_inputs(fn), (dy, x, mean, rstd, *params)


def _gn_bwd(shape: tuple[int, ...], groups: int, affine: bool, mask: list[bool]) -> tuple:
    """native_group_norm_backward; mean/rstd ([N, G]) are inputs computed from x."""
    x, dy = _r(*shape) * 2 - 1, _r(*shape)
    n, c = shape[:2]
    hw = x.numel() // (n * c)
    xg = x.reshape(n, groups, -1)
    mean, rstd = xg.mean(-1), (xg.var(-1, unbiased=False) + 1e-5).rsqrt()
    params = (_r(c),) if affine else ()

    def fn(dy_: torch.Tensor, x_: torch.Tensor, m: torch.Tensor, r: torch.Tensor, *w: torch.Tensor) -> tuple:
        grads = A.native_group_norm_backward.default(dy_, x_, m, r, w[0] if w else None, n, c, hw, groups, mask)
        return tuple(g for g, wanted in zip(grads, mask, strict=True) if wanted)

    return of_inputs(fn), (dy, x, mean, rstd, *params)


def _emb_bwd(idx: torch.Tensor, num_weights: int, width: int, padding_idx: int, scale: bool) -> tuple:
    """embedding_dense_backward of a [*idx, width] gradient."""

    def fn(dy: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
        return A.embedding_dense_backward.default(dy, i, num_weights, padding_idx, scale)

    return of_inputs(fn), (_r(*idx.shape, width), idx)


torch.manual_seed(0)
SAMPLES: list[Sample] = [
    ("conv_backward_2d", *_conv_bwd((2, 3, 7, 6), (4, 3, 3, 3), [True, True, True])),
    (
        "conv_backward_2d_stride_pad_dilation",
        *_conv_bwd((2, 3, 9, 8), (4, 3, 3, 2), [True, True, True], stride=[2, 3], padding=[1, 1], dilation=[2, 1]),
    ),
    (
        "conv_backward_2d_groups",
        *_conv_bwd((1, 4, 8, 7), (6, 2, 3, 3), [True, True, False], stride=[2, 2], padding=[1, 0], groups=2),
    ),
    ("conv_backward_weight_only", *_conv_bwd((2, 2, 6, 6), (3, 2, 2, 2), [False, True, False], stride=[2, 2])),
    (
        "conv_backward_1d",
        *_conv_bwd((2, 4, 11), (6, 2, 3), [True, True, True], stride=[2], padding=[1], dilation=[2], groups=2),
    ),
    (
        "conv_backward_transposed_2d",
        *_conv_bwd(
            (2, 4, 4, 3),
            (4, 3, 3, 2),
            [True, True, True],
            stride=[2, 2],
            padding=[1, 0],
            output_padding=[1, 1],
            groups=2,
            transposed=True,
        ),
    ),
    (
        "conv_backward_transposed_1d_dilation",
        *_conv_bwd(
            (2, 3, 6),
            (3, 2, 3),
            [True, True, True],
            stride=[3],
            padding=[2],
            dilation=[2],
            output_padding=[1],
            transposed=True,
        ),
    ),
    # norm backward from saved statistics
    ("layer_norm_backward", *_ln_bwd((3, 5, 8), 1, True, [True, True, True])),
    ("layer_norm_backward_2_axes", *_ln_bwd((4, 3, 6), 2, True, [True, False, True])),
    ("layer_norm_backward_no_affine", *_ln_bwd((6, 10), 1, False, [True, False, False])),
    ("group_norm_backward", *_gn_bwd((2, 6, 4, 3), 3, True, [True, True, True])),
    ("group_norm_backward_no_weight_1d", *_gn_bwd((3, 4, 5), 2, False, [True, True, True])),
    ("group_norm_backward_weight_only", *_gn_bwd((2, 4, 3, 3), 4, True, [False, True, False])),
    # embedding backward: repeated indices, padding_idx, scale_grad_by_freq
    ("embedding_dense_backward", *_emb_bwd(torch.tensor([[1, 2, 4, 1], [9, 1, 0, 4]]), 10, 3, -1, False)),
    ("embedding_dense_backward_padding", *_emb_bwd(torch.tensor([0, 2, 2, 5, 0, 7]), 8, 4, 0, False)),
    ("embedding_dense_backward_freq", *_emb_bwd(torch.tensor([[3, 1, 3], [3, 6, 1]]), 7, 5, 6, True)),
    # forward -> backward chains: the backward reads the forward's saved mean/rstd
    (
        "layer_norm_forward_backward_chain",
        of_inputs(
            lambda x, dy, w, b: (
                (f := A.native_layer_norm.default(x, [6], w, b, 1e-5)),
                A.native_layer_norm_backward.default(dy, x, [6], f[1], f[2], w, b, [True, True, True]),
            )
        ),
        (_r(4, 3, 6) * 2 + 1, _r(4, 3, 6), _r(6), _r(6)),
    ),
    (
        "group_norm_forward_backward_chain",
        of_inputs(
            lambda x, dy, w, b: (
                (f := A.native_group_norm.default(x, w, b, 2, 4, 6, 2, 1e-5)),
                A.native_group_norm_backward.default(dy, x, f[1], f[2], w, 2, 4, 6, 2, [True, True, True]),
            )
        ),
        (_r(2, 4, 2, 3) - 1, _r(2, 4, 2, 3), _r(4), _r(4)),
    ),
]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize(("name", "module", "inputs"), SAMPLES, ids=sample_ids(SAMPLES))
def test_op_sample(name: str, module: nn.Module, inputs: tuple[torch.Tensor, ...], level: str, tmp_path) -> None:
    check_op_sample(name, module, inputs, level, tmp_path)
