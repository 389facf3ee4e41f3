"""Parity samples for training-time and backward ops and three activations; tests/test_ops.py runs them.

Backward and training-mode overloads never appear in an eval/no_grad export of a model, so these
samples call the ATen overload explicitly (`torch.ops.aten.<op>.<overload>(...)`) and export records it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from sample_utils import of_inputs as _Fn

A = torch.ops.aten
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

    return _Fn(fn), (_r(*forward.shape), x_, w_)


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

    return _Fn(fn), (dy, x, mean, rstd, *params)


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

    return _Fn(fn), (dy, x, mean, rstd, *params)


def _emb_bwd(idx: torch.Tensor, num_weights: int, width: int, padding_idx: int, scale: bool) -> tuple:
    """embedding_dense_backward of a [*idx, width] gradient."""

    def fn(dy: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
        return A.embedding_dense_backward.default(dy, i, num_weights, padding_idx, scale)

    return _Fn(fn), (_r(*idx.shape, width), idx)


def _bn_train(x: torch.Tensor, affine: bool, momentum: float) -> tuple:
    """_native_batch_norm_legit in training mode on clones of the running stats, which it updates in place
    (clones, so the example inputs stay as they are); returns out, save_mean, save_rstd and the new stats."""
    c = x.shape[1]

    def fn(x_: torch.Tensor, rm: torch.Tensor, rv: torch.Tensor, *wb: torch.Tensor) -> tuple[torch.Tensor, ...]:
        rm, rv = rm.clone(), rv.clone()
        w, b = wb if wb else (None, None)
        out = A._native_batch_norm_legit.default(x_, w, b, rm, rv, True, momentum, 1e-5)
        return (*out, rm, rv * 2)  # a later read of the updated variance

    return _Fn(fn), (x, _r(c), _r(c).abs() + 0.5, *((_r(c), _r(c)) if affine else ()))


class _BnBuffers(nn.Module):
    """F.batch_norm in training mode on registered running-stat buffers (updated in place by the op)."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.register_buffer("rm", torch.zeros(c))
        self.register_buffer("rv", torch.ones(c))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.batch_norm(x, self.rm, self.rv, training=True, momentum=0.2) * 2


def _bag(mode: int, offsets: list[int], n: int, **kw: object) -> tuple:
    """_embedding_bag over a [10, 3] table with `n` indices; offsets is a graph input (runtime bag bounds)."""
    last, pad, weighted = bool(kw.get("last", False)), int(kw.get("pad", -1)), bool(kw.get("weighted", False))
    dtype = kw.get("dtype", torch.float32)

    def fn(w: torch.Tensor, i: torch.Tensor, o: torch.Tensor, *psw: torch.Tensor) -> torch.Tensor:
        return A._embedding_bag.default(w, i, o, False, mode, False, psw[0] if psw else None, last, pad)[0]

    idx = torch.randint(0, 10, (n,), generator=_GEN)
    if pad >= 0:
        idx[::3] = pad
    extra = (_r(n).to(dtype),) if weighted else ()
    return _Fn(fn), (_r(10, 3).to(dtype), idx, torch.tensor(offsets), *extra)


SAMPLES: list[tuple[str, nn.Module, tuple[torch.Tensor, ...]]] = [
    # activations: defaults (RLX Elu) and every scalar argument
    ("elu_default", nn.ELU(), (_r(3, 8) * 3,)),
    ("elu_alpha_scale_input_scale", _Fn(lambda x: A.elu.default(x, 0.5, 1.2, 0.8)), (_r(3, 8) * 3,)),
    ("selu", nn.SELU(), (_r(4, 6) * 3,)),
    ("hardtanh_default", nn.Hardtanh(), (_r(3, 8) * 2,)),
    ("hardtanh_bounds", _Fn(lambda x: F.hardtanh(x, -0.5, 1.5)), (_r(3, 8) * 2,)),
    ("relu6", nn.ReLU6(), (_r(3, 8) * 5,)),
    ("leaky_relu_default", nn.LeakyReLU(), (_r(3, 8),)),
    ("leaky_relu_slope", _Fn(lambda x: F.leaky_relu(x, 0.3)), (_r(2, 3, 4),)),
    ("elu_leaky_float64", _Fn(lambda x: F.elu(x, 0.7) + F.leaky_relu(x, 0.1)), (_r(3, 5).double() * 3,)),
]

SAMPLES += [
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
    # integer scatter-add (torch's core decomposition of scale_grad_by_freq counts with it): wide values, int32
    (
        "index_put_int_accumulate",
        _Fn(lambda a, i, v: a.index_put((i,), v, accumulate=True)),
        (
            torch.arange(12).reshape(6, 2) * (1 << 40) - 7,
            torch.tensor([0, 2, 2, 5, 0, -1]),
            torch.randint(-(1 << 45), 1 << 45, (6, 2), generator=_GEN),
        ),
    ),
    (
        "index_put_int32_accumulate_2d_index",
        _Fn(lambda a, i, j, v: a.index_put((i, j), v, accumulate=True)),
        (
            torch.zeros(4, 3, dtype=torch.int32),
            torch.tensor([1, 1, 3]),
            torch.tensor([2, 2, 0]),
            torch.tensor([5, -9, 4], dtype=torch.int32),
        ),
    ),
    # deterministic dropout: eval (train=False), p = 0 in training, p = 1 in training (train=None means training)
    ("native_dropout_eval", _Fn(lambda x: A.native_dropout.default(x, 0.5, False)), (_r(3, 4),)),
    ("native_dropout_p0_train", _Fn(lambda x: A.native_dropout.default(x * 2, 0.0, True)), (_r(2, 3, 4),)),
    ("native_dropout_p1_train", _Fn(lambda x: A.native_dropout.default(x, 1.0, None)), (_r(5, 2),)),
    ("dropout_p0_train", _Fn(lambda x: F.dropout(x, 0.0, training=True) + 1), (_r(4, 3),)),
    # training-mode batch norm: batch statistics, saved mean/rstd, running statistics updated in place
    ("batch_norm_legit_train", *_bn_train(_r(3, 4, 5, 2) * 2 + 1, True, 0.1)),
    ("batch_norm_legit_train_1d_no_affine", *_bn_train(_r(4, 3, 6), False, 0.3)),
    ("batch_norm_legit_train_half_input", *_bn_train(_r(4, 2, 3, 3).half(), True, 0.1)),
    (
        "batch_norm_legit_eval",
        _Fn(lambda x, rm, rv: A._native_batch_norm_legit.default(x, None, None, rm, rv, False, 0.1, 1e-3)[0]),
        (_r(2, 3, 4), _r(3), _r(3).abs() + 0.5),
    ),
    (
        "batch_norm_legit_no_stats",
        _Fn(lambda x, w, b: A._native_batch_norm_legit.no_stats(x, w, b, True, 0.1, 1e-5)),
        (_r(6, 4) * 3 - 1, _r(4), _r(4)),
    ),
    (
        "batch_norm_functional_train",
        _Fn(
            lambda x, rm, rv: (F.batch_norm(x, rm := rm.clone(), rv := rv.clone(), training=True, momentum=0.4), rm, rv)
        ),
        (_r(2, 3, 4, 4), _r(3), _r(3).abs() + 0.5),
    ),
    ("batch_norm_train_buffers", _BnBuffers(3), (_r(4, 3, 5),)),
    # embedding bags: sum/mean/max, empty bags, include_last_offset, per-sample weights, padding_idx
    ("embedding_bag_sum_empty_bag", *_bag(0, [0, 3, 3, 5], 8)),
    ("embedding_bag_sum_weighted_last", *_bag(0, [0, 2, 6, 7], 9, last=True, weighted=True)),
    ("embedding_bag_mean_padding", *_bag(1, [0, 1, 4, 4], 7, pad=2)),
    ("embedding_bag_max_padding_last", *_bag(2, [0, 3, 3, 6], 6, last=True, pad=5)),
    ("embedding_bag_max_empty_first", *_bag(2, [0, 0, 4], 7)),
    ("embedding_bag_mean_empty_float64", *_bag(1, [0, 0, 4], 7, dtype=torch.float64)),
    ("embedding_bag_sum_weighted_float64", *_bag(0, [0, 5], 7, weighted=True, dtype=torch.float64)),
    ("embedding_bag_module_2d", nn.EmbeddingBag(10, 4, mode="mean"), (torch.randint(0, 10, (3, 4), generator=_GEN),)),
    (
        "embedding_bag_functional_max_pad",
        _Fn(lambda w, i, o: F.embedding_bag(i, w, o, mode="max", padding_idx=1)),
        (_r(6, 5), torch.tensor([1, 0, 1, 3, 5, 1]), torch.tensor([0, 2, 3])),
    ),
    # forward -> backward chains: the backward reads the forward's saved mean/rstd
    (
        "layer_norm_forward_backward_chain",
        _Fn(
            lambda x, dy, w, b: (
                (f := A.native_layer_norm.default(x, [6], w, b, 1e-5)),
                A.native_layer_norm_backward.default(dy, x, [6], f[1], f[2], w, b, [True, True, True]),
            )
        ),
        (_r(4, 3, 6) * 2 + 1, _r(4, 3, 6), _r(6), _r(6)),
    ),
    (
        "layer_norm_stats_bfloat16",
        _Fn(lambda x: A.native_layer_norm.default(x, [3, 5], None, None, 1e-5)),
        (_r(4, 3, 5).bfloat16(),),
    ),
    (
        "group_norm_forward_backward_chain",
        _Fn(
            lambda x, dy, w, b: (
                (f := A.native_group_norm.default(x, w, b, 2, 4, 6, 2, 1e-5)),
                A.native_group_norm_backward.default(dy, x, f[1], f[2], w, 2, 4, 6, 2, [True, True, True]),
            )
        ),
        (_r(2, 4, 2, 3) - 1, _r(2, 4, 2, 3), _r(4), _r(4)),
    ),
]
