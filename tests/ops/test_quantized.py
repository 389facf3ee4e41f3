"""Parity samples of PyTorch's quantize/dequantize ops (lower/ops/quantized.py): the `quantized_decomposed`
ops a PT2E graph (`convert_pt2e`) computes with, per tensor and per channel, int8/uint8/int16 codes, and
the dynamic flow's `choose_qparams`. Codes must equal torch's exactly and dequantized values bit for bit.
"""

from __future__ import annotations

import pytest
import torch
import torch.ao.quantization.fx._decomposed  # defines torch.ops.quantized_decomposed
from torch import nn

from _samples import INF, LEVELS, Sample, check_op_sample, of_inputs, sample_ids

Q = torch.ops.quantized_decomposed


def _per_tensor(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    u8 = Q.quantize_per_tensor(x, 0.05, 128, 0, 255, torch.uint8)
    i8 = Q.quantize_per_tensor(x, 0.1, -3, -128, 127, torch.int8)
    i16 = Q.quantize_per_tensor(x, 0.001, 7, -32768, 32767, torch.int16)
    return (
        u8,
        i8,
        i16,
        Q.dequantize_per_tensor(u8, 0.05, 128, 0, 255, torch.uint8),
        Q.dequantize_per_tensor(i8, 0.1, -3, -128, 127, torch.int8),
    )


def _per_tensor_tensor(x: torch.Tensor, scale: torch.Tensor, zp: torch.Tensor) -> tuple[torch.Tensor, ...]:
    q = Q.quantize_per_tensor.tensor(x, scale, zp, -128, 127, torch.int8)
    return q, Q.dequantize_per_tensor.tensor(q, scale, zp, -128, 127, torch.int8)


def _per_channel(x: torch.Tensor, scales: torch.Tensor, zps: torch.Tensor) -> tuple[torch.Tensor, ...]:
    q0 = Q.quantize_per_channel(x, scales, zps, 1, -128, 127, torch.int8)
    q1 = Q.quantize_per_channel(x.transpose(0, 1), scales, zps, 0, 0, 255, torch.uint8)
    return (
        q0,
        q1,
        Q.dequantize_per_channel(q0, scales, zps, 1, -128, 127, torch.int8),
        Q.dequantize_per_channel(q1, scales, None, 0, 0, 255, torch.uint8),
    )


def _dynamic(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    scale, zp = Q.choose_qparams.tensor(x, -128, 127, 2**-12, torch.int8)
    s_scale, s_zp = Q.choose_qparams_symmetric.tensor(x, 0, 255, 2**-12, torch.uint8)
    q = Q.quantize_per_tensor.tensor(x, scale, zp, -128, 127, torch.int8)
    return scale, zp, s_scale, s_zp, q, Q.dequantize_per_tensor.tensor(q, scale, zp, -128, 127, torch.int8)


def _past_2_22(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return (
        Q.quantize_per_tensor(x, 1.0, 0, -128, 127, torch.int8),
        Q.quantize_per_tensor(x, 0.5, 100, 0, 255, torch.uint8),
        Q.quantize_per_tensor(x, 1.0, -7, -32768, 32767, torch.int16),
        Q.quantize_per_tensor(x, 2.0**-20, 0, -32768, 32767, torch.int16),
    )


_LARGE = [2.0**22 - 1.5, 2.0**22 - 0.5, 2.0**22, 2.0**22 + 1, 2.0**23 - 1, 2.0**23, 2.0**23 + 2, 2.0**24 + 4, 1e30]
_BIG = torch.tensor([*_LARGE, *(-v for v in _LARGE), INF, -INF, 0.5, -0.5, 1.5, 2.5, 126.5, 127.5, -128.5, 0.0])


torch.manual_seed(0)
# values past both clamp ends and exact rounding ties (x / scale = k + 0.5 rounds half to even)
_X = torch.cat([torch.randn(40) * 4, torch.tensor([0.025, 0.075, -0.025, 0.125, 100.0, -100.0, 0.0, 1e-9])]).reshape(
    6, 8
)
SAMPLES: list[Sample] = [
    ("quantize_per_tensor", of_inputs(_per_tensor), (_X,)),
    (
        "quantize_per_tensor_tensor",
        of_inputs(_per_tensor_tensor),
        (_X, torch.tensor(0.037, dtype=torch.float64), torch.tensor(5, dtype=torch.int64)),
    ),
    (
        "quantize_per_channel",
        of_inputs(_per_channel),
        (_X, torch.rand(8) * 0.1 + 0.01, torch.randint(-4, 5, (8,), dtype=torch.int64)),
    ),
    ("choose_qparams", of_inputs(_dynamic), (_X,)),
    ("choose_qparams_positive", of_inputs(_dynamic), (torch.rand(5, 7) + 0.5,)),
    # x / scale around and past 2**22, 2**23, 2**24 and ±inf: the codes' rounding (exact.round_small, exact
    # below 2**22) is clamped away beyond it; ties just below 2**22 round half to even
    ("quantize_past_2_22", of_inputs(_past_2_22), (_BIG,)),
]
EXACT = {name for name, _, _ in SAMPLES}


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize(("name", "module", "inputs"), SAMPLES, ids=sample_ids(SAMPLES))
def test_op_sample(name: str, module: nn.Module, inputs: tuple[torch.Tensor, ...], level: str, tmp_path) -> None:
    check_op_sample(name, module, inputs, level, tmp_path, bit_exact=EXACT)
