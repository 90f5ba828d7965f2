"""DeformConv against onnxruntime over pads, strides, dilations, groups, masks and biases."""

import numpy as np
import pytest

from ember.errors import ShapeError, UnsupportedOpError
from ember.graph.ir import GraphBuilder
from tests.ops.onnx_ref import check_op

RNG = np.random.default_rng(21)


def out_size(size, k, s, d, p0, p1):
    return (size + p0 + p1 - d * (k - 1) - 1) // s + 1


@pytest.mark.parametrize("c, m, k, attrs, with_bias, with_mask", [
    (2, 3, (2, 2), {}, False, False),
    (2, 3, (3, 3), {"pads": [1, 1, 1, 1]}, True, False),
    (4, 4, (3, 2), {"strides": [2, 1], "dilations": [1, 2], "pads": [1, 0, 0, 1],
                    "offset_group": 2}, False, True),
    (4, 6, (2, 2), {"group": 2, "offset_group": 4}, True, True),
])
def test_deform_conv_matches_onnxruntime(c, m, k, attrs, with_bias, with_mask):
    n, h, w = 2, 7, 6
    s, d = attrs.get("strides", [1, 1]), attrs.get("dilations", [1, 1])
    pads = attrs.get("pads", [0, 0, 0, 0])
    oh = out_size(h, k[0], s[0], d[0], pads[0], pads[2])
    ow = out_size(w, k[1], s[1], d[1], pads[1], pads[3])
    og, g = attrs.get("offset_group", 1), attrs.get("group", 1)
    taps = k[0] * k[1]
    inputs = [RNG.standard_normal((n, c, h, w)).astype("float32"),
              RNG.standard_normal((m, c // g, *k)).astype("float32"),
              (RNG.standard_normal((n, og * 2 * taps, oh, ow)) * 1.5).astype("float32"),
              RNG.standard_normal(m).astype("float32") if with_bias else None,
              RNG.random((n, og * taps, oh, ow)).astype("float32") if with_mask else None]
    while inputs[-1] is None:
        inputs.pop()
    check_op("DeformConv", inputs, {"kernel_shape": list(k), **attrs}, opset=19, rtol=1e-4,
             atol=1e-5)


def test_deform_conv_errors():
    b = GraphBuilder("bad")
    x = b.input("x", (1, 4, 6, 6), "float32")
    w = b.input("w", (2, 4, 2, 2), "float32")
    with pytest.raises(ShapeError, match="offset has shape"):
        b.add("DeformConv", [x, w, b.input("o", (1, 4, 5, 5), "float32")], {})
    with pytest.raises(ShapeError, match="offset_group 3 must divide"):
        b.add("DeformConv", [x, w, b.input("o2", (1, 24, 5, 5), "float32")],
              {"offset_group": 3})
    x3 = b.input("x3", (1, 4, 6), "float32")
    with pytest.raises(UnsupportedOpError, match="only 2 spatial dims"):
        b.add("DeformConv", [x3, b.input("w3", (2, 4, 2), "float32"),
                             b.input("o3", (1, 4, 5), "float32")], {})
