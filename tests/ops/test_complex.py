"""Parity samples of complex numbers (lower/ops/complex.py and the complex forms in lower/complexes.py) in
complex64 and complex128: view_as_real / view_as_complex, complex, polar, real, imag, angle, abs, conj,
elementwise add / sub / mul / div / exp / neg, scaling by a real, sum / mean, data movement part by part;
and the refusals (an op without a complex form, a nonzero complex fill).
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import rlx_torch_import as rti
from _samples import LEVELS, Sample, check_op_sample, of_inputs, r, sample_ids

DTYPES = (("f32", torch.float32), ("f64", torch.float64))


def _make(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
    z = torch.complex(a, b)
    p = torch.polar(a.abs(), b)
    pairs = torch.stack([a, b], dim=-1)
    w = torch.view_as_complex(pairs)
    return (
        torch.view_as_real(z),
        torch.view_as_real(p),
        torch.real(w),
        torch.imag(w),
        torch.angle(z),
        z.abs(),
        torch.view_as_real(torch.conj_physical(z)),
        torch.view_as_real(z.conj().resolve_conj()),
        torch.view_as_real(torch.resolve_neg(torch._neg_view(z))),
        torch.angle(torch.cat([a[0], -a[1].abs(), torch.tensor([0.0, float("nan")], dtype=a.dtype)])),  # real
    )


def _arith(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
    z, w = torch.complex(a, b), torch.complex(b, a + 0.5)
    return tuple(
        torch.view_as_real(y)
        for y in (
            z + w,
            z - 2 * w,
            z * w,
            z / w,
            a / w,  # real / complex
            z / (a.abs() + 1),  # complex / real
            z * a,
            z * 3.0,
            torch.exp(z),
            -z,
            z + a,  # a real addend: only the real part
            z - torch.arange(4),  # an integer one too
            z.sum(dim=1),
            z.mean(),
        )
    )


def _movement(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
    z = torch.complex(a, b)
    moved = torch.cat([z.permute(1, 0)[:, :2], z.t()[:, 1:3].flip(0)], dim=1).reshape(-1)
    picked = torch.where(a > 0, z, b)[:, torch.tensor([2, 0, 3])]  # a real source: zero imaginary part
    padded = torch.nn.functional.pad(z, (1, 2))
    return (
        torch.view_as_real(moved),
        torch.view_as_real(z.unsqueeze(0).expand(2, 3, 4)[1, 2]),
        *(torch.view_as_real(t) for t in (picked, padded)),
    )


SAMPLES: list[Sample] = [
    sample
    for tag, dt in DTYPES
    for sample in (
        (f"complex_make_{tag}", of_inputs(_make), (r(3, 4).to(dt), r(3, 4).to(dt))),
        (f"complex_arith_{tag}", of_inputs(_arith), (r(3, 4).to(dt), r(3, 4).to(dt))),
        (f"complex_movement_{tag}", of_inputs(_movement), (r(3, 4).to(dt), r(3, 4).to(dt))),
    )
]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize(("name", "module", "inputs"), SAMPLES, ids=sample_ids(SAMPLES))
def test_op_sample(name: str, module: nn.Module, inputs: tuple[torch.Tensor, ...], level: str, tmp_path) -> None:
    check_op_sample(name, module, inputs, level, tmp_path)


def test_refused_complex_op_and_fill(tmp_path) -> None:
    """An op with no complex form (sqrt) and a nonzero fill of a complex tensor are refused, naming the op.
    (A complex graph input, output or buffer converts: tests/test_complex_boundary.py.)"""
    module = of_inputs(lambda a, b: torch.view_as_real(torch.sqrt(torch.complex(a, b))))
    with pytest.raises(rti.UnsupportedOpsError) as err:
        rti.from_torch(module, (r(3), r(3)), tmp_path / "b", decomposition="core", auto_decompose=False)
    assert "aten.sqrt.default" in err.value.targets
    assert "complex operands are not supported" in str(err.value)
    padded = of_inputs(lambda a, b: torch.view_as_real(torch.nn.functional.pad(torch.complex(a, b), (1, 1), value=2.0)))
    with pytest.raises(rti.UnsupportedOpsError) as err:  # part by part, 2.0 would fill the imaginary part too
        rti.from_torch(padded, (r(3), r(3)), tmp_path / "p", decomposition="core", auto_decompose=False)
    assert "aten.constant_pad_nd.default" in err.value.targets
    assert "value=2.0 on a complex tensor is not supported" in str(err.value)
