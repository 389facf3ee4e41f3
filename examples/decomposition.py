"""Decomposition levels: how far torch.export's ops are decomposed before lowering to RLX.

    python examples/decomposition.py [--out DIR]
    rlx-torch-import examples/mlp.py -o out/mlp-core --decomposition core      # the CLI's form

- "aten": the ops as torch.export records them (`aten.linear`, `aten.layer_norm`, `aten.gelu`):
  the fewest nodes, each lowered to RLX's fused op where one exists.
- "high" (the default): torch's own high-level decompositions where they help, big ops kept
  (for this MLP the same as "aten").
- "core": Core ATen only (`aten.addmm`, `aten.native_layer_norm`, `aten.permute` ...): the
  smallest op set, for a model whose ops the registry knows only in their decomposed form.
Every level ends in the same RLX ops here and verifies; on other models they differ.
An op the registry lacks is decomposed through torch's decomposition table automatically
(`auto_decompose=True`, at most `max_decompose_rounds=4` rounds) and the report says so.
Look at: each level's verdict and its ATen ops (bundle/meta.json `aten_histogram`).
"""

import json

from _common import finish, parse_args, show
from mlp import example_inputs, model

import rlx_torch_import as rti


def main() -> None:
    args = parse_args(__doc__)
    ok = True
    for level in ("aten", "high", "core"):
        out = args.out / f"mlp-{level}"
        report = rti.from_torch(model, example_inputs, out, decomposition=level)
        ok = show(report, out) and ok
        meta = json.loads((out / "bundle" / "meta.json").read_text())
        print(
            f"    ATen ops at {level}: " + ", ".join(f"{op} x{n}" for op, n in sorted(meta["aten_histogram"].items()))
        )
        print("    RLX ops: " + ", ".join(f"{op} x{n}" for op, n in sorted(meta["op_histogram"].items())))
    finish(ok)


if __name__ == "__main__":
    main()
