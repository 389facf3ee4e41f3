"""The crate styles, and the check that a style can express a program, made before anything is written."""

from __future__ import annotations

from ..errors import ExitCode, RtiError
from ..program import Program
from .tensor import unsupported_ops

STYLES = ("graph", "tensor", "flow")


class CrateStyleError(RtiError):
    """The chosen crate style cannot express the model; names the op and a style that can."""

    exit_code = ExitCode.UNSUPPORTED


def check_style(program: Program, style: str, dynamic: bool = False, *, staged: bool = False) -> None:
    """Fail before anything is written when `style` cannot express the program. A program with size
    stages (`staged`: sizes that depend on tensor values) is written in the graph style only."""
    if style not in STYLES:
        raise CrateStyleError(f"crate style {style!r} is not one of {', '.join(STYLES)}")
    if staged and style != "graph":
        raise CrateStyleError(
            "the model has sizes that depend on tensor values (nonzero, masked_select, unique, bincount, "
            "repeat_interleave, .item() as a size): its crate runs them in size stages and then the main graph "
            f"specialized at the sizes read, which only the graph style does (asked for {style!r})",
            hint="use --emit-style graph",
        )
    if dynamic and style != "graph":
        raise CrateStyleError(
            f"a model with dynamic dims is written as a graph-style crate only (asked for {style!r}): it "
            "specializes RLX's symbolic graph per binding, which the tensor DSL and rlx_flow cannot express",
            hint="use --emit-style graph, or export with static shapes for the tensor and flow styles",
        )
    if style == "tensor":
        missing = unsupported_ops(program)
        if missing:
            listed = "; ".join(f"{op} (needed by {where})" for op, where in sorted(missing.items()))
            raise CrateStyleError(
                f"the rlx_tensor DSL has no method for {len(missing)} RLX op(s) this model needs: {listed}",
                hint="use --emit-style graph (or flow), which print every op the registry emits",
            )
