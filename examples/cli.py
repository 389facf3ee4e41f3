"""The command line: convert a model file, run the bundle on inputs from a file, read exit codes.

    python examples/cli.py [--out DIR]

It runs these (`rlx-torch-import` is `python -m rlx_torch_import.cli`):

    rlx-torch-import examples/mlp.py -o OUT/mlp --name mlp_cli -q      # convert + verify: exit 0/1
    rlx-torch-import run OUT/mlp/bundle --inputs x.npz --save y.safetensors

A model file defines `model` and `example_inputs` (optionally `example_kwargs`), or a
get_model()/build() function returning them: every model-class example here is one. Other
subcommands: `build OUT` (lower again), `verify OUT` (verify the bundle again), `diagnose OUT`
(diagnose.py), `defects`, `coverage`; `--help` on each. Exit codes: 0 ok, 1 parity failed, 2 bad
input, 3 unsupported ops, 4 torch.export failed, 5 internal error, 6 timed out, 7 device, 8 write.
Look at: the verdict line, the run's outputs, and the exit codes printed.
"""

import subprocess
import sys
from pathlib import Path

import numpy as np
from _common import finish, parse_args

HERE = Path(__file__).resolve().parent
CLI = [sys.executable, "-m", "rlx_torch_import.cli"]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    print("  $ rlx-torch-import " + " ".join(args))
    done = subprocess.run([*CLI, *args], capture_output=True, text=True)
    print("    " + (done.stdout + done.stderr).strip().replace("\n", "\n    "))
    print(f"    exit code {done.returncode}")
    return done


def main() -> None:
    args = parse_args(__doc__)
    out = args.out / "cli"
    converted = cli(str(HERE / "mlp.py"), "-o", str(out / "mlp"), "--name", "mlp_cli", "-q")

    out.mkdir(parents=True, exist_ok=True)
    inputs, wrong = out / "x.npz", out / "wrong.npz"
    np.savez(inputs, x=np.ones((4, 64), dtype=np.float32))  # keyed by input name
    ran = cli("run", str(out / "mlp" / "bundle"), "--inputs", str(inputs), "--save", str(out / "y.safetensors"))

    np.savez(wrong, y=np.ones((4, 64), dtype=np.float32))  # an input name the bundle does not take
    refused = cli("run", str(out / "mlp" / "bundle"), "--inputs", str(wrong))  # exit 2: bad input
    saved = (out / "y.safetensors").is_file()
    finish(converted.returncode == 0 and ran.returncode == 0 and saved and refused.returncode == 2)


if __name__ == "__main__":
    main()
