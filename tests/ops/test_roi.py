"""RoiAlign against onnxruntime over its modes, coordinate transforms and sampling ratios."""

import numpy as np
import pytest

from ember.errors import ShapeError, UnsupportedOpError
from ember.graph.ir import GraphBuilder
from tests.ops.onnx_ref import check_op

RNG = np.random.default_rng(3)
X = RNG.standard_normal((2, 3, 10, 12)).astype("float32")
# inside, fractional, past the edges, smaller than a pixel, zero width
ROIS = np.array([[0, 0, 9, 9], [1.5, 2.2, 7.3, 6.1], [-2, -1, 14, 12], [3, 3, 3.2, 3.4],
                 [5, 2, 5, 8]], "float32")
BATCH = np.array([0, 1, 1, 0, 1], "int64")


@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("transform", ["half_pixel", "output_half_pixel"])
@pytest.mark.parametrize("ratio, scale", [(0, 1.0), (2, 0.5), (3, 1.0)])
def test_roi_align_matches_onnxruntime(mode, transform, ratio, scale):
    attrs = {"mode": mode, "coordinate_transformation_mode": transform,
             "sampling_ratio": ratio, "spatial_scale": scale, "output_height": 3,
             "output_width": 4}
    check_op("RoiAlign", [X, ROIS, BATCH], attrs, opset=16, rtol=1e-5, atol=1e-5)


def test_roi_align_float64_and_defaults():
    x = RNG.standard_normal((1, 2, 6, 5))
    rois = np.array([[0.5, 1, 4, 5], [1, 0, 3, 2]], "float64")
    check_op("RoiAlign", [x, rois, np.zeros(2, "int64")], {}, opset=16, rtol=1e-9, atol=1e-9)


def test_roi_align_errors():
    b = GraphBuilder("bad")
    x = b.input("x", (1, 2, 6, 6), "float32")
    idx = b.input("i", (3,), "int64")
    with pytest.raises(ShapeError, match=r"rois must have shape \(num_rois, 4\)"):
        b.add("RoiAlign", [x, b.input("r", (3, 5), "float32"), idx], {})
    rois = b.input("r4", (3, 4), "float32")
    with pytest.raises(ShapeError, match="batch_indices of shape"):
        b.add("RoiAlign", [x, rois, b.input("i2", (2,), "int64")], {})
    with pytest.raises(UnsupportedOpError, match="mode='median'"):
        b.add("RoiAlign", [x, rois, idx], {"mode": "median"})
    with pytest.raises(ShapeError, match="output_height and output_width"):
        b.add("RoiAlign", [x, rois, idx], {"output_height": 0})
