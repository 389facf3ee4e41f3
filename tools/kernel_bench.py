"""RLX kernels alone vs the same op in PyTorch: the rows to show RLX's maintainers.

Where a converted model is still slower than eager PyTorch after every conversion-time
rewrite (`lower/passes/`) and runtime setting (`rlx_config`), the time is in RLX's
own kernels. Each row here builds one RLX op at a shape taken from a benchmark model,
runs it through the same core and settings as a bundle, and times PyTorch's op on the
same data with the same thread count. `python -m tools.bench` prints the
table into bench/results.md; docs/rlx-defects.md lists the rows.

Times are medians in milliseconds; the ratio is RLX / PyTorch (above 1: RLX is slower). "of which in
RLX kernels" is RLX's own per-thunk timer (0.1 ms resolution); the rest of a run is RLX's per-run
overhead (zeroing its scratch arena, copying inputs in and outputs out). The last column is the op's
GEMM alone (the im2col GEMM for a convolution) on the BLAS provider in use (`rlx_config.blas()`),
single-threaded as RLX calls it per tile, and divided by the thread count: the floor RLX's kernel
could reach with perfect splitting on that BLAS.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlx_torch_import import _core, rlx_config
from rlx_torch_import.program import Program, Provenance, RlxNode, ValueDecl


@dataclass(frozen=True)
class KernelCase:
    """One op at one shape: the RLX op, its operand shapes, and the PyTorch op to compare with."""

    key: str
    what: str
    seen: str
    op: Any
    operands: tuple[tuple[int, ...], ...]
    out_dims: tuple[int, ...]
    torch_op: Callable[..., Any]
    weights: int = 0  # how many trailing operands are parameters (bound once, like a bundle's weights)
    gemm: tuple[int, int, int] | None = None  # (M, K, N) of the GEMM RLX runs for it (im2col for a conv)


def _attention(mask: str) -> Any:
    return {
        "Attention": {
            "num_heads": 1,
            "head_dim": 64,
            "v_head_dim": None,
            "mask_kind": mask,
            "score_scale": 0.125,
            "attn_logit_softcap": None,
        }
    }


def _conv(k: int, stride: int, pad: int, groups: int) -> Any:
    return {
        "Conv": {
            "kernel_size": [k, k],
            "stride": [stride] * 2,
            "padding": [pad] * 2,
            "dilation": [1, 1],
            "groups": groups,
        }
    }


def _cases() -> tuple[KernelCase, ...]:
    import torch
    import torch.nn.functional as F

    return (
        KernelCase(
            "sgemm-llama-mlp",
            "MatMul [128,512] x [512,1376] (f32)",
            "Llama MLP up projection",
            "MatMul",
            ((128, 512), (512, 1376)),
            (128, 1376),
            torch.mm,
            1,
            (128, 512, 1376),
        ),
        KernelCase(
            "sgemm-lm-head",
            "MatMul [128,512] x [512,32000] (f32)",
            "Llama lm_head",
            "MatMul",
            ((128, 512), (512, 32000)),
            (128, 32000),
            torch.mm,
            1,
            (128, 512, 32000),
        ),
        KernelCase(
            "conv3x3",
            "Conv 3x3 stride 1 pad 1, 64 -> 64 channels, 1x64x56x56",
            "resnet18 layer1",
            _conv(3, 1, 1, 1),
            ((1, 64, 56, 56), (64, 64, 3, 3)),
            (1, 64, 56, 56),
            lambda x, w: F.conv2d(x, w, padding=1),
            1,
            (64, 576, 3136),
        ),
        KernelCase(
            "conv7x7-s2",
            "Conv 7x7 stride 2 pad 3, 3 -> 64 channels, 1x3x224x224",
            "resnet18 stem",
            _conv(7, 2, 3, 1),
            ((1, 3, 224, 224), (64, 3, 7, 7)),
            (1, 64, 112, 112),
            lambda x, w: F.conv2d(x, w, stride=2, padding=3),
            1,
            (64, 147, 12544),
        ),
        KernelCase(
            "conv-depthwise",
            "Conv 3x3 depthwise (groups 96), 4x96x28x28",
            "mobilenet_v3_small",
            _conv(3, 1, 1, 96),
            ((4, 96, 28, 28), (96, 1, 3, 3)),
            (4, 96, 28, 28),
            lambda x, w: F.conv2d(x, w, padding=1, groups=96),
            1,
        ),
        KernelCase(
            "bias-add-channels",
            "Binary Add of a [1,96,1,1] bias to 4x96x28x28",
            "every conv bias",
            {"Binary": "Add"},
            ((4, 96, 28, 28), (1, 96, 1, 1)),
            (4, 96, 28, 28),
            torch.add,
            1,
        ),
        KernelCase(
            "attention-causal",
            "Attention causal, 8 heads x 128 x 64",
            "Llama self-attention",
            _attention("Causal"),
            ((8, 128, 64),) * 3,
            (8, 128, 64),
            lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        ),
    )


def _median_ms(fn: Callable[[], Any], runs: int, warmup: int) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def time_case(case: KernelCase, runs: int = 20, warmup: int = 3, seed: int = 0) -> dict[str, Any]:
    """Time one case in RLX and in PyTorch on the same random float32 operands."""
    import torch

    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in case.operands]
    names = [f"x{i}" for i in range(len(arrays))]
    decls = [ValueDecl(n, s, "F32") for n, s in zip(names, case.operands, strict=True)]
    n_in = len(decls) - case.weights
    program = Program(case.key, inputs=decls[:n_in], params=decls[n_in:])
    program.nodes.append(RlxNode("y", case.op, tuple(names), case.out_dims, "F32", Provenance(case.key, "y")))
    program.outputs.append("y")
    model = _core.CompiledModel(_core.program_to_hir_json(program.to_core_json()))
    rlx_config.mark_started()
    model.set_flush_denormals(True)
    feed = [(n, a.reshape(-1).view(np.uint8), "F32") for n, a in zip(names, arrays, strict=True)]
    for name, data, dtype in feed[n_in:]:
        model.set_param(name, data, dtype)
    feed = feed[:n_in]
    rlx_ms = _median_ms(lambda: model.run(feed), runs, warmup)
    from rlx_torch_import.bundle.host import _thunk_profile

    kernel_ms = statistics.median(
        sum(ms for ms, _ in _thunk_profile(lambda: model.run(feed)).values()) for _ in range(3)
    )
    tensors = [torch.from_numpy(a) for a in arrays]
    torch.set_num_threads(rlx_config.set_threads(None))
    with torch.no_grad():
        torch_ms = _median_ms(lambda: case.torch_op(*tensors), runs, warmup)
    blas_ms = _blas_gemm_ms(case.gemm, runs, warmup) if case.gemm else None
    return {
        "key": case.key,
        "what": case.what,
        "seen": case.seen,
        "blas_ms": blas_ms,
        "rlx_ms": rlx_ms,
        "rlx_kernels_ms": kernel_ms,
        "torch_ms": torch_ms,
        "ratio": rlx_ms / torch_ms,
    }


def _blas_gemm_ms(gemm: tuple[int, int, int], runs: int, warmup: int) -> float | None:
    """The op's GEMM alone on the BLAS provider RLX runs on (one thread, as RLX calls it per tile), in ms."""
    from tools.blas_bench import _sgemm

    fn = _sgemm(rlx_config.blas()["provider"])
    if fn is None:
        return None
    m, k, n = gemm
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((m, k), dtype=np.float32), rng.standard_normal((k, n), dtype=np.float32)
    c = np.zeros((m, n), np.float32)
    args = (101, 111, 111, m, n, k, 1.0, a.ctypes.data, k, b.ctypes.data, n, 0.0, c.ctypes.data, n)
    return _median_ms(lambda: fn(*args), runs, warmup)


def run_all(runs: int = 20, warmup: int = 3) -> list[dict[str, Any]]:
    """Every case, in table order."""
    return [time_case(c, runs, warmup) for c in _cases()]


def markdown(rows: list[dict[str, Any]]) -> str:
    """The rows as a Markdown table."""
    threads = rlx_config.set_threads(None)
    lines = [
        "| kernel | seen in | RLX ms | of which in RLX kernels | PyTorch ms | RLX / PyTorch "
        f"| its GEMM on the chosen BLAS, 1 thread ms (/{threads}) |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        blas = f"{r['blas_ms']:.3f} ({r['blas_ms'] / threads:.3f})" if r.get("blas_ms") else "n/a"
        lines.append(
            f"| {r['what']} | {r['seen']} | {r['rlx_ms']:.3f} | {r['rlx_kernels_ms']:.1f} | {r['torch_ms']:.3f} | "
            f"{r['ratio']:.2f}x | {blas} |"
        )
    return "\n".join(lines)


def cases_doc() -> list[tuple[str, str, str]]:
    """(key, op and shape, where seen) for docs/rlx-defects.md."""
    return [(c.key, c.what, c.seen) for c in _cases()]


def main(argv: list[str] | None = None) -> int:
    """Print the table (`--threads N` sizes RLX's pool and torch's threads alike)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m tools.kernel_bench", description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, help="threads for RLX and PyTorch (default: every available core)")
    parser.add_argument("--runs", type=int, default=20, help="timed runs per kernel, median reported (default 20)")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    rlx_config.set_threads(args.threads)
    print(markdown(run_all(runs=args.runs)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
