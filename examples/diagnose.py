"""Diagnose a failing conversion: find the first node that diverges from PyTorch, and a repro.

    python examples/diagnose.py [--out DIR]
    rlx-torch-import diagnose OUT/        # the CLI's form (exit 1: a divergence was found)

The failure is planted on purpose with the public API only: one bias of a checkpoint holds a NaN
(it happens with a diverged training run). PyTorch's ReLU passes NaN through; RLX's ReLU maps NaN
to a number (an accepted difference, README "Limits"), so the conversion fails verification
(exit 1) at the output, two layers later. Per-node parity compares every node's value with
PyTorch's, fed PyTorch's own inputs (local) and fed the model inputs (cumulative), and names the
first node over its local budget: the `relu`, not the output layer where the error shows.
Look at: `report.first_divergence`, then what `diagnose` prints and its repro folder
(`repro.py` runs the one op with torch on the real inputs and exits 1 on the mismatch).
This example exits 0 when the planted divergence is found where it was planted.
"""

import subprocess
import sys

import torch
from _common import finish, parse_args, show
from torch import nn

import rlx_torch_import as rti


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(8, 16), nn.Linear(16, 16), nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc3(torch.tanh(self.fc2(torch.relu(self.fc1(x)))))


def main() -> None:
    args = parse_args(__doc__)
    torch.manual_seed(0)
    model = Net().eval()
    with torch.no_grad():
        model.fc1.bias[3] = float("nan")  # the planted failure
    out = args.out / "diagnose"
    report = rti.from_torch(model, (torch.randn(2, 8),), out)  # a failed verify runs per-node parity
    show(report, out)
    first = report.first_divergence
    print(f"  report.first_divergence: {first.node if first else None} ({first.aten if first else ''})")

    # The same from the command line, on the conversion folder alone (no model needed).
    cmd = [sys.executable, "-m", "rlx_torch_import.cli", "diagnose", str(out)]
    print("  $ rlx-torch-import diagnose", out)
    done = subprocess.run(cmd, capture_output=True, text=True)
    print("    " + done.stdout.strip().replace("\n", "\n    "))
    repro = out / "repro-relu" / "repro.py"
    ran = subprocess.run([sys.executable, repro.name], cwd=repro.parent, capture_output=True, text=True)
    print(f"  $ python {repro}  -> exit {ran.returncode}")
    print("    " + "\n    ".join(ran.stdout.strip().splitlines()[-3:]))
    found = first is not None and first.aten == "aten.relu.default" and done.returncode == 1
    finish(not report.ok and found and "first divergence: relu" in done.stdout and ran.returncode == 1)


if __name__ == "__main__":
    main()
