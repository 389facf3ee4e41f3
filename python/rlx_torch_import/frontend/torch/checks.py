"""The runtime checks of an exported graph, which an RLX graph cannot make: torch.export's size
asserts, `torch._check(...)` on tensor values and linalg's error checks, with everything computed
only for them (the check cone). Each is left out of torch-ir and recorded as dropped."""

from __future__ import annotations

import re
from typing import Any

import torch

from .encode import data_dependent
from .provenance import op_name, source_code, source_line

# torch.export's runtime checks on sizes (`torch._check`, range asserts): the binding checks
# (`sizes.infer_binding`) make them before a run, so they are not graph nodes here.
SIZE_ASSERTS = {
    "aten._assert_scalar.default",
    "aten.sym_constrain_range.default",
    "aten.sym_constrain_range_for_size.default",
    "aten._assert_async.msg",
}


# Side-effecting ops that only raise on bad values (torch.linalg's checks): dropped from the graph.
ERROR_CHECKS = {torch.ops.aten._linalg_check_errors.default}


def only_checked(node: torch.fx.Node) -> bool:
    """Every use of `node` is a runtime check (`_assert_scalar`)."""
    return all(op_name(u.target) in SIZE_ASSERTS for u in node.users)


def check_cone(graph: torch.fx.Graph) -> set[torch.fx.Node]:
    """The runtime checks (`SIZE_ASSERTS`) and every pure node whose values reach only them: what
    `torch._check(...)`, `torch._check_tensor_all(...)` and `_assert_async` compute (`aten._is_all_true`,
    `.item()`, `sym_ite`, comparisons). An RLX graph cannot raise, so none of it is computed; each check
    is recorded as dropped (`dropped_check`), as torch.export's own size checks are."""
    cone: set[torch.fx.Node] = set()
    for node in reversed(graph.nodes):
        if node.op != "call_function":
            continue
        if op_name(node.target) in SIZE_ASSERTS:
            cone.add(node)
        elif node.users and all(u in cone for u in node.users) and _pure(node):
            cone.add(node)
    return cone


def _pure(node: torch.fx.Node) -> bool:
    """An ATen op that writes nothing, or a Python operator / function on sizes (`sym_ite`)."""
    if isinstance(node.target, torch._ops.OpOverload):
        return not node.target._schema.is_mutable
    return op_name(node.target).startswith(("operator.", "math.", "torch.sym_"))


def dropped_check(node: torch.fx.Node, target: str) -> dict[str, Any]:
    """The record of a runtime check left out of the graph, and why. A check of tensor values is
    named by the user's code and line (`torch._check_tensor_all(mask >= 0) at model.py:7`): torch
    lowers one such check into several asserts, whose records are then equal (kept once)."""
    message = next((a for a in node.args if isinstance(a, str)), "").removeprefix("Runtime assertion failed for ")
    cond = node.args[0] if node.args else None
    val = cond.meta.get("val") if isinstance(cond, torch.fx.Node) else cond
    if data_dependent(val) or re.search(r"\bu\d+\b", message):  # u0, u1: torch's unbacked (tensor-read) symbols
        reason = "checks a value read from a tensor; an RLX graph cannot raise, so the check is not made"
        where, code = source_line(node), source_code(node)
        if where:
            message = f"{code or 'a check of tensor values'} at {where}"
    else:
        reason = "a size check torch.export proved for the example, enforced by the symbols' ranges at each binding"
    return {"node": node.name, "target": target, "check": message, "reason": reason}
