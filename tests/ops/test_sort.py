"""TopK against onnxruntime: axes, largest/smallest, ties, integer inputs; bad K."""

import numpy as np
import pytest

from ember.errors import ShapeError
from ember.lowering.kernel import run_op
from tests.ops.onnx_ref import check_op

RNG = np.random.default_rng(7)


@pytest.mark.parametrize("shape,axis,k,largest", [
    ((3, 10), -1, 3, 1), ((3, 10), 1, 10, 0), ((6, 4, 5), 0, 2, 1), ((2, 7, 3), 1, 1, 0),
])
def test_topk_float(shape, axis, k, largest):
    x = RNG.standard_normal(shape).astype("float32")
    check_op("TopK", [x], {"axis": axis, "largest": largest},
             const_inputs={1: np.array([k], "int64")}, attr_names={1: "K"}, num_outputs=2)


def test_topk_ties_keep_the_smaller_index_first():
    x = np.array([[1, 3, 3, 2, 3, 0]], "int32")
    values, indices = run_op("TopK", [x], {"K": 4})
    np.testing.assert_array_equal(values, [[3, 3, 3, 2]])
    np.testing.assert_array_equal(indices, [[1, 2, 4, 3]])


def test_topk_int64_against_onnxruntime():
    x = RNG.integers(-5, 5, (4, 9)).astype("int64")
    check_op("TopK", [x], {"axis": 1}, const_inputs={1: np.array([5], "int64")},
             attr_names={1: "K"}, num_outputs=2)


def test_topk_k_larger_than_axis():
    with pytest.raises(ShapeError, match="K=4 exceeds the axis length 3"):
        run_op("TopK", [np.zeros((3, 2), "float32")], {"K": 4, "axis": 0})
