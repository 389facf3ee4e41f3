"""Where an fx node comes from: its op's name, the module that made it, the user's source line."""

from __future__ import annotations

import re
from typing import Any

import torch

from ...errors import InputError


def op_name(target: Any) -> str:
    """`aten.sym_size.int`, or `operator.mul` for a Python operator on SymInts."""
    if getattr(target, "__module__", None) in ("_operator", "operator"):
        return f"operator.{target.__name__}"
    if getattr(target, "__module__", None) == "math":
        return f"math.{target.__name__}"
    if getattr(target, "__module__", "").startswith("torch") and callable(target) and not hasattr(target, "_schema"):
        return f"{target.__module__}.{target.__name__}"
    return str(target)


def module_info(node: torch.fx.Node) -> tuple[str, str]:
    """The path (`encoder.layers.0`) and qualified type of the innermost module a node comes from."""
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return "", ""
    path, mtype = list(stack.values())[-1]
    path = re.sub(r"^L\['self'\]\.?", "", str(path))
    mtype = mtype if isinstance(mtype, str) else f"{mtype.__module__}.{mtype.__qualname__}"
    return path, mtype


def source_line(node: torch.fx.Node) -> str:
    """`file.py:LINE` of the stack trace's last frame (the user's code); "" when unknown."""
    trace = node.meta.get("stack_trace") or ""
    found = re.findall(r'File "([^"]+)", line (\d+)', trace)
    if not found:
        return ""
    file, line = found[-1]
    return f"{file.rsplit('/', 1)[-1]}:{line}"


def source_code(node: torch.fx.Node) -> str:
    """The user's line of code a node comes from (the line under the stack trace's last frame)."""
    lines = (node.meta.get("stack_trace") or "").rstrip().splitlines()
    return lines[-1].strip() if len(lines) >= 2 and lines[-2].strip().startswith("File") else ""


def at_module(err: InputError, node: torch.fx.Node) -> InputError:
    """`err` with the module path and source line of the node it arose at."""
    path, _ = module_info(node)
    where = ", ".join(x for x in (f"module {path}" if path else "", source_line(node)) if x)
    if not where or where in err.message:
        return err
    return InputError(f"{err.message} [{where}]", hint=err.hint)
