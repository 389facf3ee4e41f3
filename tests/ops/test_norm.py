"""Parity samples of normalization (lower/ops/norm.py): layer, group, RMS and batch norm in eval mode (1-D
to 3-D, float64, half), batch norm in training mode (batch statistics, saved mean/rstd, running statistics
updated in place, from inputs or registered buffers), and native_layer_norm's statistics.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from _samples import LEVELS, A, Fn, Sample, check_op_sample, of_inputs, r, sample_ids

_GEN = torch.Generator().manual_seed(11)


def _r(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=_GEN)


def _bn_train(x: torch.Tensor, affine: bool, momentum: float) -> tuple:
    """_native_batch_norm_legit in training mode on clones of the running stats, which it updates in place
    (clones, so the example inputs stay as they are); returns out, save_mean, save_rstd and the new stats."""
    c = x.shape[1]

    def fn(x_: torch.Tensor, rm: torch.Tensor, rv: torch.Tensor, *wb: torch.Tensor) -> tuple[torch.Tensor, ...]:
        rm, rv = rm.clone(), rv.clone()
        w, b = wb if wb else (None, None)
        out = A._native_batch_norm_legit.default(x_, w, b, rm, rv, True, momentum, 1e-5)
        return (*out, rm, rv * 2)  # a later read of the updated variance

    return of_inputs(fn), (x, _r(c), _r(c).abs() + 0.5, *((_r(c), _r(c)) if affine else ()))


class _BnBuffers(nn.Module):
    """F.batch_norm in training mode on registered running-stat buffers (updated in place by the op)."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.register_buffer("rm", torch.zeros(c))
        self.register_buffer("rv", torch.ones(c))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.batch_norm(x, self.rm, self.rv, training=True, momentum=0.2) * 2


def _bn3d(c: int, dtype: torch.dtype = torch.float32) -> nn.Module:
    """Eval BatchNorm3d with non-trivial running statistics and affine parameters."""
    bn = nn.BatchNorm3d(c)
    with torch.no_grad():
        bn.running_mean.copy_(_r(c) * 0.5)
        bn.running_var.copy_(torch.rand(c, generator=_GEN) + 0.5)
        bn.weight.copy_(torch.rand(c, generator=_GEN) + 0.5)
        bn.bias.copy_(_r(c) * 0.2)
    return bn.to(dtype).eval()


torch.manual_seed(0)
SAMPLES: list[Sample] = [
    ("layer_norm_2d_shape_no_affine", Fn(lambda m, a: F.layer_norm(a, (3, 4))), (r(2, 3, 4),)),
    ("layer_norm_eps", Fn(lambda m, a: F.layer_norm(a, (4,), m.g, m.b, eps=1e-2), g=r(4), b=r(4)), (r(3, 4),)),
    ("batch_norm_1d", nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6)), (r(5, 4),)),
    ("group_norm", nn.GroupNorm(2, 6), (r(2, 6, 5, 4),)),
    ("group_norm_3d_input", nn.GroupNorm(3, 6, affine=False), (r(2, 6, 7),)),
    ("rms_norm", nn.RMSNorm(8, eps=1e-6), (r(2, 3, 8),)),
    # training-mode batch norm: batch statistics, saved mean/rstd, running statistics updated in place
    ("batch_norm_legit_train", *_bn_train(_r(3, 4, 5, 2) * 2 + 1, True, 0.1)),
    ("batch_norm_legit_train_1d_no_affine", *_bn_train(_r(4, 3, 6), False, 0.3)),
    ("batch_norm_legit_train_half_input", *_bn_train(_r(4, 2, 3, 3).half(), True, 0.1)),
    (
        "batch_norm_legit_eval",
        of_inputs(lambda x, rm, rv: A._native_batch_norm_legit.default(x, None, None, rm, rv, False, 0.1, 1e-3)[0]),
        (_r(2, 3, 4), _r(3), _r(3).abs() + 0.5),
    ),
    (
        "batch_norm_legit_no_stats",
        of_inputs(lambda x, w, b: A._native_batch_norm_legit.no_stats(x, w, b, True, 0.1, 1e-5)),
        (_r(6, 4) * 3 - 1, _r(4), _r(4)),
    ),
    (
        "batch_norm_functional_train",
        of_inputs(
            lambda x, rm, rv: (F.batch_norm(x, rm := rm.clone(), rv := rv.clone(), training=True, momentum=0.4), rm, rv)
        ),
        (_r(2, 3, 4, 4), _r(3), _r(3).abs() + 0.5),
    ),
    ("batch_norm_train_buffers", _BnBuffers(3), (_r(4, 3, 5),)),
    (
        "layer_norm_stats_bfloat16",
        of_inputs(lambda x: A.native_layer_norm.default(x, [3, 5], None, None, 1e-5)),
        (_r(4, 3, 5).bfloat16(),),
    ),
    (
        "float64_norms_conv_pool",
        of_inputs(
            lambda x, w, g, b, m, v: (
                F.conv2d(x, w, padding=1, stride=(1, 2)),
                F.conv2d(x, w[:2].reshape(4, 2, 3, 3), groups=2, padding=2, dilation=2),
                F.batch_norm(x, m, v, g, b, eps=1e-3),
                F.group_norm(x, 2, g, b),
                F.max_pool2d(x, 2),
                F.avg_pool2d(x, 3, stride=2, padding=1),
                F.layer_norm(x, (7,)),
            )
        ),
        (
            torch.randn(2, 4, 6, 7).double(),
            torch.randn(3, 4, 3, 3).double(),
            torch.rand(4).double() + 0.5,
            torch.randn(4).double(),
            torch.randn(4).double(),
            torch.rand(4).double() + 0.5,
        ),
    ),
    # 3-D batch norm (eval)
    ("batch_norm3d", _bn3d(4), (_r(2, 4, 3, 4, 5),)),
    ("batch_norm3d_float64", _bn3d(3, torch.float64), (_r(1, 3, 2, 4, 3).double(),)),
]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize(("name", "module", "inputs"), SAMPLES, ids=sample_ids(SAMPLES))
def test_op_sample(name: str, module: nn.Module, inputs: tuple[torch.Tensor, ...], level: str, tmp_path) -> None:
    check_op_sample(name, module, inputs, level, tmp_path)
