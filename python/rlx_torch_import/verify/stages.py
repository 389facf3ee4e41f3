"""What verification says about sizes that depend on tensor values (size stages, docs/design.md decision ax
of issue 39): the values each such size took, and whether the bundle can run where one is 0."""

from __future__ import annotations

from ..bundle.model import BundleModel
from ..conversion import Conversion
from ..errors import BundleError, InputError, RtiError
from ..layout import set_prefix, sweep_prefix
from ..sizes import Symbol, evaluate


def staged_notes(model: BundleModel, conv: Conversion, verified_sets: set[str]) -> list[str]:
    """Report notes for a bundle with size stages (none for another): the values each staged size took on
    the example, every input set verified (`verified_sets`, by label) and every sweep point of the input
    dims that ran, and each size whose range holds 0 but at which the main graph does not compile (RLX's
    CPU kernels over an empty dim), found by compiling it there."""
    staged = [s for s in conv.ir.symbols if s.stage]
    if not staged:
        return []
    seen: dict[str, set[int]] = {s.label: set() for s in staged}
    sets = conv.ir.input_sets
    feeds = [conv.feed()] + [
        conv.feed(set_prefix(k)) for k, e in enumerate(sets) if "error" not in e and e["label"] in verified_sets
    ]
    feeds += [conv.feed(sweep_prefix(i)) for i, p in enumerate(conv.ir.sweep) if "error" not in p]
    example: dict[str, int] = {}
    for i, feed in enumerate(feeds):
        try:
            binding = model.binding(feed)
        except (InputError, BundleError):
            continue
        example = binding if i == 0 else example
        for s in staged:
            seen[s.label].add(binding[s.label])
    parts = [f"{s.label} ({s.name}, size of node {s.defined_by}): {sorted(seen[s.label])}" for s in staged]
    lone = [s.label for s in staged if len(seen[s.label]) < 2]
    tail = f"; only one value for {', '.join(lone)}: pass verify_inputs to cover more" if lone else ""
    notes = [f"sizes computed from tensor values (size stages), values verified: {'; '.join(parts)}{tail}"]
    for s in staged:
        if s.derived or s.min > 0 or 0 in seen[s.label] or not example:
            continue  # a derived size is 0 where its symbols make it so (decision bb)
        try:
            model.compile_binding(_with_derived(conv.ir.symbols, {**example, s.label: 0}))
        except RtiError as e:
            why = " ".join(e.message.split())
            why = why if len(why) <= 400 else "..." + why[-400:]
            notes.append(f"{s.label} ({s.name}) = 0 cannot run: RLX does not compile the main graph there: {why}")
    return notes


def _with_derived(symbols: list[Symbol], binding: dict[str, int]) -> dict[str, int]:
    """`binding` (symbol label -> size) with each derived size recomputed from the sizes it is a function of."""
    by_name = {s.name: binding[s.label] for s in symbols if s.label in binding and not s.derived}
    return binding | {s.label: evaluate(s.derived, by_name) for s in symbols if s.derived}
