"""Col2Im against onnxruntime over strides, pads, dilations and 1-3 spatial axes."""

import math

import numpy as np
import pytest

from ember.errors import ShapeError
from ember.graph.ir import GraphBuilder
from tests.ops.onnx_ref import check_op

RNG = np.random.default_rng(8)


def positions(image, block, dil, strides, pads):
    r = len(image)
    return [(image[d] + pads[d] + pads[d + r] - dil[d] * (block[d] - 1) - 1) // strides[d] + 1
            for d in range(r)]


@pytest.mark.parametrize("image, block, attrs", [
    ((5, 5), (2, 2), {}),
    ((6, 7), (3, 2), {"strides": [2, 3]}),
    ((5, 6), (2, 3), {"pads": [1, 0, 2, 1]}),
    ((9, 8), (2, 2), {"dilations": [3, 2], "strides": [1, 2], "pads": [0, 1, 1, 0]}),
    ((7,), (3,), {"strides": [2], "pads": [1, 1]}),
    ((4, 5, 3), (2, 2, 2), {"strides": [1, 2, 1]}),
])
def test_col2im_matches_onnxruntime(image, block, attrs):
    r = len(image)
    L = positions(image, block, attrs.get("dilations", [1] * r), attrs.get("strides", [1] * r),
                  attrs.get("pads", [0] * 2 * r))
    x = RNG.standard_normal((2, 3 * math.prod(block), math.prod(L))).astype("float32")
    check_op("Col2Im", [x], attrs, opset=18,
             const_inputs={1: np.array(image, "int64"), 2: np.array(block, "int64")},
             attr_names={1: "image_shape", 2: "block_shape"})


def test_col2im_errors():
    b = GraphBuilder("bad")
    x = b.input("x", (1, 8, 16), "float32")
    with pytest.raises(ShapeError, match="multiple of prod"):
        b.add("Col2Im", [x], {"image_shape": (5, 5), "block_shape": (3, 1)})
    with pytest.raises(ShapeError, match="number of block positions"):
        b.add("Col2Im", [x], {"image_shape": (6, 6), "block_shape": (2, 2)})
