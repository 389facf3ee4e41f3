"""The lines a crate's parity test and example take for a model with random outputs (torch-ir
`random_outputs`, the outputs whose values depend on random draws): RLX draws with its own generator,
so those outputs are reported as "random: not compared" and never fail the check (decisions aw and ax). A
model without random outputs gets no lines: its test and example are the templates' text unchanged."""

from __future__ import annotations

from ..torchir import TorchIR
from .rust_names import rust_str


def random_lines(ir: TorchIR, indent: str, mark: str) -> dict[str, str | list[str]]:
    """RANDOM_CONST, RANDOM_PRINT and RANDOM_DROP for `parity_test.rs` / `run_example.rs`: `indent`, the
    loop body's; `mark`, what starts a printed parity line there."""
    if not ir.random_outputs:
        return {"RANDOM_CONST": [], "RANDOM_PRINT": [], "RANDOM_DROP": []}
    names = ", ".join(rust_str(n) for n in ir.random_outputs)
    outer = indent.removesuffix("    ")
    return {
        "RANDOM_CONST": [
            "",
            "/// The outputs whose values depend on the model's random draws (torch-ir `random_outputs`):",
            "/// RLX draws with its own generator, so they are not compared with PyTorch's draws.",
            f"const RANDOM_OUTPUTS: &[&str] = &[{names}];",
        ],
        "RANDOM_PRINT": [
            f"{indent}if RANDOM_OUTPUTS.contains(&parity.name.as_str()) {{",
            f'{indent}    println!("{mark}{{}}: random: not compared", parity.name);',
            f"{indent}    continue;",
            f"{indent}}}",
        ],
        "RANDOM_DROP": [
            f"{outer}let report: Vec<_> = "
            "report.into_iter().filter(|p| !RANDOM_OUTPUTS.contains(&p.name.as_str())).collect();"
        ],
    }
