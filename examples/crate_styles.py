"""A standalone Rust crate in each style (graph, tensor, flow), written next to the bundle.

    python examples/crate_styles.py [--out DIR] [--cargo]
    rlx-torch-import examples/mlp.py -o out/mlp --emit bundle,crate --emit-style tensor    # the CLI's form

`emit=("bundle", "crate")` writes OUT/rlx-<name>/, a crate you can copy into your project:
`src/graph.rs` (one statement per RLX node, under a comment naming the ATen op and module),
`src/lib.rs` (`Model::load`, `Model::run`), `tests/parity.rs` (PyTorch's reference outputs) and
`examples/run.rs`. Styles: `graph` (RLX's HIR builder, every op), `tensor` (the rlx_tensor DSL,
the most readable; it refuses a model that needs an op it lacks: shown here with a
transposed convolution), `flow` (an
rlx_flow ModelFlow). Writing a crate takes a second; building it takes minutes the first time
(RLX compiles once per CARGO_TARGET_DIR), so `cargo test --release` runs only with `--cargo`.
Look at: each crate's files and the first node of its src/graph.rs.
"""

import os
import subprocess
from pathlib import Path

import torch
from _common import finish, parse_args, show
from mlp import example_inputs, model

import rlx_torch_import as rti


def cargo_test(crate: Path) -> bool:
    """`cargo test --release` in the crate: its parity test against PyTorch's reference outputs."""
    env = dict(os.environ)
    env.setdefault("CARGO_TARGET_DIR", str(Path.home() / ".cache/rlx-torch-import/target"))  # shared RLX build
    print(f"  cargo test --release in {crate} ...", flush=True)
    return subprocess.run(["cargo", "test", "--release", "--quiet"], cwd=crate, env=env).returncode == 0


def main() -> None:
    args = parse_args(__doc__, cargo=True)
    ok = True
    for style in ("graph", "tensor", "flow"):
        out = args.out / f"mlp-{style}"
        report = rti.from_torch(model, example_inputs, out, emit=("bundle", "crate"), emit_style=style)
        ok = show(report, out) and ok
        crate = out / "rlx-mlp"
        files = sorted(str(p.relative_to(crate)) for p in crate.rglob("*") if p.is_file())
        print(f"  crate ({style}): {crate}\n    files: {', '.join(files)}")
        code = (crate / "src" / "graph.rs").read_text().splitlines()
        first = next(i for i, line in enumerate(code) if "// aten." in line)  # the first node's comment
        print("    src/graph.rs, the first node:\n      " + "\n      ".join(code[first : first + 3]))
        if args.cargo:
            ok = cargo_test(crate) and ok

    # The tensor DSL has no transposed convolution: refused before anything is written (CLI exit 3),
    # naming the module and the op, with a hint to use the graph style.
    deconv, inputs = torch.nn.Sequential(torch.nn.ConvTranspose2d(3, 4, 2)).eval(), (torch.randn(1, 3, 4, 4),)
    try:
        rti.from_torch(deconv, inputs, args.out / "deconv-tensor", emit=("bundle", "crate"), emit_style="tensor")
        ok = False
    except rti.RtiError as e:
        print(f"  tensor style on a ConvTranspose2d: {type(e).__name__} (exit {int(e.exit_code)}):")
        print(f"    {e.message}\n    hint: {e.hint}")
    finish(ok)


if __name__ == "__main__":
    main()
