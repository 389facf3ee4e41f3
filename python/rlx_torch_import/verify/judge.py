"""The float64 judge: a conversion's outputs computed by PyTorch's own ATen ops in float64.

`compare.compare_output` needs it for *outliers*: output elements within the output's scale budget
but beyond their own magnitude's. PyTorch runs torch-ir's nodes (`torch_values.torch_values`) with every
float32/float16/bfloat16 input, weight and dtype argument widened to float64, so the judge has the
program's semantics at about 29 more bits than a float32 run. It is computed only for a point
(the example, a sweep point, an input set) where some output has outliers.
"""

from __future__ import annotations

import numpy as np

from .. import safetensors_io
from ..conversion import Conversion
from ..layout import input_key
from ..torchir import TorchIR, specialize


def _binding(ir: TorchIR, shapes: dict[str, tuple[int, ...]]) -> dict[str, int]:
    """torch symbol name -> size, read from the inputs' shapes (a symbol that is a whole dim)."""
    found: dict[str, int] = {}
    for spec in ir.inputs:
        for dim, size in zip(spec.shape, shapes.get(spec.name, ()), strict=False):
            if isinstance(dim, str) and dim.isidentifier():
                found[dim] = int(size)
    return found


def float64_outputs(
    ir: TorchIR,
    inputs: dict[str, safetensors_io.RawTensor],
    weights: dict[str, safetensors_io.RawTensor],
    binding: dict[str, int] | None = None,
) -> tuple[dict[str, np.ndarray], str]:
    """The float outputs of `ir` (output name -> float64 array) on `inputs` (input name -> tensor),
    computed by PyTorch in float64 from `weights` (state_dict key -> tensor) at `binding` (torch symbol
    name -> size; default: read from the inputs' shapes); with an empty dict, the reason there is none
    (an op without a float64 kernel, a symbol the inputs do not fix, ...)."""
    import torch

    from .torch_values import to_torch, torch_values

    if ir.is_dynamic:
        binding = binding or _binding(ir, {k: tuple(v.shape) for k, v in inputs.items()})
        missing = sorted({s.name for s in ir.symbols} - set(binding))
        if missing:
            return {}, f"the inputs do not fix symbol(s) {', '.join(missing)}"
        try:
            ir = specialize(ir, binding)
        except Exception as e:  # a binding torch-ir refuses: the run itself reports that
            return {}, f"the program does not bind at {binding} ({type(e).__name__})"
    used = {w.key for w in ir.weights}
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)  # ops whose dtype torch infers (a float scalar_tensor) widen too
    try:
        env, missing_nodes = torch_values(
            ir,
            {name: to_torch(t) for name, t in inputs.items()},
            {key: to_torch(t) for key, t in weights.items() if key in used},
            float64=True,
        )
    finally:
        torch.set_default_dtype(default)
    found: dict[str, np.ndarray] = {}
    for spec in ir.outputs:
        value = env.get(spec.value)
        if isinstance(value, torch.Tensor) and value.is_complex():  # judged as its float pairs
            value = torch.view_as_real(value.resolve_conj().resolve_neg())
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            found[spec.name] = value.detach().to(torch.float64).contiguous().numpy()
    if not found and missing_nodes:
        node, why = next(iter(missing_nodes.items()))
        return {}, f"PyTorch cannot run node {node} in float64 ({why})"
    return found, ""


class Judge:
    """Float64 outputs for the points of one conversion, computed on first use per point; its weights
    are read once (`conversion.Conversion`)."""

    def __init__(self, conversion: Conversion) -> None:
        self.conversion = conversion
        self._points: dict[str, tuple[dict[str, np.ndarray], str]] = {}

    def outputs(self, prefix: str, binding: dict[str, int] | None = None) -> tuple[dict[str, np.ndarray], str]:
        """(output name -> float64 array, why none) at the point whose reference keys start `prefix`
        (a dynamic program's sizes: `binding`, torch symbol name -> size, or read from the inputs)."""
        if prefix not in self._points:
            conv = self.conversion
            try:
                weights = conv.raw_weights
                inputs = {s.name: conv.reference[input_key(s.name, prefix)] for s in conv.ir.inputs}
                self._points[prefix] = float64_outputs(conv.ir, inputs, weights, binding)
            except Exception as e:  # the judge is extra evidence: without it the scale budget decides
                self._points[prefix] = ({}, f"the float64 run failed ({type(e).__name__}: {str(e)[:120]})")
        return self._points[prefix]

    def codes(self, prefix: str, binding: dict[str, int] | None = None) -> tuple[dict[str, np.ndarray], str]:
        """PyTorch's outputs with RLX's quantization codes fed (`verify/codes.py`) at the point `prefix`, and a
        note (or why there are none)."""
        key = f"codes:{prefix}"
        if key not in self._points:
            from .codes import code_fed_outputs

            try:
                self._points[key] = code_fed_outputs(self.conversion, prefix, binding)
            except Exception as e:  # extra evidence only: without it the budgets decide
                self._points[key] = ({}, f"the code-fed run failed ({type(e).__name__}: {str(e)[:120]})")
        return self._points[key]

    def ties(self, prefix: str, binding: dict[str, int] | None = None) -> tuple[dict[str, np.ndarray], str]:
        """PyTorch's outputs with RLX's choices among tied topk/sort values substituted (`verify/tie_fed.py`) at the
        point `prefix`, and a note naming the nodes (or why there are none)."""
        key = f"ties:{prefix}"
        if key not in self._points:
            from .tie_fed import tie_fed_outputs

            try:
                self._points[key] = tie_fed_outputs(self.conversion, prefix, binding)
            except Exception as e:  # extra evidence only: without it the output fails as it is
                self._points[key] = ({}, f"the tie-fed run failed ({type(e).__name__}: {str(e)[:120]})")
        return self._points[key]
