"""Conversion-time rewrites of the lowered program: work done once here is not done on every run.

One module per pass (`layouts.py`, `batch_norm.py`, `rotary.py`, `rms_norm.py`, `constants.py`,
`broadcasts.py`, `grouped_attention.py`, `quantize_weights.py`, `dead.py`; shared helpers in `_common.py`);
`optimize` runs them in order.

Each pass keeps the numbers RLX computes exactly as they were:

- `fold_param_layouts`: a `Transpose` or `Reshape` of a parameter becomes a
  parameter stored in the new layout (`Program.derived_params`; the bundle writer
  applies the move to the weight's bytes). `Linear` lowers to `x @ W^T`; RLX 0.2.19
  merges that transpose into its GEMM only for 2-D, bias-free matmuls, and
  otherwise transposes the weight on every run (docs/design.md, "Weights in the
  layout RLX reads").
- `fold_constants`: a value computed from constants alone (attention masks built
  from `arange`, position tables, shape arithmetic) is evaluated once, by RLX
  itself (`evaluate`), and stored as a `Constant`.
- `broadcast_channel_params` / `flatten_trailing_broadcasts`: a per-channel parameter
  (`[1, C, 1, 1]`, a conv bias) is stored broadcast to `[C, H, W]`, and a `[N, C, 1, 1]`
  operand runs as `[1, N*C, 1, 1]`, so RLX adds no `Expand` of a parameter (which its memory
  planner keeps in a private arena slot) and no per-element `Expand` walk (`broadcasts.py`).
- `share_kv_heads`: grouped-query attention over repeated KV heads (`repeat_kv`) runs
  with the `rep` query heads of each KV head stacked on the query axis, reading the KV head
  itself: no copy of the KV cache per layer and step (`grouped_attention.py`).
- `quantize_weights`: a `Linear` whose weight the conversion quantized (`--quantize`) runs on
  RLX's `DequantMatMul` over the packed blocks (`quantize_weights.py`).
- `remove_dead`: nodes and parameters nothing reads any more are dropped.

`Builder.known` uses `evaluate` during lowering, so a lowering can specialize on a
constant operand (e.g. attention with a causal mask built from `arange` becomes
RLX's fused causal attention).
"""

from __future__ import annotations

from typing import Any

from ...program import Program
from .batch_norm import fold_batch_norm
from .broadcasts import broadcast_channel_params, flatten_trailing_broadcasts
from .constants import fold_constants
from .dead import remove_dead
from .grouped_attention import share_kv_heads
from .layouts import fold_param_layouts
from .quantize_weights import quantize_weights
from .rms_norm import fold_rms_norm
from .rotary import fold_rotary


def optimize(program: Program, quantize: dict[str, Any] | None = None) -> dict[str, int]:
    """Run every pass; returns what each changed (for the report and the benchmark). `quantize`: torch-ir's
    record of the weights the conversion quantized (`quantize_weights`; None or {}: none)."""
    stats = {"param_layouts_folded": fold_param_layouts(program)}
    stats["batch_norms_folded"] = fold_batch_norm(program)
    stats["rotary_embeddings_on_rope"] = fold_rotary(program)
    stats["rms_norms_fused"] = fold_rms_norm(program)
    stats["constants_folded"] = fold_constants(program)
    stats["channel_params_broadcast"] = broadcast_channel_params(program)
    stats["broadcasts_flattened"] = flatten_trailing_broadcasts(program)
    stats["kv_heads_shared"] = share_kv_heads(program)
    if quantize:
        stats["linears_quantized"] = quantize_weights(program, quantize)
    stats["dead_nodes_removed"] = remove_dead(program)
    return stats
