"""How close RLX's reductions, scans and matmul come to eager PyTorch: bit for bit or within budget.

    python scripts/reduction_parity.py

For each case it converts a one-op model, runs the bundle and prints a Markdown row: the share of
elements equal to torch's bit for bit, the largest error in ULP of torch's value (in the result dtype),
RLX's and torch's largest error against the same op computed in float64, and the verdict. The table in
README.md ("Parity budgets") comes from this script; rerun it after an RLX upgrade.
"""

from __future__ import annotations

import tempfile
import warnings
from collections.abc import Callable

import numpy as np
import torch
from torch import nn

import rlx_torch_import as rti
from rlx_torch_import.bundle.model import BundleModel


class _Op(nn.Module):
    def __init__(self, fn: Callable[..., torch.Tensor]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *xs: torch.Tensor) -> torch.Tensor:
        return self.fn(*xs)


def _cases() -> list[tuple[str, Callable[..., torch.Tensor], tuple[torch.Tensor, ...]]]:
    torch.manual_seed(0)
    r = torch.randn
    return [
        ("cumsum f32 [4,20000]", lambda x: x.cumsum(-1), (r(4, 20000) * 10,)),
        ("cumprod f32 [4,400]", lambda x: x.cumprod(-1), (torch.rand(4, 400) + 0.5,)),
        ("logcumsumexp f32 [4,3000]", lambda x: torch.logcumsumexp(x, -1), (r(4, 3000) * 10,)),
        ("sum f32 [8,100000]", lambda x: x.sum(-1), (r(8, 100000),)),
        ("mean f32 [8,100000]", lambda x: x.mean(-1), (r(8, 100000),)),
        ("sum f32 [64,512]", lambda x: x.sum(-1), (r(64, 512),)),
        ("var f32 [8,100000]", lambda x: x.var(-1), (r(8, 100000) + 3,)),
        ("vector_norm f32 [8,100000]", lambda x: torch.linalg.vector_norm(x, dim=-1), (r(8, 100000),)),
        ("matmul f32 [64,1024]x[1024,256]", lambda a, b: a @ b, (r(64, 1024), r(1024, 256))),
        ("cumsum f16 [4,2000]", lambda x: x.cumsum(-1), (torch.rand(4, 2000).half(),)),
        ("sum f16 [8,4096]", lambda x: x.sum(-1), (r(8, 4096).half(),)),
        ("sum bf16 [8,4096]", lambda x: x.sum(-1), (r(8, 4096).bfloat16(),)),
    ]


def _numpy(t: torch.Tensor) -> np.ndarray:
    return t.float().numpy() if t.dtype == torch.bfloat16 else t.numpy()


def _row(name: str, fn: Callable[..., torch.Tensor], args: tuple[torch.Tensor, ...]) -> str:
    with tempfile.TemporaryDirectory() as out:
        report = rti.from_torch(_Op(fn), args, out, per_node=False)
        model = BundleModel(f"{out}/bundle")
        names = [i["name"] for i in model.meta["inputs"]]
        got = next(iter(model.run({n: _numpy(a) for n, a in zip(names, args, strict=True)}).values()))
    with torch.no_grad():
        eager = fn(*args)
        wide = fn(*(a.double() for a in args)).numpy()
    expected = _numpy(eager)
    grid = np.float16 if eager.dtype == torch.float16 else np.float32
    spacing = np.spacing(np.abs(expected).astype(grid)).astype(np.float64) * (
        2.0**16 if eager.dtype == torch.bfloat16 else 1
    )
    got64 = np.asarray(got, dtype=np.float64)
    ulp = float(np.max(np.abs(got64 - expected) / spacing))
    same = float(np.mean(np.asarray(got) == expected)) * 100
    ours, theirs = float(np.max(np.abs(got64 - wide))), float(np.max(np.abs(expected - wide)))
    return f"| {name} | {same:.1f}% | {ulp:.3g} | {ours:.3g} | {theirs:.3g} | {'PASS' if report.ok else 'FAIL'} |"


def main() -> None:
    warnings.filterwarnings("ignore")
    print("| case | bit for bit | largest error, ULP | RLX vs float64 | torch vs float64 | verdict |")
    print("|---|---|---|---|---|---|")
    for case in _cases():
        print(_row(*case), flush=True)


if __name__ == "__main__":
    main()
