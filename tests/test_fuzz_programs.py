"""Fuzzing (hypothesis): random small valid torch-ir programs, written as a conversion directory with
PyTorch's own results as the reference, are rebuilt by `build` and must verify: the whole pipeline from
torch-ir (validation, lowering, the RLX workaround layer, the core, RLX) on programs nobody wrote by hand.

The programs chain elementwise, reduction, permutation and matrix ops over float32/float64/int64/int32
values of random small shapes; every value's shape and dtype, and the reference, come from running the
same ATen overloads eagerly (`torch.ops.aten`), so the files are exactly what an export would give."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rlx_torch_import as rti
from rlx_torch_import import layout, safetensors_io, torchir

RUNS = 200  # hypothesis examples per run of the suite (each is one `build`: lower, compile, verify; ~10 ms)

FLOAT_UNARY = ["relu", "neg", "tanh", "sigmoid", "abs", "sin", "exp"]
INT_UNARY = ["relu", "neg", "abs"]
BINARY = ["add.Tensor", "mul.Tensor", "sub.Tensor", "maximum"]


@dataclass
class Builder:
    """A torch-ir document under construction, with each value's eager tensor."""

    dtype: torch.dtype
    values: dict[str, torch.Tensor] = field(default_factory=dict)
    nodes: list[dict[str, Any]] = field(default_factory=list)

    def call(self, op: str, args: list[Any], kwargs: dict[str, Any] | None = None) -> str:
        """Run `aten.<op>` eagerly on tagged args and record the node; returns the new value's name."""
        kwargs = kwargs or {}
        target = op if "." in op else f"{op}.default"
        fn = getattr(torch.ops.aten, target.split(".")[0]).__getattr__(target.split(".")[1])
        result = fn(*[self._eager(a) for a in args], **{k: self._eager(a) for k, a in kwargs.items()})
        name = f"v{len(self.nodes)}"
        self.values[name] = result
        self.nodes.append(
            {
                "name": name,
                "target": f"aten.{target}",
                "args": args,
                "kwargs": kwargs,
                "outputs": [{"name": name, "shape": list(result.shape), "dtype": str(result.dtype).split(".")[1]}],
            }
        )
        return name

    def _eager(self, arg: dict[str, Any]) -> Any:
        tag, payload = next(iter(arg.items()))
        if tag == "tensor":
            return self.values[payload]
        if tag == "list":
            return [self._eager(a) for a in payload]
        return payload


def _tensor(name: str) -> dict[str, str]:
    return {"tensor": name}


@st.composite
def programs(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """(torch-ir document, weights by key, reference tensors) of one random valid program."""
    dtype = draw(st.sampled_from([torch.float32, torch.float64, torch.int64, torch.int32]))
    floating = dtype.is_floating_point
    shape = draw(st.lists(st.integers(1, 4), min_size=1, max_size=3))
    seed = draw(st.integers(0, 2**16))
    gen = torch.Generator().manual_seed(seed)
    make = (
        (lambda: torch.randn(shape, generator=gen, dtype=dtype))
        if floating
        else (lambda: torch.randint(-9, 10, shape, generator=gen, dtype=dtype))
    )
    b = Builder(dtype)
    b.values = {"x": make(), "w": make()}
    live = ["x", "w"]
    for _ in range(draw(st.integers(1, 6))):
        a = draw(st.sampled_from(live))
        kind = draw(st.sampled_from(["unary", "binary", "scalar", "permute", "sum", "cumsum", "matmul"]))
        rank = b.values[a].dim()
        if kind == "unary":
            live.append(b.call(draw(st.sampled_from(FLOAT_UNARY if floating else INT_UNARY)), [_tensor(a)]))
        elif kind == "binary":
            same = [v for v in live if b.values[v].shape == b.values[a].shape]
            other = draw(st.sampled_from(same))
            live.append(b.call(draw(st.sampled_from(BINARY)), [_tensor(a), _tensor(other)]))
        elif kind == "scalar":
            value = draw(st.floats(-3, 3, allow_nan=False, width=32)) if floating else draw(st.integers(-3, 3))
            tag = "float" if floating else "int"
            live.append(b.call(draw(st.sampled_from(["mul.Scalar", "add.Scalar"])), [_tensor(a), {tag: value}]))
        elif kind == "permute":
            perm = draw(st.permutations(list(range(rank))))
            live.append(b.call("permute", [_tensor(a), {"list": [{"int": p} for p in perm]}]))
        elif kind == "sum" and rank > 1:
            dim = draw(st.integers(-rank, rank - 1))
            keep = draw(st.booleans())
            live.append(b.call("sum.dim_IntList", [_tensor(a), {"list": [{"int": dim}]}, {"bool": keep}]))
        elif kind == "cumsum":
            live.append(b.call("cumsum", [_tensor(a), {"int": draw(st.integers(-rank, rank - 1))}]))
        elif kind == "matmul" and rank == 2:
            live.append(b.call("matmul", [_tensor(a), {"tensor": _transposed(b, a)}]))
    if not b.nodes:
        live.append(b.call("neg", [_tensor("x")]))
    outs = [b.nodes[-1]["name"], *draw(st.lists(st.sampled_from([n["name"] for n in b.nodes]), max_size=2))]
    outs = list(dict.fromkeys(outs))
    spec = lambda n, t: {"name": n, "shape": list(t.shape), "dtype": str(t.dtype).split(".")[1]}  # noqa: E731
    doc = {
        "format": torchir.FORMAT,
        "version": torchir.VERSION,
        "name": "fuzzed",
        "decomposition": "high",
        "inputs": [{**spec("x", b.values["x"]), "path": "x"}],
        "weights": [{**spec("w", b.values["w"]), "key": "w", "kind": "parameter"}],
        "nodes": b.nodes,
        "outputs": [{**spec(f"out{i}", b.values[v]), "value": v} for i, v in enumerate(outs)],
        "call_args": ["x"],
    }
    reference = {"input.x": b.values["x"], **{f"output.out{i}": b.values[v] for i, v in enumerate(outs)}}
    return doc, {"w": b.values["w"]}, reference


def _transposed(b: Builder, a: str) -> str:
    return b.call("permute", [_tensor(a), {"list": [{"int": 1}, {"int": 0}]}])


def _write(
    directory: Path, doc: dict[str, Any], weights: dict[str, torch.Tensor], ref: dict[str, torch.Tensor]
) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / layout.TORCH_IR).write_text(json.dumps(doc, indent=1))
    safetensors_io.write(directory / layout.WEIGHTS, dict(safetensors_io.iter_torch(weights)))
    safetensors_io.write(directory / layout.REFERENCE, dict(safetensors_io.iter_torch(ref)))


@settings(max_examples=RUNS, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(program=programs())
def test_random_valid_programs_verify(program: Any, tmp_path_factory: pytest.TempPathFactory) -> None:
    doc, weights, ref = program
    out = tmp_path_factory.mktemp("prog")
    _write(out, doc, weights, ref)
    report = rti.build(out, per_node=False)
    assert report.ok, f"{[n['target'] for n in doc['nodes']]}: {report.summary()}"
