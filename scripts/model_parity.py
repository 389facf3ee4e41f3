"""Per-model parity as a table: every test architecture converted, worst output error per model.

    python scripts/model_parity.py [--models llama,bert] [--json FILE]

For each model (tests/models.py, the Hugging Face configs of tests/test_hf_models.py and the
torchvision/RNN models of tests/test_vision_models.py) it prints the verdict, the worst max abs
error over the outputs, the allowed error of that output, and the lowest cosine. Run it before
and after an RLX upgrade to see what moved; the numbers are RLX vs eager PyTorch on one seed.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import rlx_torch_import as rti

Factory = Callable[[], tuple[nn.Module, tuple[torch.Tensor, ...], str]]


def _factories() -> dict[str, Factory]:
    import models
    import test_hf_models as hf
    import test_vision_models as vision

    found: dict[str, Factory] = {}
    for name in models.MODEL_NAMES:
        found[name] = lambda n=name: (*models.make(n), "high")

    def hf_model(make: Callable[[], tuple[nn.Module, tuple[torch.Tensor, ...]]]) -> Factory:
        def build() -> tuple[nn.Module, tuple[torch.Tensor, ...], str]:
            model, inputs = make()
            return hf.Logits(model.eval()), inputs, "high"

        return build

    for name, make in hf.MODELS.items():
        found[f"hf_{name}"] = hf_model(make)
    for name, make, shape, level in vision.MODELS:
        found[name] = lambda m=make, s=shape, lv=level: (vision._randomize_bn(m()), (torch.randn(*s),), lv)
    return found


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", help="comma-separated model names (default: all)")
    p.add_argument("--json", type=Path, help="also write the rows as JSON")
    args = p.parse_args()
    factories = _factories()
    names = args.models.split(",") if args.models else list(factories)
    rows = []
    print("| model | level | verdict | worst max abs | its allowed | 1 - lowest cosine |")
    print("|---|---|---|---|---|---|")
    for name in names:
        torch.manual_seed(0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model, inputs, level = factories[name]()
        with tempfile.TemporaryDirectory() as tmp:
            report = rti.from_torch(model.eval(), inputs, Path(tmp) / name, decomposition=level)
        worst = max(report.outputs, key=lambda o: o.max_abs_error / max(o.allowed_abs_error, 1e-300))
        row = {
            "model": name,
            "level": level,
            "ok": report.ok,
            "max_abs": worst.max_abs_error,
            "allowed": worst.allowed_abs_error,
            "cosine": min(o.cosine for o in report.outputs),
        }
        rows.append(row)
        verdict = "PASS" if report.ok else "FAIL"
        print(
            f"| {name} | {level} | {verdict} | {row['max_abs']:.3g} | {row['allowed']:.3g} | {1 - row['cosine']:.3g} |",
            flush=True,
        )
    if args.json:
        args.json.write_text(json.dumps({"rlx": rti._core.rlx_version(), "rows": rows}, indent=1) + "\n")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
