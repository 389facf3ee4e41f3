"""The `dynamic_shapes` a user passes: the CLI's `--dynamic` form, and one parse of it (`parse_dynamic_shapes`):
the spec torch.export takes and which input axes were asked for.

torch.export takes `dynamic_shapes` as a dict keyed by `forward`'s argument names, or a
tuple in argument order; each entry maps an axis to a `torch.export.Dim` (named, with an
optional range), `Dim.AUTO` or `Dim.DYNAMIC` (`Dim.STATIC`/None: static), or lists one
entry per axis. See torch.export's "Expressing Dynamism" documentation.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ...errors import InputError
from .inputs import ModelInputs, forward_names

# `x:0=batch:1:64`, `x:0=batch`, `x:0=batch:1:`, `x:1=auto`, `x:1=dynamic`
_CLI = re.compile(
    r"^(?P<input>[A-Za-z_][\w.]*):(?P<axis>\d+)=(?P<name>[A-Za-z_]\w*)(?::(?P<lo>\d*)(?::(?P<hi>\d*))?)?$"
)


# The largest MAX a dim may be given: torch.export turns a larger one into "no bound" without a word.
_LARGEST_MAX = 2**62


def parse_cli(items: Sequence[str]) -> dict[str, dict[int, Any]] | None:
    """`--dynamic INPUT:AXIS=NAME[:MIN[:MAX]]` (repeatable) as torch.export's `dynamic_shapes`.

    One `Dim` per NAME: axes given the same name share one symbol (torch then requires
    their sizes to be equal). NAME `auto` / `dynamic` means `Dim.AUTO` / `Dim.DYNAMIC`.
    Raises InputError naming the item that does not parse or conflicts.
    """
    if not items:
        return None
    dims: dict[str, Any] = {}
    ranges: dict[str, tuple[int | None, int | None]] = {}
    spec: dict[str, dict[int, Any]] = {}
    for item in items:
        m = _CLI.match(item.strip())
        if not m:
            raise InputError(
                f"--dynamic {item!r} is not INPUT:AXIS=NAME[:MIN[:MAX]]",
                hint="e.g. --dynamic x:0=batch:1:64 --dynamic x:1=seq:2:512, or --dynamic x:0=auto",
            )
        name = m["name"]
        lo = int(m["lo"]) if m["lo"] else None
        hi = int(m["hi"]) if m["hi"] else None
        if name.lower() in ("auto", "dynamic"):
            if lo is not None or hi is not None:
                raise InputError(f"--dynamic {item!r}: Dim.{name.upper()} takes no range; name the dim to give one")
            dim = torch.export.Dim.AUTO if name.lower() == "auto" else torch.export.Dim.DYNAMIC
        else:
            if name in ranges and (lo, hi) != ranges[name] and (lo, hi) != (None, None):
                raise InputError(f"--dynamic {item!r}: {name} was given the range {ranges[name]} before")
            if name not in dims:
                if lo is not None and hi is not None and lo > hi:
                    raise InputError(f"--dynamic {item!r}: MIN {lo} is above MAX {hi}")
                if hi is not None and hi > _LARGEST_MAX:  # torch.export would drop such a max: unbounded
                    raise InputError(
                        f"--dynamic {item!r}: MAX {hi} is above {_LARGEST_MAX}; leave MAX out for an unbounded dim"
                    )
                kwargs = {k: v for k, v in (("min", lo), ("max", hi)) if v is not None}
                dims[name] = torch.export.Dim(name, **kwargs)
                ranges[name] = (lo, hi)
            dim = dims[name]
        axes = spec.setdefault(m["input"], {})
        axis = int(m["axis"])
        if axis in axes:
            raise InputError(f"--dynamic {item!r}: {m['input']} axis {axis} is given twice")
        axes[axis] = dim
    return spec


@dataclass
class DynamicShapes:
    """The user's `dynamic_shapes`, parsed once (`parse_dynamic_shapes`): what torch.export takes
    (`spec`) and the axes asked to be dynamic, by input name (`axes`)."""

    # torch.export's `dynamic_shapes`: keyed by the inputs passed, or a tuple in argument order; None: static
    spec: Any = None
    # forward's inputs by name (`args_<i>` for `*args`): axis -> the user's label, in the entry's order
    axes: dict[str, dict[int, str]] = field(default_factory=dict)
    # inputs whose entry maps no axes to Dims: the error, raised when the input is looked up
    malformed: dict[str, Exception] = field(default_factory=dict)

    def requested(self, input_names: Sequence[str]) -> dict[tuple[str, int], str]:
        """(input name, axis) -> label for every axis asked to be dynamic among `input_names` (the
        graph's user inputs in order: torch.export names them after `forward`'s parameters; a tensor
        nested in an argument, `d_a`, is not looked up). Raises InputError for a malformed entry."""
        found: dict[tuple[str, int], str] = {}
        for name in input_names:
            if name in self.malformed:
                raise self.malformed[name]
            found.update({(name, axis): label for axis, label in self.axes.get(name, {}).items()})
        return found


def parse_dynamic_shapes(model: Any, dynamic_shapes: Any, inputs: ModelInputs) -> DynamicShapes:
    """`dynamic_shapes` as torch.export takes it (keyed by graph input names: `x`, or `args_0` for
    `forward(*args)`), and the axes it asks to be dynamic. Refuses, before torch.export, a name that
    is no input of forward, a spec that is neither dict nor tuple, a dynamic axis an example tensor
    argument does not have, and a named Dim whose example size is 0 or 1 (torch always specializes
    those sizes); tensors nested inside an argument are left to torch.export's own checks. A
    non-module is left to the export, which refuses it."""
    spec = _by_input_name(model, dynamic_shapes, len(inputs.args), list(inputs.kwargs))
    if spec is None or not isinstance(model, torch.nn.Module):
        return DynamicShapes(spec)  # nothing dynamic; a non-module is refused by the export
    parsed = DynamicShapes(spec, *_axes(model, spec))
    _check_examples(model, parsed, inputs)
    return parsed


def _by_input_name(model: torch.nn.Module, spec: Any, count: int, keywords: Sequence[str] = ()) -> Any:
    """`spec` keyed by graph input names (`x`, or `args_0` for `forward(*args)`, as torch.export
    names them) in the form torch.export takes; any other spec is returned as it is. `count`
    positional arguments and the `keywords` arguments are passed."""
    if not isinstance(spec, dict) or not isinstance(model, torch.nn.Module):
        return spec
    params = inspect.signature(model.forward).parameters
    var_keyword = next((n for n, p in params.items() if p.kind == inspect.Parameter.VAR_KEYWORD), None)
    if var_keyword is not None and isinstance(spec.get(var_keyword), dict) and var_keyword not in keywords:
        # torch's form for `**kwargs`: {"kwargs": {"k": ...}}; ours names each keyword ({"k": ...})
        spec = {**{k: v for k, v in spec.items() if k != var_keyword}, **spec[var_keyword]}
    positional = [
        n
        for n, p in params.items()
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ]
    passed = [*positional[:count], *keywords]
    if all(k in passed for k in spec):  # torch wants every input named: the rest static
        return {n: spec.get(n) for n in passed}
    entries: list[Any] = []
    position = 0
    for name, param in params.items():
        if param.kind == inspect.Parameter.VAR_POSITIONAL:
            rest = count - position
            # torch's own form names `*args` once with a tuple ({"args": (...)}); ours names each (`args_0`)
            whole = spec.get(name)
            entries.append(tuple(whole) if whole is not None else tuple(spec.get(f"{name}_{i}") for i in range(rest)))
            position = count
        elif param.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
            if position < count:
                entries.append(spec.get(name))
                position += 1
    known = set(params)
    known |= {f"{n}_{i}" for n, p in params.items() if p.kind == inspect.Parameter.VAR_POSITIONAL for i in range(count)}
    unknown = [k for k in spec if k not in known]
    if unknown:
        raise InputError(
            f"dynamic_shapes names {', '.join(map(repr, unknown))}, which is no input of forward() "
            f"(its inputs are {', '.join(sorted(known))})"
        )
    return tuple(entries)


def _check_examples(model: torch.nn.Module, parsed: DynamicShapes, inputs: ModelInputs) -> None:
    """Refuse a dynamic axis an example tensor argument does not have, and a named Dim whose
    example size is 0 or 1."""
    names = forward_names(model, len(inputs.args))[0]
    shapes = {n: tuple(a.shape) for n, a in zip(names, inputs.args, strict=False) if isinstance(a, torch.Tensor)}
    shapes.update({k: tuple(v.shape) for k, v in inputs.kwargs.items() if isinstance(v, torch.Tensor)})
    for (name, axis), label in parsed.requested(list(shapes)).items():
        shape = shapes.get(name)
        if shape is None:
            continue
        if axis >= len(shape):
            raise InputError(
                f"dynamic_shapes makes axis {axis} of input {name!r} dynamic ({label}), but its example has "
                f"shape {list(shape)} ({len(shape)} axes)"
            )
        if shape[axis] in (0, 1) and not label.startswith(f"{name}."):
            raise InputError(
                f"input {name!r} axis {axis} ({label}) is dynamic, but its example size is {shape[axis]}: torch.export "
                "always specializes sizes 0 and 1",
                hint="give an example input of size >= 2 on a dynamic axis (the bundle still runs at 1 if the "
                "Dim's range allows it)",
            )


def _label(dim: Any, input_name: str, axis: int) -> str | None:
    """The user's name for a dynamic axis; None when the axis is static."""
    if dim is None:
        return None
    hint = getattr(torch.export.Dim, "STATIC", None)
    if hint is not None and dim is hint:
        return None
    root = getattr(dim, "root", None)  # a derived Dim (2 * half) labels its root's symbol
    name = getattr(root if root is not None else dim, "__name__", None)
    if isinstance(name, str) and not name.startswith("_"):
        return name
    return f"{input_name}.{axis}"


def _axes(model: torch.nn.Module, dynamic_shapes: Any) -> tuple[dict[str, dict[int, str]], dict[str, Exception]]:
    """Per input name of forward (`args_<i>` for `*args`), the axes `dynamic_shapes` asks to be
    dynamic (axis -> label), and the error of each entry that maps no axes to Dims. Raises
    InputError for a key that names no parameter of forward and for a spec of another type."""
    params = inspect.signature(model.forward).parameters
    var_keyword = any(p.kind == inspect.Parameter.VAR_KEYWORD for p in params.values())
    keywords: dict[str, Any] = {}
    if isinstance(dynamic_shapes, dict):
        unknown = [k for k in dynamic_shapes if k not in params]
        if var_keyword:  # `forward(..., **kwargs)`: the other keys are its keywords (`_by_input_name`)
            keywords, unknown = {k: dynamic_shapes[k] for k in unknown}, []
        if unknown:
            raise InputError(
                f"dynamic_shapes names {', '.join(map(repr, unknown))}, which forward() does not take "
                f"(it takes {', '.join(params)})"
            )
        by_param = [dynamic_shapes.get(p) for p in params]
    elif isinstance(dynamic_shapes, (tuple, list)):
        by_param = list(dynamic_shapes)
    else:
        raise InputError(f"dynamic_shapes must be a dict or a tuple, got {type(dynamic_shapes).__name__}")
    entries: dict[str, Any] = {}
    for (name, param), entry in zip(params.items(), by_param, strict=False):
        if param.kind == inspect.Parameter.VAR_POSITIONAL:  # *args: one entry per remaining input
            entries.update({f"{name}_{i}": e for i, e in enumerate(entry or [])})
        elif param.kind != inspect.Parameter.VAR_KEYWORD:
            entries[name] = entry
    entries.update(keywords)
    axes: dict[str, dict[int, str]] = {}
    malformed: dict[str, Exception] = {}
    for name, entry in entries.items():
        if entry is None:
            continue
        items = (
            entry.items() if isinstance(entry, dict) else enumerate(entry) if isinstance(entry, (list, tuple)) else None
        )
        try:
            if items is None:
                raise InputError(f"dynamic_shapes entry for {name!r} must map axes to Dims, got {type(entry).__name__}")
            labels: dict[int, str] = {}
            for axis, dim in items:
                label = _label(dim, name, int(axis))
                if label is not None:
                    labels[int(axis)] = label
        except Exception as e:  # raised when the input is looked up (`DynamicShapes.requested`)
            malformed[name] = e
            continue
        axes[name] = labels
    return axes, malformed
