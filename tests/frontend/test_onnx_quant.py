"""int8 operators against onnxruntime on seeded random data: QuantizeLinear,
DequantizeLinear, DynamicQuantizeLinear, MatMulInteger, QLinearMatMul, ConvInteger,
QLinearConv, and a QDQ block as quantization tools write it."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

import ember
from ember.frontend.onnx import UnsupportedModelError, from_onnx

ort = pytest.importorskip("onnxruntime")
RNG = np.random.default_rng(11)
U8, I8 = np.uint8, np.int8


def weights_i8(shape):
    """Signed 8-bit weights in 7 bits ([-64, 63]), as quantize_static(reduce_range=True)
    writes them: onnxruntime's x86 u8 x s8 kernels without VNNI sum pairs of products in
    16 bits with saturation, so full-range weights are not exact there (ember's kernels
    are; test_matmul_integer_full_range checks them against numpy)."""
    return RNG.integers(-64, 64, shape).astype(I8)


def info(name, array):
    return h.make_tensor_value_info(name, h.np_dtype_to_tensor_dtype(array.dtype),
                                    list(array.shape))


def check(node, feeds, consts, out_shape, out_type, opset=21, exact=True):
    """Run one node (inputs in feeds are graph inputs, in consts initializers) on both."""
    graph = h.make_graph([node], "q", [info(n, a) for n, a in feeds.items()],
                         [h.make_tensor_value_info(o, out_type, out_shape)
                          for o in node.output],
                         [nh.from_array(np.asarray(a), n) for n, a in consts.items()])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])
    onnx.checker.check_model(model)
    want = ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, feeds)
    got = ember.compile(model).run(feeds)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        if exact:
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("zero_dtype", [U8, I8])
def test_quantize_linear_per_tensor(zero_dtype):
    x = (RNG.standard_normal((3, 4, 5)) * 4).astype(np.float32)
    x.flat[:4] = [0.25, 0.75, -0.25, 1e6]      # ties round to even; saturates
    check(h.make_node("QuantizeLinear", ["x", "s", "z"], ["y"]), {"x": x},
          {"s": np.array(0.05, np.float32), "z": np.array(3, zero_dtype)}, [3, 4, 5],
          h.np_dtype_to_tensor_dtype(np.dtype(zero_dtype)))


def test_quantize_linear_per_axis():
    x = (RNG.standard_normal((2, 3, 4)) * 4).astype(np.float32)
    check(h.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=1), {"x": x},
          {"s": np.array([0.02, 0.1, 0.05], np.float32), "z": np.array([0, 10, -5], I8)},
          [2, 3, 4], T.INT8)


def test_dequantize_linear_per_tensor_and_per_axis():
    x = RNG.integers(0, 256, (2, 3, 4)).astype(U8)
    check(h.make_node("DequantizeLinear", ["x", "s", "z"], ["y"]), {"x": x},
          {"s": np.array(0.07, np.float32), "z": np.array(128, U8)}, [2, 3, 4], T.FLOAT,
          exact=False)
    x8 = RNG.integers(-128, 128, (2, 3, 4)).astype(I8)
    check(h.make_node("DequantizeLinear", ["x", "s", "z"], ["y"], axis=-1), {"x": x8},
          {"s": np.array([0.1, 0.2, 0.3, 0.4], np.float32),
           "z": np.array([1, -2, 3, 0], I8)}, [2, 3, 4], T.FLOAT, exact=False)


def test_dynamic_quantize_linear():
    x = (RNG.standard_normal((4, 6)) * 3).astype(np.float32)
    node = h.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])
    graph = h.make_graph([node], "q", [info("x", x)],
                         [h.make_tensor_value_info("y", T.UINT8, [4, 6]),
                          h.make_tensor_value_info("s", T.FLOAT, []),
                          h.make_tensor_value_info("z", T.UINT8, [])])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 21)])
    want = ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"x": x})
    got = ember.compile(model).run({"x": x})
    np.testing.assert_allclose(got[1], want[1], rtol=1e-6)
    assert got[2] == want[2]
    assert np.abs(got[0].astype(int) - want[0].astype(int)).max() <= 1   # x / scale ties


def test_matmul_integer_full_range():
    """Full-range u8 x s8 with per-column zero points, against numpy's int32 product."""
    a = RNG.integers(0, 256, (4, 7)).astype(U8)
    b = RNG.integers(-128, 128, (7, 5)).astype(I8)
    bz = np.array([1, -2, 0, 5, 7], I8)
    model = _model(h.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["y"]),
                   {"a": a, "b": b}, {"az": np.array(3, U8), "bz": bz}, T.INT32, [4, 5],
                   opset=13)
    (got,) = ember.compile(model).run({"a": a, "b": b})
    want = (a.astype(np.int32) - 3) @ (b.astype(np.int32) - bz.astype(np.int32))
    np.testing.assert_array_equal(got, want)


def test_matmul_integer_with_column_zero_points():
    a = RNG.integers(0, 256, (4, 7)).astype(U8)
    b = weights_i8((7, 5))
    check(h.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["y"]), {"a": a, "b": b},
          {"az": np.array(3, U8), "bz": np.array([1, -2, 0, 5, 7], I8)},
          [4, 5], T.INT32, opset=13)


def test_qlinear_matmul():
    a = RNG.integers(0, 256, (2, 3, 16)).astype(U8)
    b = RNG.integers(0, 256, (16, 8)).astype(U8)
    node = h.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"])
    check(node, {"a": a, "b": b},
          {"as": np.array(0.02, np.float32), "az": np.array(120, U8),
           "bs": np.array(0.01, np.float32), "bz": np.array(130, U8),
           "ys": np.array(0.03, np.float32), "yz": np.array(125, U8)}, [2, 3, 8], T.UINT8)


@pytest.mark.parametrize("group, pads, out", [(1, [1, 1, 1, 1], [1, 6, 6, 6]),
                                              (2, [0, 1, 2, 0], [1, 6, 6, 5])])
def test_conv_integer(group, pads, out):
    x = RNG.integers(0, 256, (1, 4, 6, 6)).astype(U8)
    w = RNG.integers(0, 256, (6, 4 // group, 3, 3)).astype(U8)
    check(h.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], pads=pads, group=group),
          {"x": x}, {"w": w, "xz": np.array(7, U8), "wz": np.array(128, U8)},
          out, T.INT32, opset=13)


def test_qlinear_conv_per_channel_with_bias():
    x = RNG.integers(0, 256, (1, 3, 7, 7)).astype(U8)
    w = weights_i8((4, 3, 3, 3))
    node = h.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"],
                       ["y"], pads=[1, 1, 1, 1], strides=[2, 2])
    check(node, {"x": x},
          {"w": w, "xs": np.array(0.02, np.float32), "xz": np.array(128, U8),
           "ws": np.array([0.01, 0.02, 0.005, 0.03], np.float32),
           "wz": np.zeros(4, I8), "ys": np.array(0.05, np.float32),
           "yz": np.array(100, U8), "b": RNG.integers(-500, 500, 4).astype(np.int32)},
          [1, 4, 4, 4], T.UINT8)


def test_qdq_conv_block():
    """QuantizeLinear -> DequantizeLinear around a float Conv with DequantizeLinear'd int8
    weights: the QDQ form onnxruntime.quantization.quantize_static writes."""
    x = RNG.standard_normal((1, 3, 8, 8)).astype(np.float32)
    w = weights_i8((4, 3, 3, 3))
    nodes = [h.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             h.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
             h.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], axis=0),
             h.make_node("Conv", ["xd", "wd"], ["c"], pads=[1, 1, 1, 1]),
             h.make_node("Relu", ["c"], ["r"]),
             h.make_node("QuantizeLinear", ["r", "ys", "yz"], ["rq"]),
             h.make_node("DequantizeLinear", ["rq", "ys", "yz"], ["y"])]
    consts = {"w": w, "xs": np.array(0.03, np.float32), "xz": np.array(128, U8),
              "ws": np.array([0.01, 0.02, 0.015, 0.005], np.float32), "wz": np.zeros(4, I8),
              "ys": np.array(0.02, np.float32), "yz": np.array(0, U8)}
    graph = h.make_graph(nodes, "qdq", [info("x", x)],
                         [h.make_tensor_value_info("y", T.FLOAT, [1, 4, 8, 8])],
                         [nh.from_array(a, n) for n, a in consts.items()])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])
    want = ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    (got,) = ember.compile(model).run({"x": x})
    # float Conv sums in another order: a value next to a rounding boundary may move a step
    step = consts["ys"]
    assert np.mean(np.abs(got - want) > step / 2) < 0.01
    np.testing.assert_allclose(got, want, atol=step * 1.01)


def _model(node, inputs, consts, out_type, out_shape, opset=21):
    graph = h.make_graph([node], "q", [info(n, a) for n, a in inputs.items()],
                         [h.make_tensor_value_info("y", out_type, out_shape)],
                         [nh.from_array(np.asarray(a), n) for n, a in consts.items()])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])


def test_blocked_quantize_and_dequantize_match_onnxruntime():
    x = (RNG.standard_normal((4, 5)) * 3).astype(np.float32)
    scale = RNG.uniform(0.02, 0.2, (4, 3)).astype(np.float32)      # blocks of 2, last short
    zero = RNG.integers(0, 20, (4, 3)).astype(U8)
    check(h.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=1, block_size=2),
          {"x": x}, {"s": scale, "z": zero}, [4, 5], T.UINT8)
    q = RNG.integers(0, 255, (4, 5)).astype(U8)
    check(h.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=1, block_size=2),
          {"q": q}, {"s": scale, "z": zero}, [4, 5], T.FLOAT)


@pytest.mark.parametrize("low", [T.INT4, T.UINT4, T.INT2, T.FLOAT8E4M3FN, T.FLOAT8E5M2])
def test_quantize_dequantize_int4_and_float8_match_onnxruntime(low):
    # onnxruntime returns no int4 arrays: compare DequantizeLinear(QuantizeLinear(x))
    x = (RNG.standard_normal((3, 8)) * 4).astype(np.float32)
    x.flat[:4] = [1e6, -1e6, 0.5, 0.75]                # saturation; ties to even
    float8 = low in (T.FLOAT8E4M3FN, T.FLOAT8E5M2)   # onnxruntime: float8 zero points are 0
    zero = h.make_tensor("z", low, [3], [0, 0, 0] if float8 else [1, 0, 1])
    nodes = [h.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=0),
             h.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=0)]
    graph = h.make_graph(nodes, "qdq", [info("x", x)],
                         [h.make_tensor_value_info("y", T.FLOAT, [3, 8])],
                         [nh.from_array(np.array([0.5, 0.25, 1.0], np.float32), "s"), zero])
    opset = 25 if low == T.INT2 else 21
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])
    try:
        session = ort.InferenceSession(model.SerializeToString(),
                                       providers=["CPUExecutionProvider"])
    except Exception as error:  # noqa: BLE001 - this onnxruntime lacks the type
        pytest.skip(f"onnxruntime cannot run it: {error}")
    want = session.run(None, {"x": x})[0]
    np.testing.assert_array_equal(ember.compile(model).run({"x": x})[0], want)


def test_blocked_scale_of_the_wrong_shape_is_rejected():
    x = RNG.standard_normal((4, 4)).astype(np.float32)
    node = h.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=1, block_size=2)
    model = _model(node, {"x": x}, {"s": np.full((4, 3), 0.1, np.float32),
                                    "z": np.zeros((4, 3), U8)}, T.UINT8, [4, 4])
    with pytest.raises(UnsupportedModelError, match=r"QuantizeLinear.*shape \(4, 3\) does not "
                       r"fit x of shape \(4, 4\) with block_size=2"):
        from_onnx(model)
