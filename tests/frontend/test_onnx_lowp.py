"""Models with bfloat16, float8 and int4 tensors: ops computed in float32 between conversions,
packed int4 initializers, BitCast; references from ml_dtypes (rounding only) and numpy."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import ember
from ember.frontend.onnx import UnsupportedModelError, from_onnx

RNG = np.random.default_rng(5)


def _model(nodes, inputs, outputs, initializers=(), opset=22):
    graph = h.make_graph(nodes, "m", inputs, outputs, list(initializers))
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])


def test_bfloat16_ops_compute_in_float32_and_round_once():
    a = RNG.standard_normal((4, 33)).astype(ml_dtypes.bfloat16)
    b = RNG.standard_normal((4, 33)).astype(ml_dtypes.bfloat16)
    nodes = [h.make_node("Mul", ["a", "b"], ["m"]), h.make_node("Exp", ["m"], ["e"]),
             h.make_node("ReduceSum", ["e", "axes"], ["y"], keepdims=0)]
    axes = h.make_tensor("axes", T.INT64, [1], [1])
    model = _model(nodes, [h.make_tensor_value_info("a", T.BFLOAT16, [4, 33]),
                           h.make_tensor_value_info("b", T.BFLOAT16, [4, 33])],
                   [h.make_tensor_value_info("y", T.BFLOAT16, [4])], [axes])
    (got,) = ember.compile(model).run({"a": a, "b": b})
    assert got.dtype == np.dtype(ml_dtypes.bfloat16)
    # each op rounds its float32 result to bfloat16, as onnxruntime does
    m = (a.astype(np.float32) * b.astype(np.float32)).astype(ml_dtypes.bfloat16)
    e = np.exp(m.astype(np.float32)).astype(ml_dtypes.bfloat16)
    want = e.astype(np.float32).sum(axis=1)
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=2 ** -7)


def test_packed_int4_initializer_and_float8_output():
    values = RNG.integers(-8, 8, (3, 5))
    w = h.make_tensor("w", T.INT4, [3, 5], values.ravel().tolist())   # two per byte
    nodes = [h.make_node("Cast", ["w"], ["wf"], to=T.FLOAT),
             h.make_node("Mul", ["x", "wf"], ["p"]),
             h.make_node("Cast", ["p"], ["y"], to=T.FLOAT8E4M3FN)]
    model = _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, [3, 5])],
                   [h.make_tensor_value_info("y", T.FLOAT8E4M3FN, [3, 5])], [w])
    x = RNG.standard_normal((3, 5)).astype(np.float32) * 30
    (got,) = ember.compile(model).run({"x": x})
    want = np.clip(x * values, -448, 448).astype(ml_dtypes.float8_e4m3fn)
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def test_bitcast_in_a_model():
    x = RNG.standard_normal((2, 9)).astype(np.float32)
    model = _model([h.make_node("BitCast", ["x"], ["y"], to=T.INT32)],
                   [h.make_tensor_value_info("x", T.FLOAT, [2, 9])],
                   [h.make_tensor_value_info("y", T.INT32, [2, 9])], opset=26)
    (got,) = ember.compile(model).run({"x": x})
    np.testing.assert_array_equal(got, x.view(np.int32))


def test_bitcast_between_widths_is_rejected():
    model = _model([h.make_node("BitCast", ["x"], ["y"], to=T.INT16)],
                   [h.make_tensor_value_info("x", T.FLOAT, [4])],
                   [h.make_tensor_value_info("y", T.INT16, [4])], opset=26)
    with pytest.raises(UnsupportedModelError, match="BitCast: float32 and int16 differ"):
        from_onnx(model)


def test_cast_to_an_unknown_type_code_is_rejected():
    model = _model([h.make_node("Cast", ["x"], ["y"], to=T.STRING)],
                   [h.make_tensor_value_info("x", T.FLOAT, [4])],
                   [h.make_tensor_value_info("y", T.STRING, [4])])
    with pytest.raises(UnsupportedModelError, match="Cast: ONNX data type 8 is not supported"):
        from_onnx(model)
