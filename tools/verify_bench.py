"""What per-node parity costs: `from_torch` with and without it, side by side.

    python -m tools.verify_bench [--threads N] [--runs N] [--models a,b]

Per model, `--runs` conversions each way in one process (after one warm-up conversion), medians:
the whole `from_torch` without per-node parity (export, capture, lower, bundle, verify), its
verify phase, the per-node phase of a conversion with it in full (`per_node=True`: PyTorch's
intermediates from torch-ir, two debug builds of the graph compiled and run, the comparisons) and
what the per-node table and plot add to writing the reports. "extra" is those two over the plain
conversion: measured directly, since the export's own run-to-run variation is larger than the
difference of two totals. "by default" says what the default (`per_node="auto"`) does for the model
when every output passes: runs per-node parity (its values hold at most `AUTO_ELEMENTS` elements) or
leaves it to a failing conversion. Prints a markdown table (the `make bench` section "Per-node parity").
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch

from rlx_torch_import import rlx_config
from rlx_torch_import.api import from_torch
from rlx_torch_import.conversion import Conversion
from rlx_torch_import.verify.run import AUTO_ELEMENTS, value_elements

DEFAULT_MODELS = ("tests.transformer_block", "hf_llama_small", "llama")


class _Logits(torch.nn.Module):
    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model(ids).logits


def hf_llama_small() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """The HF Llama of the test suite (2 layers, hidden 64, vocab 128), ids 1x8."""
    import transformers

    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    return _Logits(transformers.LlamaForCausalLM(cfg).eval()).eval(), (torch.randint(0, 128, (1, 8)),)


def rows(names: list[str], runs: int) -> list[str]:
    from tools.bench.models import BenchModel, registry

    models, _ = registry()
    models["hf_llama_small"] = BenchModel("hf_llama_small", hf_llama_small.__doc__ or "", hf_llama_small)
    head = (
        "| model | nodes | values (elements) | by default | from_torch s | per-node phase s | report with nodes s "
        "| extra | verify phase s |"
    )
    out = [head, "|---|---|---|---|---|---|---|---|---|"]
    for name in names:
        if name not in models:
            out.append(f"| {name} | model not available here | | | | | | | |")
            continue
        model, inputs = models[name].make()
        totals, verifies, phases, reports = [], [], [], []
        with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from_torch(model, inputs, Path(tmp) / "warm", per_node=True)  # warm caches (torch, RLX)
            for i in range(runs):
                start = time.perf_counter()
                plain = from_torch(model, inputs, Path(tmp) / f"plain-{i}", per_node=False)
                totals.append(time.perf_counter() - start)
                verifies.append(plain.timings_s.get("verify", 0.0))
                full = from_torch(model, inputs, Path(tmp) / f"full-{i}", per_node=True)
                phases.append(full.timings_s.get("per-node parity", 0.0))
                # what the per-node table and plot add to writing report.json/.md/.html
                reports.append(_write_time(full, Path(tmp)) - _write_time(plain, Path(tmp)))
            elements = value_elements(Conversion.load(Path(tmp) / "warm").ir)
        total, phase, report = statistics.median(totals), statistics.median(phases), statistics.median(reports)
        default = "runs" if elements <= AUTO_ELEMENTS else "on failure"
        out.append(
            f"| {name} | {len(full.nodes)} | {elements / 1e6:.2f}M | {default} | {total:.2f} | {phase:.2f} | "
            f"{report:.2f} | {(phase + report) / total * 100:+.0f}% | {statistics.median(verifies):.2f} |"
        )
    return out


def _write_time(report: object, directory: Path) -> float:
    from rlx_torch_import.verify.run import write_reports

    target = directory / "reports"
    target.mkdir(exist_ok=True)
    start = time.perf_counter()
    write_reports(report, target)  # type: ignore[arg-type]
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.verify_bench", description=__doc__)
    parser.add_argument("--threads", type=int, default=None, help="RLX and torch threads (default: every core)")
    parser.add_argument("--runs", type=int, default=5, help="conversions each way (median; default 5)")
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS), help="bench model names, comma-separated")
    args = parser.parse_args(argv)
    threads = rlx_config.set_threads(args.threads)
    torch.set_num_threads(threads)
    print("\n".join(rows([m for m in args.models.split(",") if m], args.runs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
