"""A module's own attributes as a forward can write them (caches, counters, lazily made buffers and
submodules), snapshot and given back: `frontend.torch.state.ModelState` keeps them beside the buffers.

torch.export runs forward on fake tensors. Non-strict export puts back the attributes that were in a
module's `__dict__` before, but not one a forward adds (a class attribute shadowed, as ultralytics'
`Detect.anchors` is, or `getattr(self, "cache", None)`), nor buffers or submodules a forward registers:
those keep fake tensors. Every eager run would also leave its own caches behind. So every module's
`__dict__` (besides torch's hook tables and the training flag) and its parameter, buffer and submodule
tables are taken before anything runs and put back after export and after each eager run.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

# torch's own bookkeeping in a module's __dict__: hooks (not a forward's state) and `training`
# (`driver.eval_mode` owns it); the three tables and the non-persistent set are kept on their own
_TORCH_ATTRS = frozenset(
    {
        "_backward_hooks",
        "_backward_pre_hooks",
        "_forward_hooks",
        "_forward_hooks_always_called",
        "_forward_hooks_with_kwargs",
        "_forward_pre_hooks",
        "_forward_pre_hooks_with_kwargs",
        "_is_full_backward_hook",
        "_load_state_dict_post_hooks",
        "_load_state_dict_pre_hooks",
        "_state_dict_hooks",
        "_state_dict_pre_hooks",
        "_initialize_hook",
        "_load_hook",
        "training",
        "_parameters",
        "_buffers",
        "_modules",
        "_non_persistent_buffers_set",
    }
)
# Tables a forward can add to, put back as they were: parameters, buffers and submodules it registers,
# and forward hooks it installs (transformers installs its output-capturing hooks on the first call,
# flagging the model with an attribute, which is given back too: the two must agree)
_TABLES = (
    "_parameters",
    "_buffers",
    "_modules",
    "_forward_hooks",
    "_forward_hooks_with_kwargs",
    "_forward_hooks_always_called",
    "_forward_pre_hooks",
    "_forward_pre_hooks_with_kwargs",
)
_DEPTH = 4  # containers are followed this deep below a module attribute
# a plain object's attributes are followed when it is the attribute or in a container there, not deeper: an
# object held by another object (a logger's manager, a config's parent) is shared state the run does not own
_OBJECT_DEPTH = 1
_BUDGET = 100_000  # at most this many values are taken in all (beyond: kept by identity, not followed)


def storage_ptr(value: torch.Tensor) -> int | None:
    """The address of `value`'s storage, or None for a tensor without real storage (a FakeTensor or
    FunctionalTensor torch.export left, a meta or sparse tensor): such a value aliases nothing."""
    from torch._subclasses.fake_tensor import is_fake

    if uninitialized(value) or value.device.type == "meta" or is_fake(value) or torch._is_functional_tensor(value):
        return None
    try:
        return int(value.untyped_storage().data_ptr())
    except (RuntimeError, NotImplementedError, TypeError, ValueError):  # sparse, nested, other subclasses
        return None


def uninitialized(value: Any) -> bool:
    """A lazy module's parameter or buffer before its first call (`nn.UninitializedParameter`)."""
    from torch.nn.parameter import UninitializedBuffer, UninitializedParameter

    return isinstance(value, (UninitializedParameter, UninitializedBuffer))


def _plain_object(value: Any) -> bool:
    """An instance of a user class whose attributes a forward may set (not a type, function, module)."""
    if isinstance(value, (type, torch.nn.Module, torch.Tensor, torch.dtype, torch.device)) or callable(value):
        return False
    try:
        return isinstance(vars(value), dict) and type(value).__module__ != "builtins"
    except Exception:  # no __dict__, or a __getattr__ of the user's that raises: kept by identity
        return False


@dataclass
class _Taken:
    """One value as taken: the object, and what of its contents can be put back in place."""

    value: Any
    kind: str  # "same" (identity only), "tensor", "list", "dict", "set", "tuple", "object"
    inner: Any = None  # a tensor's saved values (None: kept by identity); a container's taken items
    version: int = 0


class _Taker:
    """Takes values recursively, each tensor cloned once (`cloned`, shared with the buffers)."""

    def __init__(self, cloned: dict[int, torch.Tensor]) -> None:
        self.cloned = cloned
        self.seen: dict[int, _Taken] = {}
        self.left = _BUDGET

    def take(self, value: Any, depth: int = 0) -> _Taken:
        if id(value) in self.seen:
            return self.seen[id(value)]
        self.left -= 1
        if isinstance(value, torch.Tensor):
            return self._tensor(value)
        if depth >= _DEPTH or self.left <= 0:
            return _Taken(value, "same")
        taken = _Taken(value, "same")
        self.seen[id(value)] = taken  # before the items: a container that holds itself
        if isinstance(value, list):
            taken.kind, taken.inner = "list", [self.take(v, depth + 1) for v in value]
        elif isinstance(value, tuple):
            taken.kind, taken.inner = "tuple", [self.take(v, depth + 1) for v in value]
        elif isinstance(value, dict):
            taken.kind, taken.inner = "dict", [(k, self.take(v, depth + 1)) for k, v in value.items()]
        elif isinstance(value, set):
            taken.kind, taken.inner = "set", set(value)
        elif depth <= _OBJECT_DEPTH and _plain_object(value):
            taken.kind, taken.inner = "object", [(k, self.take(v, depth + 1)) for k, v in vars(value).items()]
        return taken

    def _tensor(self, value: torch.Tensor) -> _Taken:
        """A tensor's values are kept when a run can write them in place: real storage, not a parameter
        (`ModelState` keeps those) nor an inference tensor (no in-place write outside inference mode)."""
        if isinstance(value, torch.nn.Parameter) or storage_ptr(value) is None or value.is_inference():
            return _Taken(value, "tensor")
        if id(value) not in self.cloned:
            try:
                self.cloned[id(value)] = value.detach().clone()
            except (RuntimeError, NotImplementedError, TypeError):  # a subclass that cannot clone: kept as is
                return _Taken(value, "tensor")
        return _Taken(value, "tensor", self.cloned[id(value)], value._version)


def _changed(table: Any, items: list[tuple[Any, Any]]) -> bool:
    """Whether `table` (a dict) no longer holds exactly `items` (same keys, same objects)."""
    missing = object()
    return len(table) != len(items) or any(table.get(k, missing) is not v for k, v in items)


def _give_back(taken: _Taken, done: set[int]) -> Any:
    """Put `taken`'s contents back into its object, in place (objects others hold stay the same), and
    return the object."""
    value = taken.value
    if id(taken) in done:
        return value
    done.add(id(taken))
    if taken.kind == "tensor":
        if taken.inner is not None and value._version != taken.version:  # written in place
            with torch.no_grad():
                if value.shape != taken.inner.shape:
                    value.resize_(taken.inner.shape)
                value.copy_(taken.inner)
            taken.version = value._version
    elif taken.kind == "list":
        items = [_give_back(t, done) for t in taken.inner]
        if len(value) != len(items) or any(a is not b for a, b in zip(value, items, strict=False)):
            value[:] = items
    elif taken.kind == "tuple":
        for t in taken.inner:
            _give_back(t, done)
    elif taken.kind in ("dict", "object"):
        items = [(k, _give_back(t, done)) for k, t in taken.inner]
        table = value if taken.kind == "dict" else vars(value)
        if _changed(table, items):
            table.clear()
            table.update(items)
    elif taken.kind == "set" and value != taken.inner:
        value.clear()
        value.update(taken.inner)
    return value


@dataclass
class _ModuleTaken:
    path: str
    module: torch.nn.Module
    attrs: list[tuple[str, _Taken]]
    tables: dict[str, dict[Any, Any]]  # `_TABLES`: "_parameters", "_buffers", "_modules", hooks: key -> object
    non_persistent: set[str]


class ModuleAttrs:
    """Every module's own attributes and tables as they were when taken (`ModuleAttrs(model, cloned)`);
    `restore` puts them back: attributes a forward added are removed (a shadowed class attribute shows
    again), replaced ones put back, containers and tensors written in place given their contents back,
    and buffers, parameters, submodules and forward hooks a forward registered dropped."""

    def __init__(self, model: torch.nn.Module, cloned: dict[int, torch.Tensor]) -> None:
        taker = _Taker(cloned)
        self.modules: list[_ModuleTaken] = []
        for path, module in model.named_modules():
            attrs = [(k, taker.take(v)) for k, v in vars(module).items() if k not in _TORCH_ATTRS]
            tables = {t: dict(getattr(module, t)) for t in _TABLES if isinstance(getattr(module, t, None), dict)}
            self.modules.append(_ModuleTaken(path, module, attrs, tables, set(module._non_persistent_buffers_set)))

    def restore(self) -> None:
        """Put every module's attributes and tables back as taken."""
        done: set[int] = set()
        for m in self.modules:
            own, kept = vars(m.module), {k: _give_back(t, done) for k, t in m.attrs}
            for key in [k for k in own if k not in _TORCH_ATTRS and k not in kept]:
                del own[key]  # added by a run (a shadowed class attribute shows again)
            own.update(kept)
            for name, saved in m.tables.items():
                table = getattr(m.module, name)
                if _changed(table, list(saved.items())):
                    table.clear()
                    table.update(saved)
            if m.module._non_persistent_buffers_set != m.non_persistent:
                m.module._non_persistent_buffers_set.clear()
                m.module._non_persistent_buffers_set.update(m.non_persistent)

    def created_parameters(self) -> list[str]:
        """The parameters (module path and name) registered since the snapshot, in submodules old or new."""
        found = []
        for m in self.modules:
            for name, p in m.module._parameters.items():
                if p is not None and m.tables["_parameters"].get(name) is not p:
                    found.append(f"{m.path}.{name}" if m.path else name)
            for name, sub in m.module._modules.items():
                if sub is not None and m.tables["_modules"].get(name) is not sub:
                    prefix = f"{m.path}.{name}" if m.path else name
                    found += [f"{prefix}.{n}" for n, _ in sub.named_parameters()]
        return found

    def saved_tensors(self) -> Iterator[torch.Tensor]:
        """The attribute tensors whose values `restore` writes back (those with real storage)."""
        for m in self.modules:
            for _, t in m.attrs:
                yield from _tensors(t, set())

    def fake_paths(self) -> list[str]:
        """Where a tensor without real storage is reachable from a module's attributes or tables now
        (`module.attr[0].field`): what torch.export left beyond the snapshot's depth."""
        found: list[str] = []
        for m in self.modules:
            prefix = f"{m.path}." if m.path else ""
            for key, value in vars(m.module).items():
                if key in ("_parameters", "_buffers"):
                    for name, t in value.items():
                        _find_fakes(t, f"{prefix}{name}", found, 0, set())
                elif key not in _TORCH_ATTRS:
                    _find_fakes(value, f"{prefix}{key}", found, 0, set())
        return found


def _tensors(taken: _Taken, seen: set[int]) -> Iterator[torch.Tensor]:
    if id(taken) in seen:
        return
    seen.add(id(taken))
    if taken.kind == "tensor" and taken.inner is not None:
        yield taken.value
    elif taken.kind in ("list", "tuple"):
        for t in taken.inner:
            yield from _tensors(t, seen)
    elif taken.kind in ("dict", "object"):
        for _, t in taken.inner:
            yield from _tensors(t, seen)


def _find_fakes(value: Any, path: str, found: list[str], depth: int, seen: set[int]) -> None:
    if id(value) in seen or depth > _DEPTH + 1 or len(found) >= 10:
        return
    seen.add(id(value))
    if isinstance(value, torch.Tensor):
        if storage_ptr(value) is None and not (uninitialized(value) or value.device.type == "meta" or value.is_sparse):
            found.append(path)
        return
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _find_fakes(v, f"{path}[{i}]", found, depth + 1, seen)
    elif isinstance(value, dict):
        for k, v in value.items():
            _find_fakes(v, f"{path}[{k!r}]", found, depth + 1, seen)
    elif _plain_object(value):
        for k, v in vars(value).items():
            _find_fakes(v, f"{path}.{k}", found, depth + 1, seen)
