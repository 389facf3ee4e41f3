"""Parity samples for ops ordinary code uses (issue 11): logcumsumexp, var_mean/std_mean, integer bitwise
ops and shifts, boolean-mask index_put, addbmm, _int_mm and integer matmul, integer pow, det, nonzero_static,
the prims decompositions leave behind, and the in-place forms torch.export records at the `aten` level.

In-place calls (`x &= y`, `x.pow_(e)`, `x[mask] = v`) stay in-place ops at the `aten` level, where the
automatic decomposition fallback functionalizes them (writes through views included) into the functional
ops lowered here; `core` functionalizes them at export.
"""

from __future__ import annotations

import torch
from torch import nn

from sample_utils import of_inputs as Fn

A = torch.ops.aten
P = torch.ops.prims
INF = float("inf")
NAN = float("nan")
INTS = (torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64)


def r(*shape: int) -> torch.Tensor:
    return torch.randn(*shape)


def i8(*shape: int) -> torch.Tensor:
    return torch.randint(-128, 128, shape, dtype=torch.int8)


def extremes(dtype: torch.dtype) -> torch.Tensor:
    """The dtype's min and max, small values of both signs and zero."""
    if dtype == torch.bool:
        return torch.tensor([[True, False, True], [False, False, True]])
    info = torch.iinfo(dtype)
    small = (-3, -1) if info.min < 0 else (3, 1)
    return torch.tensor([[info.min, *small], [0, 5, info.max]], dtype=torch.int64).to(dtype)


def shift_amounts(dtype: torch.dtype) -> torch.Tensor:
    """0, in-range and out-of-range shifts (past the width; 255 is -1 converted to uint8)."""
    top = 255 if dtype == torch.uint8 else 63
    return torch.tensor([[0, 1, 3], [7, 8, top]]).to(dtype)


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _bitwise_tensors(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return a & b, a | b, a ^ b, ~a, torch.bitwise_and(a, b.flip(0)), torch.bitwise_xor(b, a)


def _bitwise_scalars(a: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Tensor-scalar (`__and__.Scalar` at aten, `bitwise_and.Scalar` at core) and scalar-tensor forms."""
    signed = a.dtype not in (torch.uint8, torch.bool)
    return (
        a & 5,
        a | 6,
        a ^ 3,
        torch.bitwise_and(3, a),
        torch.bitwise_or(-2 if signed else 2, a),
        torch.bitwise_xor(1, a),
    )


def _shifts(a: torch.Tensor, s: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return (
        a << s,
        a >> s,
        a << 2,
        a >> 1,
        torch.bitwise_left_shift(a, s.flip(0)),
        torch.bitwise_right_shift(a, s.flip(1)),
        torch.bitwise_left_shift(a, 7),
        torch.bitwise_right_shift(a, 7),
    )


def _bitwise_in_place(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
    c = a.clone()
    c &= b
    c |= 12
    c ^= b
    c |= b
    c &= -5
    c ^= 9
    c.bitwise_and_(b)
    c.bitwise_or_(3)
    c.bitwise_xor_(b)
    d = a.clone()
    d.bitwise_and_(-4)
    d.bitwise_or_(b)
    d.bitwise_xor_(6)
    d.bitwise_not_()
    return c, d


def _shifts_in_place(a: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    c = a.clone()
    c <<= s
    c >>= 1
    c <<= 3
    c >>= s
    c.bitwise_left_shift_(2)
    c.bitwise_right_shift_(s)
    c.bitwise_left_shift_(s)
    c.bitwise_right_shift_(1)
    return c


def _logical_in_place(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    c = p.clone()
    c.logical_and_(q)
    c.logical_or_(p)
    c.logical_xor_(q)
    c.logical_not_()
    return c


def _pow_in_place(a: torch.Tensor, e: torch.Tensor, f: torch.Tensor) -> tuple[torch.Tensor, ...]:
    c = a.clone()
    c.pow_(2)
    c.pow_(e)
    g = f.clone()
    g.pow_(f)
    g.pow_(0.5)
    return c, g


def _in_place_through_views(a: torch.Tensor, f: torch.Tensor, m: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """In-place writes into a view (`c[0] ^= 5`) change the base tensor."""
    c, d = a.clone(), f.clone()
    c[0].bitwise_xor_(5)
    c[1:] <<= 2
    d[0].masked_fill_(m[0], 1.0)
    return c, d


def _mask_set(a: torch.Tensor, m: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    c = a.clone()
    c[m] = v
    return c


def _mask_set_inner(a: torch.Tensor, m: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    c = a.clone()
    c[:, m] = v
    return c


def _mask_fill_forms(a: torch.Tensor, m: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """x[mask] = scalar (masked_fill_ at aten), = 0-d tensor (index_put_), masked_fill_ with a tensor value."""
    c, d, e = a.clone(), a.clone(), a.clone()
    c[m] = 2.5
    d[m] = torch.tensor(-1.0)
    e.masked_fill_(m, v)
    return c, d, e


def _mask_accumulate(a: torch.Tensor, m: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    c = a.clone()
    c.index_put_((m,), v, accumulate=True)
    return c


def _int_index_set(a: torch.Tensor, i: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    c = a.clone()
    c[i] = v
    return c


def _prims(a: torch.Tensor, i: torch.Tensor) -> tuple[torch.Tensor, ...]:
    n = P.iota(4, start=2, step=3, dtype=torch.int64, device=a.device, requires_grad=False)
    m = P.iota(4, start=-1, step=1, dtype=torch.int32, device=a.device, requires_grad=False)
    w = P.iota(4, start=2**40, step=-(2**35), dtype=torch.int64, device=a.device, requires_grad=False)
    return (
        i + n,
        i.int() * m,
        i * 0 + w,
        P.collapse(a, 1, 2),
        P.collapse(a, 0, 2),
        P.convert_element_type(a * 3, torch.int32),
        P.convert_element_type(a, torch.bool),
        P.convert_element_type(i, torch.float64),
        P.convert_element_type(a, torch.float16),
    )


M34 = torch.tensor([[True, False, False, True], [False, True, False, False], [True, True, False, True]])
EDGE = torch.tensor(
    [
        [100.0, -100.0, -INF, 3.0, INF, 1.0, -INF],
        [-INF, -INF, -INF, -100.0, 100.0, 2.0, 88.0],
        [-100.0, 100.0, -100.0, 100.0, -1e30, 1e-30, 0.0],
    ]
)
SINGULAR = torch.tensor(
    [[[1.0, 2, 3], [2, 4, 6], [1, 0, 1]], [[0.0, 0, 0], [1, 2, 3], [4, 5, 6]], [[0.0, 1, 2], [3, 0, 1], [2, 2, 0]]]
)

torch.manual_seed(0)
SAMPLES: list[tuple[str, nn.Module, tuple[torch.Tensor, ...]]] = [
    # logcumsumexp: large magnitudes of both signs, infinities (a leading -inf run), tiny steps, NaN
    ("logcumsumexp_edges", Fn(lambda a: (torch.logcumsumexp(a, 1), torch.logcumsumexp(a, 0))), (EDGE,)),
    ("logcumsumexp_long_axis", Fn(lambda a: torch.logcumsumexp(a * 50, 2)), (r(2, 3, 100),)),
    (
        "logcumsumexp_float64",
        Fn(lambda a: (torch.logcumsumexp(a, -1), torch.logcumsumexp(a * 300, 0))),
        (r(4, 37).double(),),
    ),
    (
        "logcumsumexp_half_rank0_nan",
        Fn(
            lambda h, b, s, n: (
                torch.logcumsumexp(h, 0),
                torch.logcumsumexp(b, 1),
                s.logcumsumexp(0),
                n.logcumsumexp(0),
            )
        ),
        (r(9, 3).half(), r(2, 10).bfloat16(), torch.tensor(3.0), torch.tensor([1.0, NAN, 2.0, -INF])),
    ),
    # var_mean / std_mean (and var/std): every overload, correction (incl. float and >= N), keepdim
    (
        "var_std_mean_overloads",
        Fn(
            lambda a: (
                *torch.var_mean(a),
                *torch.std_mean(a),
                *torch.var_mean(a, unbiased=False),
                *torch.std_mean(a, False),
                *torch.var_mean(a, 1, True, True),
                *torch.std_mean(a, [0, 2], unbiased=False),
                torch.var(a),
                torch.var(a, False),
                torch.std(a, False),
                torch.std(a, 1, correction=0),
            )
        ),
        (r(3, 4, 5),),
    ),
    (
        "var_std_mean_correction",
        Fn(
            lambda a: (
                *torch.var_mean(a, (0, 2), correction=2, keepdim=True),
                *torch.std_mean(a, -1, correction=0),
                *torch.var_mean(a, None, correction=0.5),
                *torch.std_mean(a, 1, correction=4, keepdim=True),
                *torch.var_mean(a, 1, correction=5),
            )
        ),
        (r(3, 4, 5),),
    ),
    (
        "var_std_mean_float64_half",
        Fn(lambda a, h: (*torch.var_mean(a, 1), *torch.std_mean(a, correction=0), *torch.var_mean(h, 1))),
        (r(3, 40).double() * 1e3 + 1e6, r(3, 8).half()),
    ),
    (  # one element per reduction: the unbiased variance is 0/0 (NaN), next to finite values
        "var_std_mean_single_element",
        Fn(lambda a, b: (torch.cat([torch.var_mean(a, 0)[0], torch.var(b, 0)]), *torch.std_mean(a, 0, correction=0))),
        (r(1, 4), r(3, 4)),
    ),
    # integer/bool bitwise ops: every dtype, its extremes, tensor/scalar/scalar-tensor forms
    *(
        (f"bitwise_tensors_{_name(dt)}", Fn(_bitwise_tensors), (extremes(dt), extremes(dt).flip(1)))
        for dt in (*INTS, torch.bool)
    ),
    *((f"bitwise_scalars_{_name(dt)}", Fn(_bitwise_scalars), (extremes(dt),)) for dt in (*INTS, torch.bool)),
    # shifts: torch's CPU rule (0 / sign past the width or for negative shifts; arithmetic right shift)
    *((f"shifts_{_name(dt)}", Fn(_shifts), (extremes(dt), shift_amounts(dt))) for dt in INTS),
    (
        "shifts_int64_wide_and_negative",
        Fn(
            lambda a, s: (
                a << s,
                a >> s,
                torch.bitwise_left_shift(3, s),
                torch.bitwise_right_shift(-100, s),
                torch.bitwise_right_shift(a, 63),
            )
        ),
        (
            torch.tensor([-100, -1, 0, 1, 7, 100, -(2**62), 2**62, -(2**63), 5]),
            torch.tensor([0, 1, 3, 62, 63, 64, 65, 100, -1, -3]),
        ),
    ),
    (
        "shifts_mixed_dtypes",
        Fn(lambda a, s: (a << s, a >> s)),
        (torch.tensor([-100, 7, 127], dtype=torch.int8), torch.tensor([1, 9, 3])),
    ),
    # in-place forms (functionalized by the aten-level fallback), also through a view
    (
        "bitwise_in_place_int64",
        Fn(_bitwise_in_place),
        (torch.randint(-100, 100, (3, 4)), torch.randint(-100, 100, (3, 4))),
    ),
    ("bitwise_in_place_int8", Fn(_bitwise_in_place), (i8(3, 4), i8(3, 4))),
    (
        "shifts_in_place_int32",
        Fn(_shifts_in_place),
        (torch.randint(-100, 100, (3, 4), dtype=torch.int32), torch.randint(0, 9, (3, 4), dtype=torch.int32)),
    ),
    ("logical_in_place", Fn(_logical_in_place), (r(3, 4) > 0, r(3, 4) > 0)),
    ("in_place_through_a_view", Fn(_in_place_through_views), (torch.randint(0, 9, (3, 4)), r(3, 4), M34)),
    # integer pow: wrapping, negative exponents (torch's powi: 1, +-1 or 0), every integer dtype
    (
        "pow_int64",
        Fn(lambda a, e: (a**e, a**3, a**0, 2**e, (-1) ** e, a**63, torch.pow(a, e.flip(0)))),
        (
            torch.tensor([-3, -2, -1, 0, 1, 2, 3, 7, 2**31, -(2**40) + 1]).view(-1, 1),
            torch.tensor([-2, -1, 0, 1, 2, 3, 5, 63, 64, 100]),
        ),
    ),
    (
        "pow_int8_uint8",
        Fn(lambda a, e, u, f: (a**3, a**e, u**3, u**f, torch.pow(3, e))),
        (
            torch.tensor([-3, -2, 2, 3, 5, 127, -128], dtype=torch.int8),
            torch.tensor([9, 9, -1, 0, 9, 7, 2], dtype=torch.int8),
            torch.tensor([0, 1, 2, 3, 255], dtype=torch.uint8),
            torch.tensor([0, 200, 9, 2, 2], dtype=torch.uint8),
        ),
    ),
    (
        "pow_int16_int32",
        Fn(lambda a, e, s: (a**e, a.pow(5), s ** e.to(torch.int16), s**4)),
        (
            torch.tensor([3, -7, 100, 46341, -2], dtype=torch.int32),
            torch.tensor([20, 11, 5, 2, 31], dtype=torch.int32),
            torch.tensor([3, -7, 100, 181, -2], dtype=torch.int16),
        ),
    ),
    (
        "pow_in_place",
        Fn(_pow_in_place),
        (torch.randint(-4, 4, (3, 4)), torch.randint(0, 4, (3, 4)), torch.rand(3, 4) + 0.5),
    ),
    # index_put with a boolean mask: scalar / 0-d / per-True values, broadcast rows, inner mask, accumulate
    ("mask_fill_forms", Fn(_mask_fill_forms), (r(3, 4), M34, torch.tensor(-2.0))),
    ("mask_set_per_true", Fn(_mask_set), (r(3, 4), M34, r(6))),
    ("mask_set_rows", Fn(_mask_set), (r(3, 4, 2), M34, r(6, 2))),
    ("mask_set_broadcast_row", Fn(_mask_set), (r(3, 4, 2), M34, r(2))),
    ("mask_set_leading_axis", Fn(_mask_set), (r(3, 4, 2), torch.tensor([True, False, True]), r(2, 4, 2))),
    ("mask_set_inner_axes", Fn(_mask_set_inner), (r(2, 3, 4), M34, r(2, 6))),
    ("mask_accumulate", Fn(_mask_accumulate), (r(3, 4), M34, r(6))),
    (
        "mask_accumulate_int64",
        Fn(_mask_accumulate),
        (torch.randint(-9, 9, (3, 4)), M34, torch.randint(-(2**40), 2**40, (6,))),
    ),
    (
        "mask_set_int8_bool",
        Fn(lambda a, m, v, p, q: (_mask_set(a, m, v), _mask_set(p, m, q))),
        (
            torch.randint(-9, 9, (3, 4), dtype=torch.int8),
            M34,
            torch.randint(-100, 100, (6,), dtype=torch.int8),
            r(3, 4) > 0,
            r(6) > 0,
        ),
    ),
    (
        "mask_index_put_functional",
        Fn(lambda a, m, v, u: (A.index_put(a, [m], v), A.index_put(a.float(), [u], v.float()))),
        (r(3, 4).double(), M34, r(6).double(), M34.to(torch.uint8)),
    ),
    ("mask_set_none_true", Fn(_mask_set), (r(3, 4), torch.zeros(3, 4, dtype=torch.bool), r(0))),
    ("index_put_in_place_int_index", Fn(_int_index_set), (r(5, 3), torch.tensor([4, 0, -2]), r(3, 3))),
    # addbmm
    (
        "addbmm_beta_alpha",
        Fn(
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
        Fn(lambda a, b, c: torch.addbmm(a, b, c, beta=2, alpha=3)),
        (torch.randint(-9, 9, (3, 5)), torch.randint(-9, 9, (4, 3, 2)), torch.randint(-9, 9, (4, 2, 5))),
    ),
    (
        "addbmm_in_place_float64",
        Fn(lambda a, b, c: a.clone().addbmm_(b, c, alpha=0.25)),
        (r(3, 5).double(), r(4, 3, 2).double(), r(4, 2, 5).double()),
    ),
    # integer matrix products: _int_mm accumulates int8 in int32; int8/uint8 mm wraps in its dtype
    ("int_mm", Fn(lambda a, b: torch._int_mm(a, b)), (i8(17, 32), i8(32, 8))),
    (
        "int_mm_extremes",
        Fn(lambda a, b: torch._int_mm(a, b)),
        (torch.full((3, 64), -128, dtype=torch.int8), torch.full((64, 2), -128, dtype=torch.int8)),
    ),
    (
        "matmul_int8_uint8_wrap",
        Fn(lambda a, b, c: (torch.mm(a, b), a @ b, torch.bmm(a.unsqueeze(0), b.unsqueeze(0)), c @ c.t())),
        (i8(3, 4), i8(4, 5), torch.randint(0, 256, (3, 4), dtype=torch.uint8)),
    ),
    # determinant: linalg.det / det / _linalg_det, batches, 1x1 to 8x8, float64, singular matrices
    ("det_batch", Fn(lambda a, b: (torch.linalg.det(a), torch.det(b), b.det())), (r(5, 3, 3), r(4, 4))),
    ("det_float64", Fn(lambda a: torch.linalg.det(a)), (r(2, 6, 6).double(),)),
    (
        "det_sizes",
        Fn(lambda a, b, c: (torch.linalg.det(a), torch.linalg.det(b), torch.linalg.det(c))),
        (r(3, 1, 1), r(2, 2), r(2, 2, 8, 8)),
    ),
    ("det_singular", Fn(lambda a: torch.linalg.det(a)), (SINGULAR,)),
    # nonzero_static: padding with fill_value, truncation, any dtype (NaN is nonzero), no nonzero at all
    (
        "nonzero_static",
        Fn(
            lambda a, m, i, z: (
                torch.nonzero_static(a, size=5),
                torch.nonzero_static(a, size=2, fill_value=7),
                torch.nonzero_static(m, size=30),
                torch.nonzero_static(i, size=4, fill_value=-9),
                torch.nonzero_static(z, size=3),
            )
        ),
        (
            torch.tensor([[0, 1.5, 0], [NAN, 0, -2]]),
            r(2, 3, 4) > 0,
            torch.tensor([3, 0, 2]),
            torch.zeros(4, 2, dtype=torch.bool),
        ),
    ),
    # prims that torch._refs decompositions leave behind
    ("prims_iota_collapse_convert", Fn(_prims), (r(3, 4, 5), torch.tensor([5, -1, 0, 7]))),
    (
        "prims_div",
        Fn(lambda a, b, i, j: (P.div(a, b), P.div(i, j))),
        (r(3, 4), r(3, 4), torch.tensor([7, -7, 9, -9]), torch.tensor([2, 2, -4, -4])),
    ),
]
