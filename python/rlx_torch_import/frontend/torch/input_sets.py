"""Extra input sets verification runs besides the example (`from_torch(..., verify_inputs=...)`).

A set is the model's tensor inputs once more, with other values: given by the caller (a dict
keyed by input name or path, a tuple in input order, or a .safetensors file), or made here
from the example's shapes, dtypes and value ranges ("auto": adversarial values that find
rounding, tie-breaking, overflow and masking bugs). Eager PyTorch runs on each set at
conversion (the model is needed), and the set's inputs and eager outputs are stored in
reference.safetensors as `set.<k>.input.<name>` / `set.<k>.output.<name>`, listed in torch-ir
`input_sets`, so `build DIR` verifies them again from the files alone.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ...errors import InputError
from ...layout import NOT_INPUTS, input_key, output_key, set_prefix
from ...torchir import TensorSpec, TorchIR
from .inputs import ModelInputs

if TYPE_CHECKING:
    from .state import ModelState

AUTO = "auto"
# Seed of the random parts of the "auto" sets (sign patterns, tie rows): the same sets every run.
AUTO_SEED = 12


@dataclass
class InputSet:
    """One set: its label (`auto:<kind>`, `inputs:<k>`, `file:<file name>`), what it exercises,
    and its tensors in input order; `error` (no tensors) when the set cannot be run."""

    label: str
    description: str
    tensors: tuple[torch.Tensor, ...] | None
    error: str = ""


Spec = Any  # one entry of `verify_inputs`: "auto", a dict, a tuple/list of tensors, or a path


def normalize(verify_inputs: Any) -> list[Spec]:
    """`verify_inputs` as a list of entries, checked before anything runs: None -> [], "auto" or
    one path -> [it]; each entry "auto", a dict, a tuple/list of tensors or a .safetensors path
    that exists. Raises InputError otherwise."""
    if verify_inputs is None:
        return []
    if isinstance(verify_inputs, (str, os.PathLike)):
        verify_inputs = [verify_inputs]
    if not isinstance(verify_inputs, list):
        raise InputError(
            f"verify_inputs must be None, 'auto' or a list of input sets, got {type(verify_inputs).__name__}",
            hint="e.g. verify_inputs=['auto', {'x': x2}, (x3,), 'more.safetensors']",
        )
    for k, spec in enumerate(verify_inputs):
        if isinstance(spec, str) and spec == AUTO:
            continue
        if isinstance(spec, (str, os.PathLike)):
            path = Path(spec)
            if path.suffix != ".safetensors":
                raise InputError(f"verify_inputs[{k}]: {path} is not a .safetensors file (nor 'auto')")
            if not path.is_file():
                raise InputError(f"verify_inputs[{k}]: {path}: no such file")
        elif not isinstance(spec, (dict, tuple, list)):
            raise InputError(
                f"verify_inputs[{k}] is a {type(spec).__name__}; an input set is a dict keyed by input name, a "
                "tuple of tensors in input order, a .safetensors path or 'auto'"
            )
    return list(verify_inputs)


def _as_tensor(value: Any, where: str) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value.detach()
    if hasattr(value, "__array__"):
        return torch.as_tensor(value)
    raise InputError(f"{where} is a {type(value).__name__}, not a tensor")


def _keys(spec: TensorSpec) -> list[str]:
    """The names an input may be given by in a set: its name and its path, bare or as `input.<...>`."""
    names = [spec.name] + ([spec.path] if spec.path and spec.path != spec.name else [])
    return names + [input_key(n) for n in names]


def _from_mapping(
    found: dict[str, torch.Tensor],
    specs: list[TensorSpec],
    example: tuple[torch.Tensor, ...],
    where: str,
    *,
    strict: bool,
) -> tuple[tuple[torch.Tensor, ...], list[str]]:
    """Tensors in input order from a mapping keyed by input name or path; inputs it lacks are the
    example's (their names are returned). With `strict`, a key naming no input is an error."""
    lookup = {key: i for i, spec in enumerate(specs) for key in _keys(spec)}
    if strict:
        unknown = [k for k in found if k not in lookup]
        if unknown:
            raise InputError(
                f"{where}: no input named {', '.join(map(repr, unknown))}; the model's inputs are "
                f"{', '.join(s.name + (f' ({s.path})' if s.path and s.path != s.name else '') for s in specs)}"
            )
    chosen: list[torch.Tensor | None] = [None] * len(specs)
    for key, value in found.items():
        if key in lookup:
            i = lookup[key]
            if chosen[i] is not None:
                raise InputError(f"{where}: input {specs[i].name} is given twice")
            chosen[i] = value
    kept = [s.name for s, t in zip(specs, chosen, strict=True) if t is None]
    return tuple(t if t is not None else e for t, e in zip(chosen, example, strict=True)), kept


# Keys a file of tensors may hold beside the inputs: outputs and other sets of a reference file.
_OTHER_KEYS = NOT_INPUTS


def _read_file(path: Path) -> dict[str, torch.Tensor]:
    """The tensors of a .safetensors file (native dtypes; bfloat16 back from numpy's float32 exactly)."""
    from ... import safetensors_io

    found = {}
    for key, raw in safetensors_io.read(path).items():
        t = torch.from_numpy(raw.to_numpy().copy())
        found[key] = t.to(torch.bfloat16) if raw.dtype == "bfloat16" else t
    return found


def _check_set(tensors: tuple[torch.Tensor, ...], specs: list[TensorSpec], example: tuple[torch.Tensor, ...]) -> str:
    """Why the set cannot be run as given ("" when it can): a dtype other than the example's (the
    bundle's inputs have fixed dtypes). Shapes are left to eager PyTorch and the bundle to judge."""
    for spec, t, e in zip(specs, tensors, example, strict=True):
        if t.dtype != e.dtype:
            return (
                f"input {spec.name} is {str(t.dtype).removeprefix('torch.')}, the model's input is "
                f"{str(e.dtype).removeprefix('torch.')}"
            )
    return ""


def resolve(specs: list[Spec], ir: TorchIR, example: ModelInputs) -> list[InputSet]:
    """Every entry of `normalize(verify_inputs)` as input sets ("auto" expands to several, once)."""
    tensors = example.tensors
    sets: list[InputSet] = []
    auto_done = False
    for k, spec in enumerate(specs):
        where = f"verify_inputs[{k}]"
        if isinstance(spec, str) and spec == AUTO:
            if not auto_done:
                sets += auto_sets(ir.inputs, tensors)
                auto_done = True
            continue
        if isinstance(spec, dict):
            given = {str(key): _as_tensor(v, f"{where}[{key!r}]") for key, v in spec.items()}
            chosen, kept = _from_mapping(given, ir.inputs, tensors, where, strict=True)
            label, description = f"inputs:{k}", f"input set {k} of verify_inputs (a dict)"
        elif isinstance(spec, (tuple, list)):
            if len(spec) != len(ir.inputs):
                raise InputError(
                    f"{where} has {len(spec)} tensor(s); the model takes {len(ir.inputs)} "
                    f"({', '.join(s.name for s in ir.inputs)}), in this order"
                )
            chosen = tuple(_as_tensor(v, f"{where}[{i}]") for i, v in enumerate(spec))
            kept = []
            label, description = f"inputs:{k}", f"input set {k} of verify_inputs (a tuple in input order)"
        else:
            path = Path(spec)
            found = {k: v for k, v in _read_file(path).items() if not k.startswith(_OTHER_KEYS)}
            chosen, kept = _from_mapping(found, ir.inputs, tensors, f"{where} ({path})", strict=True)
            if len(kept) == len(ir.inputs):
                raise InputError(
                    f"{where}: {path} holds no tensor named after an input; expected keys such as "
                    f"{ir.inputs[0].name!r} or '{input_key(ir.inputs[0].name)}' (inputs: "
                    f"{', '.join(s.name for s in ir.inputs)})"
                )
            label, description = f"file:{path.name}", f"inputs from {path}"
        if kept:
            description += f"; {', '.join(kept)} from the example"
        error = _check_set(chosen, ir.inputs, tensors)
        sets.append(InputSet(label, description, None if error else chosen, error))
    return sets


def record_input_sets(
    model: Any,
    ir: TorchIR,
    example: ModelInputs,
    reference: dict[str, torch.Tensor],
    specs: list[Spec],
    state: ModelState | None = None,
    implicit: bool = False,
) -> None:
    """Resolve `specs`, run eager PyTorch on each set, and record them: `ir.input_sets` gets
    {"label", "description", "error"?} per set, `reference` its inputs and eager outputs
    (`set.<k>.input.<name>`, `set.<k>.output.<name>`). A set eager PyTorch raises on is recorded
    with the error (it then fails verification), unless the sets are `implicit` (chosen by the tool,
    not the user: the model may refuse them), where it is left out. Each set's run starts from `state`
    (the module's state as the conversion found it, `state.ModelState`)."""
    from .reference import eager_point

    ir.input_sets = []
    for s in resolve(specs, ir, example):
        k = len(ir.input_sets)
        entry: dict[str, Any] = {"label": s.label, "description": s.description} | (
            {"implicit": True} if implicit else {}
        )
        if s.tensors is None:
            entry["error"] = s.error
            ir.input_sets += [] if implicit else [entry]
            continue
        try:
            outputs, values = eager_point(model, ir, example, s.tensors, state)
        except InputError as e:
            if implicit:
                continue
            ir.input_sets.append(entry)
            cause = e.__cause__
            first = str(cause).strip().splitlines()[0] if cause is not None and str(cause).strip() else ""
            entry["error"] = f"eager PyTorch raised {type(cause).__name__}: {first}" if cause else e.message
            continue
        ir.input_sets.append(entry)
        if values:
            entry["values"] = values
        for spec, t in zip(ir.inputs, s.tensors, strict=True):
            reference[input_key(spec.name, set_prefix(k))] = t.detach()
        reference.update({output_key(name, set_prefix(k)): t for name, t in outputs.items()})


# ---- "auto": adversarial sets from the example's shapes, dtypes and value ranges ----

# Rounding boundaries: integers, halves (round-half-even ties), and multiples of 3 and 7 whose
# quotients by each other (and by 0.5, 1.5, 2, ...) land exactly on integers or halves; no zero
# (the zeros set has it), so dividing one input by another never divides by zero.
NUMERATORS = (
    21.0,
    -21.0,
    7.0,
    -7.0,
    3.0,
    -3.0,
    42.0,
    -42.0,
    6.0,
    -6.0,
    14.0,
    -14.0,
    1.5,
    -1.5,
    2.5,
    -2.5,
    0.5,
    -0.5,
    3.5,
    -3.5,
    10.5,
    -10.5,
    9.0,
    -9.0,
    35.0,
    -35.0,
    1.0,
    -1.0,
    2.0,
    -2.0,
)
# The second and later float inputs (divisors, if the model divides one input by another): a
# length coprime with NUMERATORS', so every numerator meets every divisor along the elements.
DIVISORS = (3.0, 7.0, -3.0, -7.0, 0.5, -0.5, 1.5, 2.0, -2.0, 1.0, -1.0, 2.5, -1.5)
# Integer rounding boundaries, those in the input's observed range.
INT_BOUNDARIES = (0, 3, -3, 7, -7, 21, -21, 42, -42, 6, -6, 14, -14, 1, -1, 2, -2)
# |x| of the large-magnitude set: exp stays finite in float32 (exp(88.7) overflows) and, for
# float16/bfloat16 inputs, in float16 (exp(11.09) overflows).
LARGE = {"full": (30.0, 80.0), "half": (4.0, 11.0)}


@dataclass
class _Input:
    """What the generator knows of one input: its name, example tensor and role."""

    name: str
    example: torch.Tensor
    kind: str  # "float", "int", "mask" (bool, a float additive mask, an int 0/1 mask), "empty"
    lo: int = 0  # integers: the example's observed range
    hi: int = 0
    mask_value: float = 0.0  # a float additive mask: its masking value (the example's minimum)


def _classify(spec: TensorSpec, t: torch.Tensor) -> _Input:
    if not t.numel():
        return _Input(spec.name, t, "empty")
    if t.dtype == torch.bool:
        return _Input(spec.name, t, "mask")
    if t.is_floating_point():
        vals = t.double()
        masking = (vals <= -1e4) | (vals == -math.inf)
        if bool(masking.any()) and bool((masking | (vals == 0)).all()):
            return _Input(spec.name, t, "mask", mask_value=float(t.min()))
        return _Input(spec.name, t, "float")
    lo, hi = int(t.min()), int(t.max())
    if {lo, hi} <= {0, 1} and (lo != hi or "mask" in spec.name.lower()):
        return _Input(spec.name, t, "mask", lo=lo, hi=hi)
    return _Input(spec.name, t, "int", lo=lo, hi=hi)


def _rows(t: torch.Tensor) -> torch.Tensor:
    """A copy of `t` viewed as rows along its last axis (a 0-d tensor is one row of one)."""
    return t.detach().clone().reshape(-1, t.shape[-1] if t.dim() else 1)


def _tile(values: Sequence[float], like: torch.Tensor, shift: int = 0) -> torch.Tensor:
    n = like.numel()
    idx = (torch.arange(n) + shift) % len(values)
    return torch.tensor(values, dtype=torch.float64)[idx].reshape(like.shape).to(like.dtype)


Maker = Callable[[_Input, int, torch.Generator], "torch.Tensor | None"]


def _rounding(inp: _Input, order: int, gen: torch.Generator) -> torch.Tensor | None:
    if inp.kind == "float":
        return _tile(NUMERATORS if order == 0 else DIVISORS, inp.example, shift=max(order - 1, 0) * 5)
    if inp.kind == "int":
        found = [v for v in INT_BOUNDARIES if inp.lo <= v <= inp.hi]
        found = list(dict.fromkeys([*found, inp.lo, inp.hi]))
        return _tile([float(v) for v in found], inp.example) if len(found) > 1 else None
    return None


def _ties(inp: _Input, order: int, gen: torch.Generator) -> torch.Tensor | None:
    if inp.kind == "float":
        choices = [-1.0, 0.0, 1.0]
    elif inp.kind == "int" and inp.hi > inp.lo:
        choices = [float(v) for v in dict.fromkeys([inp.lo, (inp.lo + inp.hi) // 2, inp.hi])]
    else:
        return None
    rows = _rows(inp.example)
    table = torch.tensor(choices, dtype=torch.float64)
    for r in range(rows.shape[0]):
        if r % 2 == 0:  # the whole row one value
            rows[r] = table[(r // 2 + len(choices) - 1) % len(choices)].item()
        else:  # a few distinct values, each many times
            rows[r] = table[torch.randint(len(choices), (rows.shape[1],), generator=gen)].to(rows.dtype)
    return rows.reshape(inp.example.shape)


def _large(inp: _Input, order: int, gen: torch.Generator) -> torch.Tensor | None:
    if inp.kind != "float":
        return None
    lo, hi = LARGE["half" if inp.example.dtype in (torch.float16, torch.bfloat16) else "full"]
    shape = inp.example.shape
    magnitude = lo + (hi - lo) * torch.rand(shape, generator=gen, dtype=torch.float64)
    sign = torch.where(torch.rand(shape, generator=gen) < 0.5, -1.0, 1.0).double()
    # no zeros here: a divisor of 0 is the zeros set's business (it keeps divisors non-zero)
    return (magnitude * sign).to(inp.example.dtype)


def _zeros(inp: _Input, order: int, gen: torch.Generator) -> torch.Tensor | None:
    # Only the first float input: the later ones may divide it, and 0/0 everywhere is an all-NaN
    # output, which never passes and shows nothing.
    if (inp.kind == "float" and order == 0) or (inp.kind == "int" and inp.lo <= 0 <= inp.hi):
        return torch.zeros_like(inp.example)
    return None


def _negative(inp: _Input, order: int, gen: torch.Generator) -> torch.Tensor | None:
    if inp.kind == "float":
        t = inp.example
        return torch.where(t.abs() > 0, -t.abs(), torch.full_like(t, -1.0))
    if inp.kind == "int" and inp.lo < 0:
        top = min(inp.hi, -1)
        return torch.randint(inp.lo, top + 1, inp.example.shape, generator=gen).to(inp.example.dtype)
    return None


def _masked_row(inp: _Input, order: int, gen: torch.Generator) -> torch.Tensor | None:
    if inp.kind != "mask":
        return None
    rows = _rows(inp.example)
    t = inp.example
    masked: float
    open_: float
    if t.dtype == torch.bool:
        masked, open_ = False, True  # SDPA's convention: False masks; masked_fill's: True masks
    elif t.is_floating_point():
        masked, open_ = inp.mask_value, 0.0  # additive: the example's masking value, or nothing
    else:
        masked, open_ = 0, 1  # a 0/1 attention mask: 0 masks
    rows[0] = masked
    if rows.shape[0] > 1:
        rows[1] = open_
    return rows.reshape(t.shape)


def _int_bound(which: str) -> Maker:
    def make(inp: _Input, order: int, gen: torch.Generator) -> torch.Tensor | None:
        if inp.kind != "int" or inp.lo == inp.hi:
            return None
        return torch.full_like(inp.example, inp.lo if which == "min" else inp.hi)

    return make


# (kind, what the set exercises, maker), in the order the sets are made.
AUTO_KINDS: tuple[tuple[str, str, Maker], ...] = (
    (
        "rounding",
        "rounding boundaries for division, floor/ceil/round/trunc: integers, halves (±0.5, ±1.5, ±2.5, "
        "round-half-even ties), multiples of 3 and 7 whose quotients land on integers (the second and later float "
        "inputs hold the divisors 3, 7, 0.5, 1.5, 2, ...), negatives; integers: such values within the example's "
        "range",
        _rounding,
    ),
    (
        "ties",
        "ties for argmax/argmin/max/topk/sort: every other row (last axis) one value, the rows between drawn "
        "from {-1, 0, 1} (integers: {min, middle, max} of the example's range)",
        _ties,
    ),
    (
        "large",
        "large magnitudes for softmax/exp/logsumexp/norms: |x| in 30..80 (float16/bfloat16 inputs: 4..11, "
        "so exp stays finite) with random signs",
        _large,
    ),
    (
        "zeros",
        "all zeros: the first float input (later float inputs keep the example's values: they may divide "
        "it) and integer inputs whose example range holds 0",
        _zeros,
    ),
    (
        "negative",
        "all negative: -|example| (zeros become -1); integers: within the example's negative range",
        _negative,
    ),
    (
        "masked-row",
        "masks: row 0 (last axis) fully masking (bool: all False; float additive mask: all at the "
        "example's masking value; 0/1 int mask: all 0), row 1 not masking at all (all True / 0 / 1)",
        _masked_row,
    ),
    ("int-min", "integer inputs (e.g. token ids) all at the example's minimum", _int_bound("min")),
    ("int-max", "integer inputs (e.g. token ids) all at the example's maximum", _int_bound("max")),
)


def auto_sets(specs: list[TensorSpec], example: tuple[torch.Tensor, ...]) -> list[InputSet]:
    """Adversarial sets with the example's shapes (dynamic dims at their example sizes) and dtypes.

    Float inputs get the rounding/ties/large/zeros/negative values; integer inputs stay within
    the example's observed [min, max] (token ids stay valid indices) and get their boundaries;
    masks (bool inputs, float additive masks of 0 and large negatives, 0/1 integer masks) change
    only in the masked-row set. An input a kind does not apply to keeps the example's values; a
    kind that applies to no input makes no set."""
    inputs = [_classify(s, t) for s, t in zip(specs, example, strict=True)]
    sets = []
    for n, (kind, description, make) in enumerate(AUTO_KINDS):
        gen = torch.Generator().manual_seed(AUTO_SEED + n)
        tensors, changed, floats = [], [], 0
        for inp in inputs:
            made = make(inp, floats, gen) if inp.kind != "empty" else None
            floats += inp.kind == "float"
            if made is None:
                tensors.append(inp.example)
            else:
                tensors.append(made.to(inp.example.dtype).reshape(inp.example.shape))
                changed.append(inp.name)
        if changed:
            sets.append(InputSet(f"auto:{kind}", f"{description} (inputs {', '.join(changed)})", tuple(tensors)))
    return sets
