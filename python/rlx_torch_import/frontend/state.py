"""The state of a module that a forward can write (buffers, written parameters), kept for the
eager runs of a conversion and given back to the module after them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch.export.graph_signature import InputKind

from ..errors import InputError


class ModelState:
    """The state of a module that a forward can write, as it was when taken: every buffer (cloned:
    buffers are small next to the weights, and a forward that counts calls or keeps running
    statistics writes them), and the parameters the exported program writes (`keep_written`;
    cloning every parameter would double a large model's memory, and a forward under no_grad can
    write a parameter in place, but the exported graph shows every such write). Each eager run
    starts from this state and gives it back (`restore`), so every run is one call of the model
    from the state it was passed in, the weights read from the exported program (which shares the
    module's storage) are that state, and the caller's module is left as it was."""

    def __init__(self, model: Any) -> None:
        # (module, "_buffers" or "_parameters", name, the tensor object there, its saved values or None)
        self.slots: list[tuple[torch.nn.Module, str, str, torch.Tensor, torch.Tensor | None]] = []
        self.versions: dict[str, tuple[torch.Tensor, int]] = {}  # parameters not cloned: their version counters
        self.checked = False  # whether `keep_written` ran: unsaved parameters' versions are checked after a run
        if not isinstance(model, torch.nn.Module):
            return
        cloned: dict[int, torch.Tensor] = {}  # a buffer two modules share is cloned once
        for prefix, module in model.named_modules(remove_duplicate=False):
            for table in ("_buffers", "_parameters"):
                for key, tensor in getattr(module, table).items():
                    if tensor is None:
                        continue
                    full = f"{prefix}.{key}" if prefix else key
                    saved = cloned.setdefault(id(tensor), tensor.detach().clone()) if table == "_buffers" else None
                    self.slots.append((module, table, key, tensor, saved))
                    if table == "_parameters":
                        self.versions.setdefault(full, (tensor, tensor._version))

    def keep_written(self, ep: torch.export.ExportedProgram) -> None:
        """Clone the parameters `ep` writes as well (taken before any eager run)."""
        written = written_state(ep)
        cloned: dict[int, torch.Tensor] = {}
        for i, (module, table, key, tensor, _saved) in enumerate(self.slots):
            if table != "_parameters":
                continue
            names = [n for n, (t, _) in self.versions.items() if t is tensor]
            if any(n in written for n in names):
                copy = cloned.setdefault(id(tensor), tensor.detach().clone())
                self.slots[i] = (module, table, key, tensor, copy)
                for n in names:
                    self.versions.pop(n)
        self.checked = True

    def restore(self) -> None:
        """Put every tensor object back in its module and its saved values back into it, in place
        (tensors the caller holds stay the same objects)."""
        with torch.no_grad():
            for module, table, key, tensor, saved in self.slots:
                getattr(module, table)[key] = tensor
                if saved is not None:
                    if tensor.shape != saved.shape:
                        tensor.resize_(saved.shape)
                    tensor.copy_(saved)

    def check(self) -> None:
        """Raise InputError when a run wrote a parameter that the exported program does not show
        written (it was not cloned, so neither the weights nor the module can be given back)."""
        if not self.checked:
            return
        moved = [n for n, (t, v) in self.versions.items() if t._version != v]
        if moved:
            raise InputError(
                f"the model's forward wrote parameter(s) {', '.join(moved[:5])} in place when run eagerly, "
                "which torch.export's program does not show: the weights would not be those the model was "
                "passed in with, and the module is left changed",
                hint="keep state a forward updates in buffers (register_buffer), not parameters",
            )

    def aliases(self, value: torch.Tensor) -> bool:
        """Whether `value` shares storage with a tensor `restore` writes."""
        ptr = value.untyped_storage().data_ptr()
        return any(s is not None and t.untyped_storage().data_ptr() == ptr for _, _, _, t, s in self.slots)


@contextmanager
def kept_state(model: Any) -> Iterator[ModelState]:
    """The module's `ModelState` as it is on entry, given back to the module on exit (error or not)."""
    state = ModelState(model)
    try:
        yield state
    finally:
        state.restore()


def written_state(ep: torch.export.ExportedProgram) -> set[str]:
    """The parameter and buffer names (state_dict keys) `ep` writes: its signature's mutations (a
    functional graph, `high`/`core`), or an in-place op on a parameter or buffer, through views
    (the `aten` graph torch.export gives before decomposition)."""
    sig = ep.graph_signature
    found = {str(v) for v in (*sig.buffers_to_mutate.values(), *sig.parameters_to_mutate.values())}
    state = {
        s.arg.name: str(s.target)
        for s in sig.input_specs
        if s.kind in (InputKind.PARAMETER, InputKind.BUFFER) and hasattr(s.arg, "name")
    }

    def root(node: torch.fx.Node) -> torch.fx.Node:
        while node.op == "call_function" and node.args and isinstance(node.args[0], torch.fx.Node):
            schema = getattr(node.target, "_schema", None)
            if schema is None or not schema.returns or schema.returns[0].alias_info is None:
                break
            node = node.args[0]  # a view of, or an in-place op on, its first argument
        return node

    for node in ep.graph_module.graph.nodes:
        schema = getattr(node.target, "_schema", None)
        if node.op != "call_function" or schema is None:
            continue
        for i, arg in enumerate(schema.arguments):
            value = node.args[i] if i < len(node.args) else node.kwargs.get(arg.name)
            if arg.alias_info is not None and arg.alias_info.is_write and isinstance(value, torch.fx.Node):
                name = root(value).name
                if name in state:
                    found.add(state[name])
    return found
