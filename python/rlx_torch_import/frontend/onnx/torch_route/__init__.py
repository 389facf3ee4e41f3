"""The torch route: translate an ONNX model into a `torch.nn.Module`, for the PyTorch path (`from_torch`).

A whole-model fallback of the ONNX front end for what RLX's own ONNX importer does not carry (float64,
float16, bfloat16, int16 and unsigned graph values; op types it lacks). Our own translator, written
from the ONNX operator specifications (`onnx.defs.get_schema(op, opset)`).

    from rlx_torch_import.frontend.onnx.torch_route import Untranslatable, to_module
    module, args, names = to_module(model, {"x": x})   # module(*args) -> tuple of the graph outputs
    torch.export.export(module, args)                    # shapes are static, fixed by the example inputs

- `to_module(model, inputs)`: (module in eval mode, example args in graph-input order, input names).
  forward takes the graph's non-initializer inputs positionally and returns a tuple of the graph
  outputs in order, in ONNX's dtypes and shapes. Initializers (and folded constants) with more than 16
  elements that the module uses at run time are registered buffers named after them (sanitized;
  `module.onnx_names`: buffer name -> ONNX name); smaller ones, Constant nodes and every value computed
  from constants alone (Shape of a value: shapes are static) are translation-time constants, so shape
  operands (Reshape's shape, Slice's starts, pads, Resize sizes, TopK k, ...) are static Python ints.
- `Untranslatable`: raised with `.items`, (node name, "OpType (domain opset N)", reason) for every node
  that cannot be translated (op type without a handler, another domain, a dtype torch lacks kernels
  for, a shape operand computed at run time, a data-dependent output shape such as NonZero's, ...).

Modules: `module` (registry, translation context, the interpreter module), `translate` (`to_module`),
and one module per op family (`ops_elementwise`, `ops_shape`, `ops_reduce`, `ops_nn`, `ops_index`,
`ops_misc`, `ops_seq`), each registering handlers with `@handles("Op", ...)`.
"""

from __future__ import annotations

from rlx_torch_import.frontend.onnx.torch_route.module import Untranslatable, load_families
from rlx_torch_import.frontend.onnx.torch_route.translate import to_module

load_families()

__all__ = ["Untranslatable", "to_module"]
