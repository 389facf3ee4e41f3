"""`broadcast_channel_params`, `flatten_trailing_broadcasts`: broadcasting binaries in the forms RLX's
CPU backend runs without an `Expand`, or with its fast one.

RLX 0.2.19's CPU backend gives every `Binary` operand that is neither the output's shape, a scalar
nor a trailing slice of it (`[C]` of `[N, C]`) an `Expand` to the full shape first (rlx-compile
`legalize_broadcast.rs`, run by rlx-runtime `backend/cpu_backend.rs` `compile_lir`). Two kinds of
those cost more than the op they feed:

- The `Expand` of a parameter (a convolution's bias or a folded batch norm's shift, `[1, C, 1, 1]`)
  is a "static weight pack" to RLX's memory planner (rlx-compile `memory.rs`,
  `extend_static_weight_pack_liveness`): it gets an arena slot of its own, of the full output size,
  for the whole graph, yet is recomputed on every run, and that slot is zeroed with the rest of the
  scratch before each run. `broadcast_channel_params` stores such a parameter already broadcast,
  as `[C, *spatial]`: a trailing slice of `[N, C, *spatial]`, which RLX adds with no `Expand` (its
  BiasAdd kernel). The stored weights grow by `C * spatial` elements per such parameter, 1/N of
  the slot RLX would keep, so only batched outputs (N > 1) are rewritten, and only up to
  `MAX_BROADCAST_ELEMENTS`. On torchvision's mobilenet_v3_small at batch 4 this removed 52
  `Expand`s and shrank the arena RLX zeroes per run from 32 MB to 8 MB (weights 10 -> 16 MB);
  at batch 1 (resnet18) the same rewrite measured no faster, the parameter being as large as the
  slot.
- An `Expand` whose operand keeps the leading axes (`[N, C, 1, 1]` against `[N, C, H, W]`, e.g. a
  squeeze-and-excitation scale) runs as a per-element index walk; RLX fills whole planes only for a
  per-channel operand of a batch-1 (or batch-broadcast) output. `flatten_trailing_broadcasts` runs
  the op on `[1, N*C, 1, H*W]` and `[1, N*C, 1, 1]` (reshapes, which RLX makes views), the
  per-channel form.

Both keep every value exactly: only where the operand's elements are read from changes.
float32 only, and never on a node whose sizes depend on a dynamic dim (the node list and the
parameters must be the same at every size).
"""

from __future__ import annotations

import math

from ...program import DerivedParam, Program, RlxNode, ValueDecl
from ._common import claim_param, op_variant, splice, value_dims

# A broadcast parameter is stored only up to this many elements (4 MiB of float32); a larger one
# stays `[1, C, 1, ...]` and RLX expands it on every run.
MAX_BROADCAST_ELEMENTS = 1 << 20


def _eligible(program: Program, n: RlxNode) -> bool:
    return (
        op_variant(n.op) == "Binary"
        and n.dtype == "F32"
        and len(n.dims) >= 2
        and n.provenance.node not in program.size_dependent
    )


def broadcast_channel_params(program: Program) -> int:
    """A float32 parameter `[1, C, 1, ...]` combined with a `[N, C, *spatial]` value, N > 1, becomes a
    parameter stored as `[C, *spatial]` (a reshape when the spatial sizes are all 1); returns how
    many operands were replaced."""
    params = {p.name: p for p in program.params}
    dims = value_dims(program)
    replaced: dict[str, list[RlxNode]] = {}
    for n in program.nodes:
        if not _eligible(program, n) or len(n.dims) < 3 or n.dims[0] == 1:
            continue
        for k, v in enumerate(n.inputs):
            other = n.inputs[1 - k]
            channels = n.dims[1]
            per_channel = (1, channels) + (1,) * (len(n.dims) - 2)
            p = params.get(v)
            if p is None or p.dtype != "F32" or p.dims != per_channel or dims.get(other) != n.dims:
                continue
            target = (channels, *n.dims[2:])
            if math.prod(target) > MAX_BROADCAST_ELEMENTS:
                continue
            name = _broadcast_param(program, params, v, target)
            inputs = (name, other) if k == 0 else (other, name)
            replaced[n.id] = [RlxNode(n.id, n.op, inputs, n.dims, n.dtype, n.provenance)]
            break
    return splice(program, replaced)


def _broadcast_param(program: Program, params: dict[str, ValueDecl], source: str, target: tuple[int, ...]) -> str:
    """The parameter holding `source` (C elements, one per channel) broadcast to `target` = (C, *spatial)."""
    base = program.derived_params.get(source)
    root, steps = (base.source, base.steps) if isinstance(base, DerivedParam) else (source, ())
    vector = (target[0],) + (1,) * (len(target) - 1)
    steps = (*steps, ("reshape", vector))
    if target != vector:
        steps = (*steps, ("broadcast", target))
    name = f"{root}.broadcast_{'x'.join(map(str, target))}"
    return claim_param(program, params, name, DerivedParam(root, steps), target)


def flatten_trailing_broadcasts(program: Program) -> int:
    """A float32 binary whose operand has the output's leading sizes and 1 after them (`[N, C, 1, 1]` of
    `[N, C, H, W]`) runs on `[1, M, 1, R]` / `[1, M, 1, 1]` (M the leading sizes' product, R the rest's)
    between reshapes; returns how many binaries were rewritten."""
    params = {p.name for p in program.params}
    dims = value_dims(program)
    replaced: dict[str, list[RlxNode]] = {}
    for n in program.nodes:
        if not _eligible(program, n):
            continue
        for k, v in enumerate(n.inputs):
            other = n.inputs[1 - k]
            lead = _leading(dims.get(v), n.dims)
            if v in params or lead is None or dims.get(other) != n.dims:
                continue
            m, r = math.prod(n.dims[:lead]), math.prod(n.dims[lead:])
            wide = RlxNode(
                f"{n.id}.flat", {"Reshape": {"new_shape": [1, m, 1, r]}}, (other,), (1, m, 1, r), "F32", n.provenance
            )
            narrow = RlxNode(
                f"{n.id}.flat_{k}", {"Reshape": {"new_shape": [1, m, 1, 1]}}, (v,), (1, m, 1, 1), "F32", n.provenance
            )
            inputs = (narrow.id, wide.id) if k == 0 else (wide.id, narrow.id)
            op = RlxNode(f"{n.id}.flat_op", n.op, inputs, (1, m, 1, r), n.dtype, n.provenance)
            back = RlxNode(n.id, {"Reshape": {"new_shape": list(n.dims)}}, (op.id,), n.dims, n.dtype, n.provenance)
            replaced[n.id] = [wide, narrow, op, back]
            break
    return splice(program, replaced)


def _leading(operand: tuple[int, ...] | None, out: tuple[int, ...]) -> int | None:
    """j when `operand` is out[:j] followed by ones (1 <= j < rank, more than one element on each side), else None."""
    if operand is None or len(operand) != len(out) or operand == out:
        return None
    j = len(out)
    while j > 0 and operand[j - 1] == 1:
        j -= 1
    if j == 0 or operand[:j] != out[:j] or math.prod(operand) == 1 or math.prod(out[j:]) == 1:
        return None
    return j
