"""GridSample against onnxruntime over its modes, padding rules and corner alignments."""

import numpy as np
import pytest

from ember.errors import ShapeError, UnsupportedOpError
from ember.graph.ir import GraphBuilder
from tests.ops.onnx_ref import check_op

rng = np.random.default_rng(21)


def _grid(*shape: int) -> np.ndarray:
    # beyond [-1, 1] on purpose: the padding rule decides those points
    return rng.uniform(-1.6, 1.6, shape).astype("float32")


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [0, 1])
def test_grid_sample_2d(mode: str, padding: str, align: int) -> None:
    x = rng.standard_normal((2, 3, 5, 6)).astype("float32")
    check_op("GridSample", [x, _grid(2, 4, 7, 2)],
             {"mode": mode, "padding_mode": padding, "align_corners": align}, opset=20,
             rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
def test_grid_sample_3d(mode: str, padding: str) -> None:
    x = rng.standard_normal((1, 2, 3, 4, 5)).astype("float32")
    check_op("GridSample", [x, _grid(1, 2, 3, 4, 3)],
             {"mode": mode, "padding_mode": padding, "align_corners": 0}, opset=20,
             rtol=2e-5, atol=2e-5)


def test_grid_sample_opset16_mode_names() -> None:
    x = rng.standard_normal((1, 2, 4, 4)).astype("float32")
    for mode in ("bilinear", "bicubic"):
        check_op("GridSample", [x, _grid(1, 3, 3, 2)], {"mode": mode}, opset=16, rtol=2e-5,
                 atol=2e-5)


def test_grid_sample_errors() -> None:
    b = GraphBuilder("g")
    x = b.input("x", (1, 2, 4, 4), "float32")
    grid = b.input("grid", (1, 3, 3, 2), "float32")
    with pytest.raises(UnsupportedOpError, match=r"GridSample: mode='area' is not supported"):
        b.add("GridSample", [x, grid], {"mode": "area"})
    with pytest.raises(UnsupportedOpError, match=r"padding_mode='wrap' is not supported"):
        b.add("GridSample", [x, grid], {"padding_mode": "wrap"})
    with pytest.raises(UnsupportedOpError, match=r"align_corners must be 0 or 1, got 2"):
        b.add("GridSample", [x, grid], {"align_corners": 2})
    with pytest.raises(ShapeError, match=r"Grid of shape \(1, 3, 3, 3\) must be \(N=1, O1, O2, "
                                         r"2\)"):
        b.add("GridSample", [x, b.input("g3", (1, 3, 3, 3), "float32")])
    volume = b.input("v", (1, 2, 3, 4, 4), "float32")
    with pytest.raises(UnsupportedOpError, match=r"cubic mode needs 2 spatial dims"):
        b.add("GridSample", [volume, b.input("g5", (1, 2, 2, 2, 3), "float32")],
              {"mode": "cubic"})
    with pytest.raises(ShapeError, match=r"X and Grid must be floats"):
        b.add("GridSample", [b.input("i", (1, 2, 4, 4), "int32"), grid])
