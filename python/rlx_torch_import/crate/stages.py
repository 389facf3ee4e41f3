"""A staged model's crate files (docs/design.md, decision ax): its size stages as `src/stage<k>.*`
(RLX HIR JSON, or `.rlxmodel` text over the input dims), `src/stages.rs` running them, and the lines
`model_dynamic.rs` takes to bind their sizes before the main graph runs.

The stages are lowered here as `lower.stages.write_stages` lowers them for the bundle (the same
torch-ir, the same lowering), so the crate runs the graphs the bundle runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import _core
from ..torchir import TorchIR
from .rust_names import comment, fill, rust_str

# What model_dynamic.rs holds for a staged model (a non-staged one leaves the lines out).
STAGE_LINES = {
    "STAGE_FIELD": ["    /// The compiled size stages (`stages.rs`).", "    stages: stages::Stages,"],
    "STAGE_INIT": ["            stages: stages::Stages::default(),"],
    "STAGE_BIND": [
        "        let binding = self.stages.bind(binding, inputs, self.device, &self.weights)?;",
        "        stages::guarded(&binding, || self.compiled_at(binding.clone(), inputs).map(|_| ()))?;",
    ],
}


@dataclass
class StageFiles:
    """The files of a crate's size stages: `src/<name>` -> text, and `src/stages.rs`'s STAGES rows."""

    files: dict[str, str] = field(default_factory=dict)
    rows: list[str] = field(default_factory=list)


def is_staged(ir: TorchIR) -> bool:
    """Whether `ir` has sizes that depend on tensor values (symbols a size stage computes)."""
    return any(s.stage for s in ir.symbols)


def stage_files(ir: TorchIR) -> StageFiles:
    """Lower each size stage of `ir` and return its crate files and STAGES rows. Raises as
    `lower.stages.stage_ir` and `lower` do (LoweringError, UnsupportedOpsError)."""
    from ..lower.registry import lower
    from ..lower.stages import stage_ir

    found = StageFiles()
    for k in sorted({s.stage for s in ir.symbols if s.stage}):
        program_ir, symbols = stage_ir(ir, k)
        if program_ir.is_dynamic:  # dynamic input dims: a symbolic graph, specialized per binding
            from ..lower.generalize import lower_symbolic

            symbolic = lower_symbolic(program_ir)
            program, name, text = symbolic.program, f"stage{k}.rlxmodel", symbolic.rlxmodel
        else:
            program = lower(program_ir)
            name, text = f"stage{k}.hir.json", _core.program_to_hir_json(program.to_core_json())
        found.files[name] = text
        sizes = [
            f"            StageSize {{ symbol: {s.id}, name: {rust_str(s.name)}, "
            f"node: {rust_str(s.defined_by or '')} }}, // {comment(s.label)}"
            for s in symbols
        ]
        params = ", ".join(rust_str(p.name) for p in program.params)
        found.rows += [
            "    Stage {",
            f"        file: {rust_str(name)},",
            f"        text: include_str!({rust_str(name)}),",
            f"        symbolic: {'true' if program_ir.is_dynamic else 'false'},",
            f"        params: &[{params}],",
            "        sizes: &[",
            *sizes,
            "        ],",
            "    },",
        ]
    return found


def stages_rs(found: StageFiles, template: str) -> str:
    """src/stages.rs from its template and the stages' rows."""
    return fill(template, {"STAGES": found.rows}, "stages.rs")
