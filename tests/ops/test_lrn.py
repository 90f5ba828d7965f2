"""LRN (AlexNet, Inception v1, ZFNet) against onnxruntime over its attribute variants."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import ember
from ember.errors import ShapeError
from ember.graph.ir import GraphBuilder

ort = pytest.importorskip("onnxruntime")


@pytest.mark.parametrize("shape, attrs", [
    ((2, 5, 4, 4), {"size": 3}),
    ((1, 6, 3, 5), {"size": 5, "alpha": 2e-2, "beta": 0.5, "bias": 2.0}),
    ((1, 4, 3, 3), {"size": 2, "alpha": 1e-1}),               # even window: more after c
    ((1, 3, 7), {"size": 1, "beta": 1.0}),                    # 1-D spatial, window of 1
    ((1, 3, 2, 2, 2), {"size": 4, "alpha": 0.5}),             # window wider than C
])
def test_lrn_matches_onnxruntime(shape, attrs):
    node = h.make_node("LRN", ["x"], ["y"], **attrs)
    graph = h.make_graph([node], "lrn", [h.make_tensor_value_info("x", T.FLOAT, shape)],
                         [h.make_tensor_value_info("y", T.FLOAT, shape)])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    x = np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32) * 3
    (got,) = ember.compile(model).run({"x": x})
    np.testing.assert_allclose(got, lrn_reference(x, **attrs), rtol=1e-5, atol=1e-6)
    if attrs["size"] % 2 and x.ndim == 4:        # onnxruntime: odd windows, 4-D inputs only
        (want,) = ort.InferenceSession(model.SerializeToString(),
                                       providers=["CPUExecutionProvider"]).run(None, {"x": x})
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def lrn_reference(x, size, alpha=1e-4, beta=0.75, bias=1.0):
    """ONNX's definition, in float64: the window is c - floor((size-1)/2) .. c +
    ceil((size-1)/2), clipped to the channels."""
    x64 = x.astype(np.float64)
    channels = x.shape[1]
    sq = np.zeros_like(x64)
    for c in range(channels):
        lo, hi = max(0, c - (size - 1) // 2), min(channels - 1, c + -(-(size - 1) // 2))
        sq[:, c] = (x64[:, lo:hi + 1] ** 2).sum(axis=1)
    return (x64 / (bias + alpha / size * sq) ** beta).astype(x.dtype)


def test_lrn_bad_input():
    b = GraphBuilder("bad")
    x = b.input("x", (4, 5), "float32")
    with pytest.raises(ShapeError, match=r"LRN: input must be \(N, C, D1, ...\), got shape "
                                         r"\(4, 5\)"):
        b.add("LRN", [x], {"size": 3})
    y = b.input("y", (1, 4, 2, 2), "float32")
    with pytest.raises(ShapeError, match="LRN: size must be a positive integer, got 0"):
        b.add("LRN", [y], {"size": 0})
