"""Parity samples of the linear-algebra ops (lower/ops/linalg.py): matmul of every rank, bmm, linear
(also float64, float16 and bfloat16 weights), addbmm, integer matrix products (_int_mm accumulates int8 in
int32; int8/uint8 mm wraps in its dtype), determinants (linalg.det / det, batches, 1x1 to 8x8, float64,
singular), cdist (every p on the direct path; p = 2 by matmul when torch's compute_mode picks it) and
pdist; and the refusal of a too large det.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import rlx_torch_import as rti
from _samples import INF, LEVELS, A, Fn, Sample, check_op_sample, i8, of_inputs, r, sample_ids

MM = "use_mm_for_euclid_dist"

NO_MM = "donot_use_mm_for_euclid_dist"


def grid(*shape: int) -> torch.Tensor:
    """Small integer-valued floats: coordinates repeat, so some differences are exactly 0."""
    return torch.randint(-2, 3, shape).float()


def _cdist_all_p(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return tuple(torch.cdist(a, b, p=p) for p in (0.0, 1.0, 2.0, INF, 1.5, 3.0))


def _pdist_all_p(a: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return tuple(torch.pdist(a, p=p) for p in (0.0, 1.0, 2.0, INF, 0.5, 3.0))


SINGULAR = torch.tensor(
    [[[1.0, 2, 3], [2, 4, 6], [1, 0, 1]], [[0.0, 0, 0], [1, 2, 3], [4, 5, 6]], [[0.0, 1, 2], [3, 0, 1], [2, 2, 0]]]
)


torch.manual_seed(0)
SAMPLES: list[Sample] = [
    ("matmul_1d_2d_3d", Fn(lambda m, a, b, v: (a @ b) @ v), (r(2, 3, 4), r(4, 5), r(5))),
    ("bmm", Fn(lambda m, a, b: torch.bmm(a, b)), (r(2, 3, 4), r(2, 4, 2))),
    ("linear_1d_nobias", Fn(lambda m, a: F.linear(a, m.w), w=r(3, 5)), (r(5),)),
    ("float64", nn.Linear(4, 3).double(), (r(2, 4).double(),)),
    ("float16_weights_mlp", nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.LayerNorm(16)).half(), (r(2, 8).half(),)),
    (
        "bfloat16_weights_linear_t",
        Fn(lambda m, a: F.linear(a, m.w).t() * 2, w=r(4, 8).bfloat16()),
        (r(2, 8).bfloat16(),),
    ),
    # cdist: every p on the direct path; p = 2 by matmul when torch's compute_mode picks it
    ("cdist_p_direct", of_inputs(_cdist_all_p), (grid(2, 5, 3), grid(2, 4, 3))),
    ("cdist_batch_broadcast", of_inputs(lambda a, b: torch.cdist(a, b, p=1.0)), (r(3, 1, 4, 5), r(2, 6, 5))),
    ("cdist_p2_mm_over_25_rows", of_inputs(lambda a, b: torch.cdist(a, b)), (r(30, 4), r(7, 4))),
    (
        "cdist_compute_modes",
        of_inputs(lambda a, b: (torch.cdist(a, b, compute_mode=MM), torch.cdist(a, b, compute_mode=NO_MM))),
        (r(2, 27, 3), r(2, 5, 3)),
    ),
    (  # compute_mode: None/0 uses matmul above 25 rows, 1 always, 2 never
        "cdist_op_compute_mode",
        of_inputs(
            lambda a, b, c: (
                A._cdist_forward.default(a, b, 2.0, 1),
                A._cdist_forward.default(c, b, 2.0, None),
                A._cdist_forward.default(c, b, 2.0, 0),
                A._cdist_forward.default(c, b, 2.0, 2),
                A._cdist_forward.default(a, b, 2.0, 0),
            )
        ),
        (r(4, 3), r(5, 3), r(26, 3)),
    ),
    ("pdist_p", of_inputs(_pdist_all_p), (grid(6, 3),)),
    ("pdist_float64", of_inputs(lambda a: torch.pdist(a)), (r(5, 4).double(),)),
    # addbmm
    (
        "addbmm_beta_alpha",
        of_inputs(
            lambda a, b, c: (
                torch.addbmm(a, b, c),
                torch.addbmm(a, b, c, beta=0.5, alpha=2),
                torch.addbmm(a[0], b, c, beta=0),
                torch.addbmm(a[:, :1], b, c, alpha=-1),
            )
        ),
        (r(3, 5), r(4, 3, 2), r(4, 2, 5)),
    ),
    (
        "addbmm_int64",
        of_inputs(lambda a, b, c: torch.addbmm(a, b, c, beta=2, alpha=3)),
        (torch.randint(-9, 9, (3, 5)), torch.randint(-9, 9, (4, 3, 2)), torch.randint(-9, 9, (4, 2, 5))),
    ),
    (
        "addbmm_in_place_float64",
        of_inputs(lambda a, b, c: a.clone().addbmm_(b, c, alpha=0.25)),
        (r(3, 5).double(), r(4, 3, 2).double(), r(4, 2, 5).double()),
    ),
    # integer matrix products: _int_mm accumulates int8 in int32; int8/uint8 mm wraps in its dtype
    ("int_mm", of_inputs(lambda a, b: torch._int_mm(a, b)), (i8(17, 32), i8(32, 8))),
    (
        "int_mm_extremes",
        of_inputs(lambda a, b: torch._int_mm(a, b)),
        (torch.full((3, 64), -128, dtype=torch.int8), torch.full((64, 2), -128, dtype=torch.int8)),
    ),
    (
        "matmul_int8_uint8_wrap",
        of_inputs(lambda a, b, c: (torch.mm(a, b), a @ b, torch.bmm(a.unsqueeze(0), b.unsqueeze(0)), c @ c.t())),
        (i8(3, 4), i8(4, 5), torch.randint(0, 256, (3, 4), dtype=torch.uint8)),
    ),
    # determinant: linalg.det / det / _linalg_det, batches, 1x1 to 8x8, float64, singular matrices
    ("det_batch", of_inputs(lambda a, b: (torch.linalg.det(a), torch.det(b), b.det())), (r(5, 3, 3), r(4, 4))),
    ("det_float64", of_inputs(lambda a: torch.linalg.det(a)), (r(2, 6, 6).double(),)),
    (
        "det_sizes",
        of_inputs(lambda a, b, c: (torch.linalg.det(a), torch.linalg.det(b), torch.linalg.det(c))),
        (r(3, 1, 1), r(2, 2), r(2, 2, 8, 8)),
    ),
    ("det_singular", of_inputs(lambda a: torch.linalg.det(a)), (SINGULAR,)),
]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize(("name", "module", "inputs"), SAMPLES, ids=sample_ids(SAMPLES))
def test_op_sample(name: str, module: nn.Module, inputs: tuple[torch.Tensor, ...], level: str, tmp_path) -> None:
    check_op_sample(name, module, inputs, level, tmp_path)


def test_det_of_a_large_matrix_is_refused(tmp_path) -> None:
    with pytest.raises(rti.UnsupportedOpsError) as info:
        rti.from_torch(of_inputs(torch.linalg.det), (torch.randn(65, 65),), tmp_path / "o", decomposition="core")
    assert "aten._linalg_det.default" in info.value.targets
    assert "det of a 65x65 matrix is not supported" in info.value.explain()
