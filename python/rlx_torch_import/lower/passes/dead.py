"""`remove_dead`: nodes and parameters nothing reads any more are dropped."""

from __future__ import annotations

from ...program import Program, RlxNode


def remove_dead(program: Program) -> int:
    """Drop nodes and parameters no output depends on; returns how many nodes went."""
    live = set(program.outputs)
    kept: list[RlxNode] = []
    for node in reversed(program.nodes):
        if node.id in live:
            kept.append(node)
            live.update(node.inputs)
    removed = len(program.nodes) - len(kept)
    program.nodes = kept[::-1]
    program.params = [p for p in program.params if p.name in live]
    needed, todo = set(), [p.name for p in program.params]
    while todo:  # derived parameters are computed from others, which stay in the table (not in the graph)
        name = todo.pop()
        if name in program.derived_params and name not in needed:
            needed.add(name)
            todo.extend(program.derived_params[name].sources())
    program.derived_params = {k: v for k, v in program.derived_params.items() if k in needed}
    return removed
