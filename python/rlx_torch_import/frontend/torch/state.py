"""The state of a module that a forward can write (buffers, written parameters, its own attributes:
caches, counters, lazily made buffers and submodules), kept for the eager runs of a conversion and
given back to the module after torch.export and after each of them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch.export.graph_signature import InputKind

from ...errors import ExportError, InputError
from .module_attrs import ModuleAttrs, storage_ptr, uninitialized


class ModelState:
    """The state of a module that a forward can write, as it was when taken: every buffer (cloned:
    buffers are small next to the weights, and a forward that counts calls or keeps running
    statistics writes them), and the parameters the exported program writes (`keep_written`;
    cloning every parameter would double a large model's memory, and a forward under no_grad can
    write a parameter in place, but the exported graph shows every such write). Each eager run
    starts from this state and gives it back (`restore`), so every run is one call of the model
    from the state it was passed in, the weights read from the exported program (which shares the
    module's storage) are that state, and the caller's module is left as it was.

    Every module's own attributes are kept too (`module_attrs.ModuleAttrs`: what is in its `__dict__`
    besides torch's tables, containers and tensors in place, and which buffers, parameters and
    submodules it has), so a forward that caches on the module (ultralytics' `Detect.anchors`, keyed on
    the input's shape) runs from the cold cache each time, as a plain eager call of the module as
    given does, and no fake tensor torch.export leaves there reaches an eager run (`after_export`)."""

    def __init__(self, model: Any) -> None:
        # (module, "_buffers" or "_parameters", name, the tensor object there, its saved values or None)
        self.slots: list[tuple[torch.nn.Module, str, str, torch.Tensor, torch.Tensor | None]] = []
        self.versions: dict[str, tuple[torch.Tensor, int]] = {}  # parameters not cloned: their version counters
        self.checked = False  # whether `keep_written` ran: unsaved parameters' versions are checked after a run
        self.attrs: ModuleAttrs | None = None
        if not isinstance(model, torch.nn.Module):
            return
        cloned: dict[int, torch.Tensor] = {}  # a buffer two modules share (or an attribute holds) is cloned once
        for prefix, module in model.named_modules(remove_duplicate=False):
            for table in ("_buffers", "_parameters"):
                for key, tensor in getattr(module, table).items():
                    if tensor is None:
                        continue
                    full = f"{prefix}.{key}" if prefix else key
                    cold = table == "_parameters" or uninitialized(tensor)  # a lazy module's buffer has no values
                    saved = None if cold else cloned.setdefault(id(tensor), tensor.detach().clone())
                    self.slots.append((module, table, key, tensor, saved))
                    if table == "_parameters":
                        self.versions.setdefault(full, (tensor, tensor._version))
        self.attrs = ModuleAttrs(model, cloned)

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
        (tensors the caller holds stay the same objects), and every module's attributes and tables."""
        if self.attrs is not None:
            self.attrs.restore()
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

    def after_export(self) -> None:
        """Give the module its state back after torch.export traced it, and check that nothing of the
        trace is left: ExportError when the forward registered parameters (lazy initialization: the trace
        made them of fake tensors, and every eager call would draw new ones), or when a fake tensor is
        still reachable from a module's attributes (inside something the snapshot does not follow)."""
        created = self.attrs.created_parameters() if self.attrs is not None else []
        self.restore()
        if created:
            raise ExportError(
                f"the model's forward creates parameter(s) {', '.join(created[:5])} when called (lazy "
                "initialization): torch.export traced them as fake tensors, and each eager call would make "
                "new ones, so there are no weights to convert",
                hint="create them in __init__, or call the model once on an example input before converting "
                "(its weights then exist and are converted as they are)",
            )
        self.check_real("torch.export left them there and the conversion could not put back what was there before")

    def check_ready(self) -> None:
        """InputError naming the parameters and buffers of lazy modules (`nn.LazyLinear`, ...) not made yet:
        their first call makes them (and changes the module's class), which the conversion could not undo."""
        lazy = [
            f"{m.path}.{name}" if m.path else name
            for m in (self.attrs.modules if self.attrs is not None else [])
            for table in (m.module._parameters, m.module._buffers)
            for name, t in table.items()
            if uninitialized(t)
        ]
        if lazy:
            raise InputError(
                f"the model's parameter(s) or buffer(s) {', '.join(lazy[:5])} are not made yet: a lazy module "
                "(nn.LazyLinear, ...) makes them, with their shapes, on its first call",
                hint="call the model once on an example input before converting",
            )

    def check_real(self, cause: str) -> None:
        """ExportError naming each module attribute that holds a tensor without real storage (a fake
        tensor a trace left there), before an eager run could read it; `cause` says where they came from."""
        fakes = self.attrs.fake_paths() if self.attrs is not None else []
        if fakes:
            raise ExportError(
                f"the model's attribute(s) {', '.join(fakes[:5])} hold fake tensors (no values): {cause}; "
                "an eager run of the model would read them",
                hint="keep a forward's caches in the module's own attributes, or in lists, tuples, dicts or "
                "objects held there (the conversion gives those back), or in buffers (register_buffer); "
                "a model an earlier torch.export or torch.compile left them in needs them reset or rebuilt",
            )

    def aliases(self, value: torch.Tensor) -> bool:
        """Whether `value` shares storage with a tensor `restore` writes (a buffer, a written parameter, a
        module attribute's tensor). A value without real storage (fake, meta, functional) aliases nothing."""
        ptr = storage_ptr(value)
        if ptr is None:
            return False
        kept = [t for _, _, _, t, s in self.slots if s is not None]
        kept += list(self.attrs.saved_tensors()) if self.attrs is not None else []
        return any(storage_ptr(t) == ptr for t in kept)


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
