"""Static probe of RLX's CUDA backend against every op parity sample (no GPU needed).

Lowers each sample of `tests/ops/` (`all_samples.py`; ATen and Core ATen levels) and asks the core whether RLX's
CUDA backend can run the graph as the parity budgets need (`_core.cuda_refusal`, `src/device.rs`):
float64 values and integer constants float32 does not hold are refused (RLX's CUDA arena stores every
value as float32), and so are op kinds RLX's own CUDA legalization has neither a kernel nor a rewrite for.
Prints one line per refusal cause with the samples that meet it; docs/rlx-defects.md ("CUDA backend")
quotes the result.

    python scripts/probe_cuda_kernels.py [--limit N]
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "ops"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=0, help="probe only the first N samples (0: all)")
    args = parser.parse_args()

    import rlx_torch_import as rti
    from _samples import LEVELS  # type: ignore[import-not-found]
    from all_samples import SAMPLES  # type: ignore[import-not-found]
    from rlx_torch_import import _core, torchir
    from rlx_torch_import.lower import lower

    causes: dict[str, list[str]] = defaultdict(list)
    probed = failed = 0
    samples = SAMPLES[: args.limit] if args.limit else SAMPLES
    with tempfile.TemporaryDirectory() as tmp:
        for name, module, inputs in samples:
            for level in LEVELS:
                out = Path(tmp) / f"{name}-{level}"
                try:
                    rti.from_torch(module, inputs, out, decomposition=level, verify=False)
                    ir = torchir.load(out)
                    hir = _core.program_to_hir_json(lower(ir).to_core_json())
                except Exception as e:  # a sample that does not convert here is the op tests' business
                    failed += 1
                    print(f"skipped {name} ({level}): {type(e).__name__}: {str(e)[:100]}", file=sys.stderr)
                    continue
                probed += 1
                why = _core.cuda_refusal(hir)
                if why:
                    # one cause per kind of refusal: node names and values vary by sample
                    cause = re.sub(r'node "[^"]*"|"[^"]*"', "NODE", why)
                    cause = re.sub(r"holds -?\d+", "holds N", cause)
                    causes[cause].append(f"{name}/{level}")
    print(f"{probed} sample graphs probed ({failed} skipped); {sum(map(len, causes.values()))} refused on cuda")
    for cause, hits in sorted(causes.items(), key=lambda kv: -len(kv[1])):
        print(f"- {len(hits)}: {cause}\n    e.g. {', '.join(hits[:6])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
