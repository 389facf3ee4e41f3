"""Convert the GPU check's five models into OUT/<name>/ and verify each on the CPU.

The models: tests/models.py's mlp, transformer_block and cnn, torchvision's mobilenet_v3_small
(1x3x224x224) and the test suite's small Hugging Face Llama (`verify_bench.hf_llama_small`: 2 layers,
hidden 64, 4/2 heads, vocab 128, ids 1x8), all with random weights built from their configs. Each
OUT/<name>/ is a conversion directory (torch-ir.json, weights.safetensors, reference.safetensors, bundle/) that
`rlx-torch-import verify OUT/<name> --device cuda` re-verifies on the GPU (scripts/gpu_check.sh).

    python scripts/gpu_models.py OUT
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: tools/, tests/

import rlx_torch_import as rti
from tests import models as test_models
from tools.bench import models as bench
from tools.verify_bench import hf_llama_small


def models() -> dict[str, bench.ModelFactory]:
    return {
        "mlp": bench._test_model(test_models, "mlp"),
        "transformer_block": bench._test_model(test_models, "transformer_block"),
        "cnn": bench._test_model(test_models, "cnn"),
        "mobilenet_v3_small": bench._torchvision("mobilenet_v3_small", (1, 3, 224, 224)),
        "llama": hf_llama_small,
    }


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(argv[0])
    failed = []
    for name, make in models().items():
        model, inputs = make()
        report = rti.from_torch(model, inputs, out / name, name=name, per_node=False)
        print(report.summary().splitlines()[0], file=sys.stderr)
        if not report.ok:
            failed.append(name)
    if failed:
        print(f"failed on the CPU already: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
