"""Det against onnxruntime: batches, 1 x 1 to 6 x 6, singular and permuted matrices."""

import numpy as np
import pytest

from ember.errors import ShapeError
from ember.graph.ir import GraphBuilder
from tests.ops.onnx_ref import check_op, ember_run

RNG = np.random.default_rng(4)


@pytest.mark.parametrize("shape, dtype", [
    ((3, 3), "float32"), ((2, 4, 4), "float32"), ((2, 3, 1, 1), "float32"),
    ((6, 6), "float32"),
])
def test_det_matches_onnxruntime(shape, dtype):
    x = RNG.standard_normal(shape).astype(dtype)
    check_op("Det", [x], {}, opset=22, rtol=1e-4, atol=1e-5)


def test_det_float64_matches_numpy():
    """onnxruntime has no float64 Det; numpy's LU gives the reference."""
    x = RNG.standard_normal((3, 2, 5, 5))
    (got,) = ember_run("Det", [x], {})
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, np.linalg.det(x), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("matrix", [
    [[1, 2, 3], [2, 4, 6], [0, 1, 1]],          # singular: a zero pivot
    [[0, 1, 0], [1, 0, 0], [0, 0, 2]],          # needs a row swap
    [[0, 0, 0], [0, 0, 0], [0, 0, 0]],
])
def test_det_special_matrices(matrix):
    check_op("Det", [np.array(matrix, "float32")], {}, opset=22, rtol=1e-5, atol=1e-6)


def test_det_errors():
    b = GraphBuilder("bad")
    with pytest.raises(ShapeError, match=r"must be \[\.\.\., n, n\]"):
        b.add("Det", [b.input("x", (2, 3, 4), "float32")], {})
    with pytest.raises(ShapeError, match="float input"):
        b.add("Det", [b.input("i", (2, 2), "int32")], {})
