"""PyTorch's intermediate values from torch-ir alone: every node of a program run in eager PyTorch
(`torch_values`), optionally in float64, for per-node parity (`verify/nodes.py`) and the judge of
outliers (`verify/judge.py`)."""

from __future__ import annotations

import math
import operator
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import safetensors_io, torchir
from ..dtypes import is_complex
from ..torchir import Node, TorchIR


def _torch_dtype(name: str) -> Any:
    import torch

    return getattr(torch, name)


def to_torch(raw: safetensors_io.RawTensor) -> Any:
    import torch

    arr = raw.to_numpy()
    if raw.dtype == "bfloat16":
        return torch.from_numpy(np.ascontiguousarray(arr, dtype=np.float32)).to(torch.bfloat16)
    return torch.from_numpy(np.array(arr))


# The float dtypes a float64 run (`torch_values(..., float64=True)`) computes in float64 instead.
_WIDENED = ("float32", "float16", "bfloat16")


def _decode(arg: dict[str, Any], env: dict[str, Any], float64: bool = False) -> Any:
    """A torch-ir argument as a Python/torch value for calling the ATen op (`float64`: float dtype
    arguments name float64)."""
    import torch

    ((tag, payload),) = arg.items()
    if tag == "tensor":
        return env[payload]
    if tag == "list":
        return [_decode(a, env, float64) for a in payload]
    if tag == "float":
        return torchir.decode_float(payload)
    if tag == "dtype":
        if float64 and payload == "complex64":  # complex values widen with their parts
            return torch.complex128
        return torch.float64 if float64 and payload in _WIDENED else _torch_dtype(payload)
    if tag == "device":
        return torch.device("cpu")
    if tag == "layout":
        return getattr(torch, payload)
    if tag == "memory_format":
        return getattr(torch, payload)
    if tag == "none":
        return None
    return payload


_PYTHON_OPS: dict[str, Callable[..., Any]] = {
    "operator.add": operator.add,
    "operator.sub": operator.sub,
    "operator.mul": operator.mul,
    "operator.truediv": operator.truediv,
    "operator.floordiv": operator.floordiv,
    "operator.mod": operator.mod,
    "operator.pow": operator.pow,
    "operator.neg": operator.neg,
    "operator.ge": operator.ge,
    "operator.gt": operator.gt,
    "operator.le": operator.le,
    "operator.lt": operator.lt,
    "operator.eq": operator.eq,
    "operator.ne": operator.ne,
    "operator.and_": operator.and_,
    "operator.or_": operator.or_,
    "math.floor": math.floor,
    "math.ceil": math.ceil,
    "math.trunc": math.trunc,
}


def _call(node: Node, env: dict[str, Any], float64: bool = False) -> list[Any]:
    """Run one torch-ir node with torch's own op; its tensor outputs in `node.outputs` order."""
    import torch

    args = [_decode(a, env, float64) for a in node.args]
    kwargs = {k: _decode(v, env, float64) for k, v in node.kwargs.items()}
    if node.target.startswith(("aten.", "prims.", "quantized_decomposed.")):
        if node.target.startswith("quantized_decomposed."):  # the PT2E ops: defined by importing torch's module
            import torch.ao.quantization.fx._decomposed
        ns, packet, overload = node.target.split(".", 2)
        op = getattr(getattr(getattr(torch.ops, ns), packet), overload)
        result = op(*args, **kwargs)
    elif node.target in _PYTHON_OPS:  # values read from tensors: 0-d tensors here, Python numbers in torch
        plain = [a.item() if isinstance(a, torch.Tensor) else a for a in args]
        result = _PYTHON_OPS[node.target](*plain)
    elif node.target.startswith("torch.sym_"):
        plain = [a.item() if isinstance(a, torch.Tensor) else a for a in args]
        result = getattr(torch, node.target.removeprefix("torch."))(*plain)
    else:
        raise NotImplementedError(f"no PyTorch evaluation for {node.target}")
    results = list(result) if isinstance(result, (tuple, list)) else [result]
    found: list[Any] = []
    for spec, value in zip(node.outputs, results, strict=False):
        if spec.dtype == "none" or value is None:
            found.append(None)
            continue
        if isinstance(value, torch.Tensor):
            found.append(value)
            continue
        dtype = "float64" if float64 and spec.dtype in _WIDENED else spec.dtype
        found.append(torch.tensor(value, dtype=_torch_dtype(dtype)))
    return found


def torch_values(
    ir: TorchIR,
    inputs: dict[str, Any],
    weights: dict[str, Any],
    *,
    float64: bool = False,
) -> tuple[dict[str, Any], dict[str, str]]:
    """Every tensor value of a (static or bound) program, computed by PyTorch from `inputs` (input
    name -> tensor) and `weights` (state_dict key -> tensor). Returns the values and, per node PyTorch
    could not evaluate here, why (its outputs and what depends on them are then absent).

    `float64`: the float32/float16/bfloat16 inputs, weights and dtype arguments become float64, so every
    float value is computed in float64 (the judge of `compare.compare_output`)."""
    import torch

    env: dict[str, Any] = dict(inputs)
    env.update({w.name: weights[w.key] for w in ir.weights})
    declared = [(s.name, s.dtype) for s in ir.inputs] + [(w.name, w.dtype) for w in ir.weights]
    for name, dtype in declared:  # complex: stored as its float pairs (`safetensors_io.iter_torch`)
        value = env.get(name)
        if is_complex(dtype) and isinstance(value, torch.Tensor) and not value.is_complex():
            env[name] = torch.view_as_complex(value.contiguous())
    if float64:
        env = {k: _widen(v) for k, v in env.items()}
    missing: dict[str, str] = {}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's warnings here repeat what the export and eager runs said
        for node in ir.nodes:
            if not node.outputs:
                continue
            try:
                results = _call(node, env, float64)
            except Exception as e:  # an op torch cannot run alone here (an effect, a missing input)
                missing[node.name] = f"PyTorch could not run it alone ({type(e).__name__}: {str(e)[:120]})"
                continue
            for spec, value in zip(node.outputs, results, strict=False):
                if value is not None:
                    env[spec.name] = value
    return env, missing


def _widen(v: Any) -> Any:
    """A float32/float16/bfloat16 tensor as float64, a complex64 one as complex128, anything else as it is."""
    import torch

    if isinstance(v, torch.Tensor) and v.dtype in _torch_widened():
        return v.double()
    if isinstance(v, torch.Tensor) and v.dtype == torch.complex64:
        return v.to(torch.complex128)
    return v


def _torch_widened() -> tuple[Any, ...]:
    import torch

    return tuple(getattr(torch, d) for d in _WIDENED)
