"""The ONNX torch route (frontend.onnx.torch_route): translated models against ONNX Runtime / expected values."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

from rlx_torch_import.frontend.onnx.torch_route import Untranslatable, to_module

RNG = np.random.default_rng(0)


def _model(nodes, inputs, outputs, inits=(), opset=21):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    return m


def _vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def _run_both(model, feeds):
    """(torch route outputs as numpy, ONNX Runtime outputs); also checks the dtypes agree."""
    module, args, names = to_module(model, feeds)
    assert names == [v.name for v in model.graph.input if v.name not in {i.name for i in model.graph.initializer}]
    with torch.no_grad():
        ours = [t.numpy() for t in module(*args)]
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    theirs = sess.run(None, feeds)
    for a, b in zip(ours, theirs, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
    return ours, theirs


def test_float64_add_mul_matches_ort_exactly_and_exports():
    m = _model(
        [helper.make_node("Mul", ["x", "w"], ["t"]), helper.make_node("Add", ["t", "x"], ["y"])],
        [_vi("x", TensorProto.DOUBLE, [3, 4])],
        [_vi("y", TensorProto.DOUBLE, [3, 4])],
        [numpy_helper.from_array(RNG.standard_normal((3, 4)), "w")],
    )
    x = RNG.standard_normal((3, 4))
    ours, theirs = _run_both(m, {"x": x})
    np.testing.assert_array_equal(ours[0], theirs[0])
    module, args, _ = to_module(m, {"x": x})
    assert module.onnx_names == {}  # 12 elements: a translation-time constant, not a buffer
    ep = torch.export.export(module, args)
    np.testing.assert_array_equal(ep.module()(*args)[0].numpy(), theirs[0])


def test_float16_matmul_gemm_relu_chain_matches_ort():
    w = RNG.standard_normal((8, 5)).astype(np.float16)
    m = _model(
        [
            helper.make_node("MatMul", ["x", "w"], ["h"]),
            helper.make_node("Relu", ["h"], ["r"]),
            helper.make_node("Gemm", ["r", "w2"], ["y"], transB=1, alpha=0.5),
        ],
        [_vi("x", TensorProto.FLOAT16, [2, 8])],
        [_vi("y", TensorProto.FLOAT16, [2, 3])],
        [
            numpy_helper.from_array(w, "w"),
            numpy_helper.from_array(RNG.standard_normal((3, 5)).astype(np.float16), "w2"),
        ],
    )
    ours, theirs = _run_both(m, {"x": RNG.standard_normal((2, 8)).astype(np.float16)})
    np.testing.assert_allclose(ours[0].astype(np.float32), theirs[0].astype(np.float32), rtol=1e-2, atol=1e-2)
    module, _, _ = to_module(m, {"x": np.zeros((2, 8), np.float16)})
    assert module.onnx_names == {"w": "w"}  # 40 elements: a registered buffer named after the initializer
    assert module.w.dtype == torch.float16


def test_int16_arithmetic_wraps_and_divides_toward_zero():
    m = _model(
        [
            helper.make_node("Mul", ["a", "b"], ["p"]),
            helper.make_node("Div", ["a", "b"], ["q"]),
            helper.make_node("Mod", ["a", "b"], ["r"]),
            helper.make_node("Mod", ["a", "b"], ["f"], fmod=1),
        ],
        [_vi("a", TensorProto.INT16, [5]), _vi("b", TensorProto.INT16, [5])],
        [_vi(n, TensorProto.INT16, [5]) for n in "pqrf"],
    )
    a = np.array([300, -7, 7, -7, 32767], np.int16)
    b = np.array([300, 2, -2, -2, 2], np.int16)
    module, args, _ = to_module(m, {"a": a, "b": b})
    p, q, r, f = (t.numpy() for t in module(*args))
    assert p.dtype == np.int16
    np.testing.assert_array_equal(p, (a.astype(np.int64) * b).astype(np.int16))  # wraps like int16
    np.testing.assert_array_equal(q, [1, -3, -3, 3, 16383])
    np.testing.assert_array_equal(r, np.mod(a, b))
    np.testing.assert_array_equal(f, np.fmod(a, b))


def test_shape_chain_folds_to_static_reshape_and_exports():
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape: the shape operand is a translation-time constant."""
    m = _model(
        [
            helper.make_node("Shape", ["x"], ["s"]),
            helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
            helper.make_node("Unsqueeze", ["n", "zero1"], ["n1"]),
            helper.make_node("Concat", ["n1", "minus1"], ["shape"], axis=0),
            helper.make_node("Reshape", ["x", "shape"], ["y"]),
        ],
        [_vi("x", TensorProto.FLOAT, [2, 3, 4])],
        [_vi("y", TensorProto.FLOAT, [2, 12])],
        [
            numpy_helper.from_array(np.array(0, np.int64), "zero"),
            numpy_helper.from_array(np.array([0], np.int64), "zero1"),
            numpy_helper.from_array(np.array([-1], np.int64), "minus1"),
        ],
    )
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    ours, theirs = _run_both(m, {"x": x})
    np.testing.assert_array_equal(ours[0], theirs[0])
    module, args, _ = to_module(m, {"x": x})
    assert len(module.steps) == 1  # only the Reshape runs; the shape arithmetic was folded
    torch.export.export(module, args)


def test_untranslatable_lists_every_node_at_once():
    m = _model(
        [
            helper.make_node("Relu", ["x"], ["a"], name="ok"),
            helper.make_node("Frobnicate", ["a"], ["b"], name="custom", domain="com.example"),
            helper.make_node("NonZero", ["x"], ["c"], name="nz"),
            helper.make_node("Reshape", ["x", "shape"], ["d"], name="rs"),
        ],
        [_vi("x", TensorProto.FLOAT, [2, 3]), _vi("shape", TensorProto.INT64, [1])],
        [_vi("b", TensorProto.FLOAT, None), _vi("c", TensorProto.INT64, None), _vi("d", TensorProto.FLOAT, [6])],
    )
    m.opset_import.append(helper.make_opsetid("com.example", 1))
    with pytest.raises(Untranslatable) as e:
        to_module(m, {"x": np.ones((2, 3), np.float32), "shape": np.array([6], np.int64)})
    items = e.value.items
    assert [name for name, _, _ in items] == ["custom", "nz", "rs"]
    assert items[0][1] == "Frobnicate (com.example opset 21)"
    assert "domain" in items[0][2]
    assert "data" in items[1][2]
    assert "computed at run time" in items[2][2] and "'shape'" in items[2][2]
    assert e.value.inputs_needed_constant == ["shape"]


def test_resize_linear_and_conv_same_upper_and_maxpool_ceil_match_ort():
    w = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)
    m = _model(
        [
            helper.make_node("Resize", ["x", "", "scales"], ["r"], mode="linear"),
            helper.make_node("Conv", ["r", "w"], ["c"], auto_pad="SAME_UPPER", strides=[2, 2]),
            helper.make_node("MaxPool", ["c"], ["y"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1),
        ],
        [_vi("x", TensorProto.FLOAT, [1, 3, 5, 7])],
        [_vi("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array([1, 1, 1.5, 2.0], np.float32), "scales"), numpy_helper.from_array(w, "w")],
    )
    ours, theirs = _run_both(m, {"x": RNG.standard_normal((1, 3, 5, 7)).astype(np.float32)})
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-5, atol=1e-5)


def test_cumsum_exclusive_reverse_and_topk_ties():
    m = _model(
        [
            helper.make_node("CumSum", ["x", "axis"], ["c"], exclusive=1, reverse=1),
            helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=-1, largest=1),
        ],
        [_vi("x", TensorProto.INT32, [1, 5])],
        [_vi("c", TensorProto.INT32, [1, 5]), _vi("v", TensorProto.INT32, [1, 3]), _vi("i", TensorProto.INT64, [1, 3])],
        [numpy_helper.from_array(np.array(1, np.int64), "axis"), numpy_helper.from_array(np.array([3], np.int64), "k")],
    )
    x = np.array([[1, 5, 2, 5, 3]], np.int32)
    module, args, _ = to_module(m, {"x": x})
    c, v, i = (t.numpy() for t in module(*args))
    np.testing.assert_array_equal(c, [[15, 10, 8, 3, 0]])
    np.testing.assert_array_equal(v, [[5, 5, 3]])
    np.testing.assert_array_equal(i, [[1, 3, 4]])  # ties: the lower index first


def test_quantize_per_axis_rounds_half_to_even_and_saturates():
    m = _model(
        [helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["q"], axis=1)],
        [_vi("x", TensorProto.FLOAT, [1, 2, 3])],
        [_vi("q", TensorProto.INT8, [1, 2, 3])],
        [
            numpy_helper.from_array(np.array([1.0, 2.0], np.float32), "s"),
            numpy_helper.from_array(np.array([0, 1], np.int8), "zp"),
        ],
    )
    x = np.array([[[0.5, 1.5, 2.5], [3.0, 1000.0, -1000.0]]], np.float32)
    module, args, _ = to_module(m, {"x": x})
    np.testing.assert_array_equal(module(*args)[0].numpy(), [[[0, 2, 2], [3, 127, -128]]])


def test_lstm_bidirectional_matches_ort():
    hid, inp = 3, 2
    m = _model(
        [helper.make_node("LSTM", ["x", "W", "R", "B"], ["y", "yh", "yc"], hidden_size=hid, direction="bidirectional")],
        [_vi("x", TensorProto.FLOAT, [4, 2, inp])],
        [_vi("y", TensorProto.FLOAT, None), _vi("yh", TensorProto.FLOAT, None), _vi("yc", TensorProto.FLOAT, None)],
        [
            numpy_helper.from_array(RNG.standard_normal((2, 4 * hid, inp)).astype(np.float32), "W"),
            numpy_helper.from_array(RNG.standard_normal((2, 4 * hid, hid)).astype(np.float32), "R"),
            numpy_helper.from_array(RNG.standard_normal((2, 8 * hid)).astype(np.float32), "B"),
        ],
    )
    ours, theirs = _run_both(m, {"x": RNG.standard_normal((4, 2, inp)).astype(np.float32)})
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_onnx_names_sanitized_for_dotted_initializer():
    w = RNG.standard_normal((20,)).astype(np.float32)
    m = _model(
        [helper.make_node("Add", ["x", "layer.0/weight:0"], ["y"])],
        [_vi("x", TensorProto.FLOAT, [20])],
        [_vi("y", TensorProto.FLOAT, [20])],
        [numpy_helper.from_array(w, "layer.0/weight:0")],
    )
    module, args, _ = to_module(m, {"x": np.zeros(20, np.float32)})
    assert module.onnx_names == {"layer_0_weight_0": "layer.0/weight:0"}
    np.testing.assert_array_equal(module(*args)[0].numpy(), w)
    assert isinstance(onnx.load_from_string(m.SerializeToString()), onnx.ModelProto)
