"""Example inputs as people pass them: positional and keyword, nested in tuples/lists/dicts.

torch.export flattens `(args, kwargs)` with torch's pytree and makes one graph input per
leaf, in flattening order. Tensor leaves are the model's inputs; Python scalars and
strings are baked into the graph as constants (torch.export specializes on them), and
each is recorded with its path (`constants`) so the report can say what was fixed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.utils._pytree as pytree

from ...errors import InputError

# Leaves torch.export accepts besides tensors; each is specialized (baked in as a constant).
CONSTANT_LEAVES = (bool, int, float, str, type(None))


def path_name(path: tuple[Any, ...]) -> str:
    """A pytree key path as a dotted name: `[1]['mask']` -> `1.mask`, `.logits` -> `logits`."""
    parts = []
    for key in path:
        if isinstance(key, pytree.SequenceKey):
            parts.append(str(key.idx))
        elif isinstance(key, pytree.MappingKey):
            parts.append(str(key.key))
        elif isinstance(key, pytree.GetAttrKey):
            parts.append(str(key.name))
        else:
            parts.append(re.sub(r"^[.\[]+|[\]'\"]+$", "", str(key)))
    return ".".join(parts)


@dataclass
class ModelInputs:
    """The example call `model(*args, **kwargs)`, flattened as torch.export flattens it.

    `paths[i]` names leaf i (`x`, `attention_mask`, `d.a`, `xs.1`: the forward argument
    name, then the keys inside it); `tensors` are the tensor leaves in order (the graph's
    user inputs); `constants` are the other leaves by path (baked in)."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    spec: pytree.TreeSpec
    leaves: list[Any]
    paths: list[str]
    # forward's positional parameters by name (`args_<i>` for `*args`), passed or not
    arg_names: list[str]
    # forward's parameters left out of the call whose defaults are Python values (used as they are)
    defaults: dict[str, Any] = field(default_factory=dict)

    @property
    def tensors(self) -> tuple[torch.Tensor, ...]:
        return tuple(v for v in self.leaves if isinstance(v, torch.Tensor))

    @property
    def tensor_paths(self) -> list[str]:
        return [p for p, v in zip(self.paths, self.leaves, strict=True) if isinstance(v, torch.Tensor)]

    @property
    def constants(self) -> dict[str, Any]:
        return {p: v for p, v in zip(self.paths, self.leaves, strict=True) if not isinstance(v, torch.Tensor)}

    @property
    def is_flat(self) -> bool:
        """Positional tensors only (the call `model(*tensors)`)."""
        return not self.kwargs and all(isinstance(a, torch.Tensor) for a in self.args)

    def with_tensors(self, tensors: tuple[torch.Tensor, ...]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """`(args, kwargs)` with the tensor leaves replaced by `tensors` (same order)."""
        feed = iter(tensors)
        leaves = [next(feed) if isinstance(v, torch.Tensor) else v for v in self.leaves]
        args, kwargs = pytree.tree_unflatten(leaves, self.spec)
        return tuple(args), dict(kwargs)

    def cloned(self) -> ModelInputs:
        """The same call on private copies of the tensors (the user's are never run)."""
        leaves = [v.detach().clone() if isinstance(v, torch.Tensor) else v for v in self.leaves]
        args, kwargs = pytree.tree_unflatten(leaves, self.spec)
        return ModelInputs(
            tuple(args), dict(kwargs), self.spec, leaves, list(self.paths), list(self.arg_names), dict(self.defaults)
        )

    def call(self, model: Any, tensors: tuple[torch.Tensor, ...]) -> Any:
        """`model(*args, **kwargs)` with `tensors` in place of the example tensors."""
        args, kwargs = self.with_tensors(tensors)
        return model(*args, **kwargs)


def forward_names(model: Any, count: int) -> tuple[list[str], list[str]]:
    """Names of `count` positional arguments of `model.forward` (`<varargs>_<i>` for `*args`, as
    torch.export names them), and forward's positional parameters including those not passed."""
    import inspect

    names: list[str] = []
    varargs = False
    try:
        params = list(inspect.signature(model.forward).parameters.values())
    except (TypeError, ValueError, AttributeError):
        params = []
    for p in params:
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            names.append(p.name)
        elif p.kind == p.VAR_POSITIONAL:  # torch.export's names for `*args`: args_0, args_1, ...
            names = names[:count] + [f"{p.name}_{i}" for i in range(count - len(names[:count]))]
            varargs = True
            break
    given = [names[i] if i < len(names) else f"args_{i}" for i in range(count)]
    return given, (given if varargs else [*given, *names[count:]])


def model_inputs(model: Any, example_inputs: Any, kwargs: dict[str, Any] | None = None) -> ModelInputs:
    """Normalize `example_inputs` (a tensor, or a tuple/list of positional arguments, each a
    tensor, a Python scalar/str/None, or nested tuples/lists/dicts of them) and `kwargs`.

    Raises InputError naming the path of a leaf torch.export cannot take (e.g. a numpy
    array) and when no input is a tensor."""
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    if isinstance(example_inputs, dict) and kwargs is None:
        example_inputs, kwargs = (), example_inputs
    if not isinstance(example_inputs, (tuple, list)):
        raise InputError(
            f"example_inputs must be a tensor or a tuple of positional arguments, got {type(example_inputs).__name__}",
            hint="pass e.g. (torch.randn(1, 16),); keyword arguments go in kwargs={...}",
        )
    if kwargs is None:
        kwargs = {}
    if not isinstance(kwargs, dict) or not all(isinstance(k, str) for k in kwargs):
        raise InputError(f"kwargs must be a dict keyed by forward's argument names, got {type(kwargs).__name__}")
    args = tuple(example_inputs)
    names, positional = forward_names(model, len(args))
    flat, spec = pytree.tree_flatten_with_path((args, kwargs))
    leaves, paths = [], []
    for path, value in flat:
        # path[0] picks args (0) or kwargs (1); path[1] the position or keyword
        top, key = path[0], path[1]
        assert isinstance(top, pytree.SequenceKey)  # (args, kwargs) is a tuple
        if top.idx == 0:
            assert isinstance(key, pytree.SequenceKey)  # args is a tuple
            head = names[key.idx]
        else:
            assert isinstance(key, pytree.MappingKey)  # kwargs is a dict
            head = str(key.key)
        name = ".".join([head, path_name(path[2:])]) if len(path) > 2 else head
        if not isinstance(value, (torch.Tensor, *CONSTANT_LEAVES)):
            raise InputError(
                f"input {name} is a {type(value).__name__}; torch.export takes tensors, Python scalars and "
                "strings, nested in tuples, lists and dicts",
                hint="convert it with torch.as_tensor(...)" if hasattr(value, "__array__") else None,
            )
        leaves.append(value)
        paths.append(name)
    return ModelInputs(args, dict(kwargs), spec, leaves, paths, positional, _defaults(model, len(args), kwargs))


def _defaults(model: Any, count: int, kwargs: dict[str, Any]) -> dict[str, Any]:
    """forward's parameters the call leaves out whose defaults are Python values (bool, int, float,
    str, None): the graph is traced with them, so a later call may pass the same value."""
    import inspect

    try:
        params = list(inspect.signature(model.forward).parameters.values())
    except (TypeError, ValueError, AttributeError):
        return {}
    found = {}
    for i, p in enumerate(params):
        passed = p.name in kwargs or (i < count and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))
        if not passed and p.default is not p.empty and isinstance(p.default, CONSTANT_LEAVES):
            found[p.name] = p.default
    return found
