"""Which arguments an ATen (or prims) overload writes in place: torch's schema annotations (`Tensor(a!)`)
and the writes a kernel does without one."""

from __future__ import annotations

from functools import cache

# Arguments a kernel writes although its schema does not say so (`Tensor?`, no `(a!)`): training-mode
# `aten.batch_norm` updates its running statistics in place without moving their version counter.
_UNANNOTATED_WRITES = {"aten.batch_norm.default": (3, 4)}


@cache
def written_arguments(target: str) -> tuple[int, ...]:
    """The positions of the arguments an ATen (or prims) overload writes in place, from torch's schema
    (`Tensor(a!)`: batch norm's running statistics) and the writes it does not annotate; () for other targets."""
    if target in _UNANNOTATED_WRITES:
        return _UNANNOTATED_WRITES[target]
    if not target.startswith(("aten.", "prims.")) or target.count(".") < 2:
        return ()
    import torch

    ns, packet, overload = target.split(".", 2)
    try:
        op = getattr(getattr(getattr(torch.ops, ns), packet), overload)
    except (AttributeError, RuntimeError):
        return ()
    return tuple(i for i, a in enumerate(op._schema.arguments) if a.alias_info is not None and a.alias_info.is_write)
