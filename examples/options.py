"""The smaller options of `from_torch` (and their CLI flags), each on the MLP, and `build`/`reverify`.

    python examples/options.py [--out DIR]

- `name="tiny_mlp"` (`--name`): the model's name in meta.json, the report and the crate
  (`rlx-<name>/`); default: from the class name (MLP -> mlp).
- `progress=True` (default off; the CLI shows it unless `-q`): each phase on stderr with its time.
- `threads=1` (`--threads`): RLX's thread pool for verification; default every core the process
  may use (`RLX_WORKERS` sets the same; `threads=` wins).
- `per_node=False` (`--no-per-node`): skip per-node parity (the report's per-node table and
  `first_divergence`); on by default, it costs a share of the conversion time.
- `device="cpu"` (`--device`): where RLX verifies; "cuda" needs the core built with CUDA and a GPU
  (else `DeviceError`, exit 7).
- `timeout=SECONDS` (`--timeout`): a limit for the model's own code (torch.export, each eager
  PyTorch run); past it `TimeLimitError` (exit 6) names the phase.
- `verify=False` (`--no-verify`) writes without verifying; `rti.build(OUT)` lowers the stored
  torch-ir again (no model needed) and verifies; `rti.reverify(OUT)` verifies the bundle as it is.
- `emit`/`emit_style`: see crate_styles.py; `verify_inputs`: verify_inputs.py;
  `decomposition`: decomposition.py; `dynamic_shapes`: dynamic_shapes.py; `kwargs`: hf_llm.py.
Look at: each line's verdict; the progress lines on stderr; the timeout's message.
"""

import time

import torch
from _common import finish, parse_args, show
from mlp import example_inputs, model
from torch import nn

import rlx_torch_import as rti


class Slow(nn.Module):
    """A forward that takes 3 seconds (as a model stuck in a data loader would)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(3)
        return x + 1


def main() -> None:
    args = parse_args(__doc__)
    out = args.out / "options"
    report = rti.from_torch(
        model, example_inputs, out, name="tiny_mlp", progress=True, threads=1, per_node=False, device="cpu"
    )
    ok = show(report, out)
    named = '"tiny_mlp"' in (out / "bundle" / "meta.json").read_text()
    print(f"  name in meta.json: {named}; per-node rows with per_node=False: {len(report.nodes)}")

    out2 = args.out / "unverified"
    rti.from_torch(model, example_inputs, out2, verify=False)  # writes, checks nothing against PyTorch
    print(f"  verify=False wrote {sorted(p.name for p in out2.iterdir())}")
    rebuilt = rti.build(out2)  # lower torch-ir.json again into out2/bundle and verify it
    print(f"  build(OUT): {'PASS' if rebuilt.ok else 'FAIL'}")
    again = rti.reverify(out2)  # verify the bundle as it is: writes report-cpu.*
    print(f"  reverify(OUT): {'PASS' if again.ok else 'FAIL'} -> {out2 / 'report-cpu.md'}")
    ok = ok and named and rebuilt.ok and again.ok

    try:
        rti.from_torch(Slow(), (torch.randn(2),), args.out / "slow", timeout=1.0)
        ok = False
    except rti.TimeLimitError as e:
        print(f"  timeout=1.0 on a 3 s forward: TimeLimitError (exit {int(e.exit_code)}): {e.message}")
    finish(ok)


if __name__ == "__main__":
    main()
