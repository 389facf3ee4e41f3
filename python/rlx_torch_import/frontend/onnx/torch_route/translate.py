"""`to_module`: translate an ONNX model into an `OnnxModule` (see module.py for the handler protocol)."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import torch

from rlx_torch_import.frontend.onnx.torch_route.module import (
    _RANDOM,
    REGISTRY,
    SMALL,
    Const,
    NodeCtx,
    NodeError,
    OnnxModule,
    Untranslatable,
    Value,
    _attr_name,
    _opsets,
    _Step,
    _what,
    array_to_tensor,
    load_families,
    tensor_from_proto,
    torch_dtype,
)


class _Translation:
    """The state of one translation: values by name, the module being built, the failures."""

    def __init__(self, model: onnx.ModelProto) -> None:
        self.model = model
        self.opset = _opsets(model).get("ai.onnx", 1)
        self.mod = OnnxModule()
        self.taken: set[str] = set(dir(self.mod))
        self.values: dict[str, Value] = {}
        self.large_inits: set[str] = set()
        self.items: list[tuple[str, str, str]] = []
        self.needed: list[str] = []
        self._inferred: dict[str, Any] | None = None

    def source(self, name: str) -> tuple[str, Any]:
        """Where the module finds value `name` at run time (a large constant becomes a buffer on first use)."""
        v = self.values[name]
        if not v.const:
            return ("env", name)
        if v.buffer is None and v.example.numel() > SMALL:
            v.buffer = _attr_name(name, self.taken)
            self.mod.register_buffer(v.buffer, v.example.clone())
            self.mod.onnx_names[v.buffer] = name
        return ("buf", v.buffer) if v.buffer is not None else ("const", v.example)

    def inferred(self) -> dict[str, Any]:
        """ONNX shape inference's value types by name (used to stand in for a failed node's outputs)."""
        if self._inferred is None:
            try:
                m = onnx.shape_inference.infer_shapes(self.model)
                vis = [*m.graph.value_info, *m.graph.output]
                self._inferred = {v.name: v.type for v in vis}
            except Exception:
                self._inferred = {}
        return self._inferred

    def stand_in(self, node: onnx.NodeProto) -> None:
        """Zeros of the inferred type for a failed node's outputs, so later nodes can still be checked."""
        for out in node.output:
            tp = self.inferred().get(out)
            if not out or tp is None or tp.WhichOneof("value") != "tensor_type":
                continue
            dims = tp.tensor_type.shape.dim
            if not tp.tensor_type.HasField("shape") or any(not d.HasField("dim_value") for d in dims):
                continue
            try:
                dt = torch_dtype(tp.tensor_type.elem_type)
            except NodeError:
                continue
            self.values[out] = Value(torch.zeros([d.dim_value for d in dims], dtype=dt))

    def node(self, node: onnx.NodeProto) -> None:
        """Translate one node: a runtime step, or constants (folded / Const); NodeError when it cannot."""
        if node.domain not in ("", "ai.onnx"):
            raise NodeError(f"domain {node.domain!r} is not ai.onnx")
        handler = REGISTRY.get(node.op_type)
        if handler is None:
            raise NodeError("no torch translation for this op type")
        ins = [self.values.get(n) if n else None for n in node.input]
        if any(n and v is None for n, v in zip(node.input, ins, strict=True)):
            return  # an upstream node failed (already reported)
        ctx = NodeCtx(node, self.opset, ins)
        res = handler(ctx)
        if isinstance(res, Const):
            self._bind(node, res.values, const=True)
            return
        deps = frozenset().union(*[v.deps for v in ins if v is not None])
        runtime = [i for i, v in enumerate(ins) if v is not None and i not in ctx.static]
        args = [v.example if i in runtime and v is not None else None for i, v in enumerate(ins)]
        with torch.no_grad():
            out = res(*args)
        outs = out if isinstance(out, tuple) else (out,)
        fold = node.op_type not in _RANDOM and all(
            ins[i].const and node.input[i] not in self.large_inits  # type: ignore[union-attr]
            for i in runtime
        )
        if not fold:
            sources = [self.source(node.input[i]) if i in runtime else None for i in range(len(ins))]
            self.mod.steps.append(_Step(res, sources, list(node.output)))
        self._bind(node, outs, const=fold, deps=frozenset() if fold else deps)

    def _bind(
        self, node: onnx.NodeProto, outs: tuple[Any, ...], const: bool, deps: frozenset[str] = frozenset()
    ) -> None:
        for k, name in enumerate(node.output):
            if not name:
                continue
            if k >= len(outs) or outs[k] is None:
                raise NodeError(f"output {k} ({name!r}) is not produced by the translation")
            self.values[name] = Value(outs[k], const=const, deps=deps)

    def if_(self, node: onnx.NodeProto) -> None:
        """If with a constant condition: the taken branch's nodes are translated in place."""
        cond = self.values.get(node.input[0])
        if cond is None:
            return
        if not cond.const:
            raise NodeError("If on a run-time condition (data-dependent control flow)", value=node.input[0])
        key = "then_branch" if bool(cond.example.reshape(-1)[0]) else "else_branch"
        branch = next(a.g for a in node.attribute if a.name == key)
        for inner in branch.node:
            self.run_node(inner)
        for out, bout in zip(node.output, branch.output, strict=True):
            v = self.values.get(bout.name)
            if v is None:
                return
            self.values[out] = v
            if not v.const:
                self.mod.steps.append(_Step(_identity, [("env", bout.name)], [out]))

    def run_node(self, node: onnx.NodeProto) -> None:
        """Translate `node`, recording its failure (and standing in for its outputs) when it fails."""
        try:
            if node.op_type == "If" and node.domain in ("", "ai.onnx"):
                self.if_(node)
            else:
                self.node(node)
        except NodeError as e:
            self.items.append((node.name, _what(node, self.opset), str(e)))
            if e.value is not None and e.value in self.values:
                self.needed.extend(self.values[e.value].deps)
            self.stand_in(node)
        except Exception as e:  # torch lacks a kernel for a dtype, a shape it rejects, ...
            first = (str(e).strip().splitlines() or [""])[0][:300]
            self.items.append(
                (node.name, _what(node, self.opset), f"torch cannot compute it: {type(e).__name__}: {first}")
            )
            self.stand_in(node)


def _identity(x: torch.Tensor) -> torch.Tensor:
    return x


def _inputs(tr: _Translation, inputs: dict[str, np.ndarray]) -> list[torch.Tensor]:
    g = tr.model.graph
    inits = {t.name for t in g.initializer}
    args = []
    for vi in g.input:
        if vi.name in inits:
            continue
        tp = vi.type
        if tp.WhichOneof("value") != "tensor_type":
            tr.items.append(("<graph input>", f"input {vi.name!r}", "not a tensor"))
            continue
        try:
            dt = torch_dtype(tp.tensor_type.elem_type, f"graph input {vi.name!r}: ")
        except NodeError as e:
            tr.items.append(("<graph input>", f"input {vi.name!r}", str(e)))
            continue
        if vi.name not in inputs:
            raise ValueError(f"to_module: no example value given for graph input {vi.name!r}")
        t = array_to_tensor(inputs[vi.name], dt)
        tr.values[vi.name] = Value(t, deps=frozenset([vi.name]))
        tr.mod.input_names.append(vi.name)
        args.append(t)
    return args


def to_module(
    model: onnx.ModelProto, inputs: dict[str, np.ndarray]
) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...], list[str]]:
    """Translate `model` (ai.onnx ops) into a torch module, shapes fixed by the example `inputs`.

    Returns (module in eval mode, example args in graph-input order, input names). forward takes the
    graph's non-initializer inputs positionally and returns a tuple of the graph outputs, in ONNX's
    dtypes and shapes. Constants with more than 16 elements that the module uses at run time are
    registered buffers (`module.onnx_names`: buffer name -> ONNX value name); smaller ones, and every
    value computed from constants only, are translation-time constants (shape operands are static ints).

    Raises Untranslatable listing every node (and graph input) that cannot be translated; ValueError
    when `inputs` lacks a graph input."""
    load_families()
    tr = _Translation(model)
    for t in model.graph.initializer:
        try:
            tr.values[t.name] = Value(tensor_from_proto(t), const=True)
        except NodeError as e:
            tr.items.append((t.name, "initializer", str(e)))
            continue
        if tr.values[t.name].example.numel() > SMALL:
            tr.large_inits.add(t.name)
    args = _inputs(tr, inputs)
    for node in model.graph.node:
        tr.run_node(node)
    if tr.items:
        raise Untranslatable(tr.items, sorted(set(tr.needed)))
    tr.mod.output_sources = [tr.source(o.name) for o in model.graph.output]
    return tr.mod.eval(), tuple(args), list(tr.mod.input_names)
