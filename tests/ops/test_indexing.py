"""ReverseSequence against numpy over both axis orders, dtypes and out-of-range lengths."""

import numpy as np
import pytest

from ember.errors import ShapeError
from ember.graph.ir import GraphBuilder
from tests.ops.onnx_ref import ember_run

rng = np.random.default_rng(41)


def _reference(x: np.ndarray, lens: np.ndarray, batch: int, time: int) -> np.ndarray:
    out = x.copy()
    for b, n in enumerate(lens):
        n = int(np.clip(n, 0, x.shape[time]))
        index = [slice(None)] * x.ndim
        index[batch], index[time] = b, slice(0, n)
        out[tuple(index)] = np.flip(x[tuple(index)], axis=time - (time > batch))
    return out


@pytest.mark.parametrize("batch,time", [(1, 0), (0, 1)])
@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_reverse_sequence_matches_numpy(batch: int, time: int, dtype: str) -> None:
    shape = [0, 0, 3]
    shape[batch], shape[time] = 4, 6
    x = (rng.standard_normal(shape) * 10).astype(dtype)
    lens = np.array([6, 1, 0, 4], np.int64)
    (got,) = ember_run("ReverseSequence", [x, lens], {"batch_axis": batch, "time_axis": time})
    np.testing.assert_array_equal(got, _reference(x, lens, batch, time))


def test_lengths_out_of_range_are_clamped() -> None:
    x = rng.standard_normal((5, 2)).astype("float32")
    lens = np.array([9, -3], np.int64)
    (got,) = ember_run("ReverseSequence", [x, lens], {"batch_axis": 1, "time_axis": 0})
    np.testing.assert_array_equal(got[:, 0], x[::-1, 0])
    np.testing.assert_array_equal(got[:, 1], x[:, 1])


def test_reverse_sequence_errors() -> None:
    b = GraphBuilder("g")
    x = b.input("x", (5, 2, 3), "float32")
    lens = b.input("lens", (2,), "int64")
    with pytest.raises(ShapeError, match=r"batch_axis and time_axis must be 0 and 1"):
        b.add("ReverseSequence", [x, lens], {"batch_axis": 2, "time_axis": 0})
    with pytest.raises(ShapeError, match=r"sequence_lens must be int64, got int32"):
        b.add("ReverseSequence", [x, b.input("l32", (2,), "int32")])
    with pytest.raises(ShapeError, match=r"sequence_lens of shape \(3,\) must be \(2,\)"):
        b.add("ReverseSequence", [x, b.input("l3", (3,), "int64")])


@pytest.mark.parametrize("mode, axis, past, update, starts", [
    ("linear", -2, (3, 2, 6, 4), (3, 2, 3, 4), [0, 2, 3]),
    ("circular", -2, (3, 2, 6, 4), (3, 2, 3, 4), [4, 5, 1]),
    ("linear", 1, (2, 7, 3), (2, 2, 3), [5, 0]),
    ("circular", 2, (2, 3, 5, 2), (2, 3, 5, 2), [3, 1]),
    ("linear", -2, (2, 5, 3), (2, 1, 3), None),
])
def test_tensor_scatter_matches_onnxruntime(mode, axis, past, update, starts):
    from tests.ops.onnx_ref import check_op

    rng = np.random.default_rng(len(past) + sum(update))
    inputs = [rng.standard_normal(past).astype("float32"),
              rng.standard_normal(update).astype("float32")]
    if starts is not None:
        inputs.append(np.array(starts, "int64"))
    check_op("TensorScatter", inputs, {"mode": mode, "axis": axis}, opset=24)


def test_tensor_scatter_errors():
    from ember.graph.ir import GraphBuilder

    b = GraphBuilder("bad")
    past = b.input("p", (2, 4, 3), "float32")
    with pytest.raises(ShapeError, match="not the batch axis"):
        b.add("TensorScatter", [past, b.input("u", (2, 1, 3), "float32")], {"axis": 0})
    with pytest.raises(ShapeError, match="may not be longer"):
        b.add("TensorScatter", [past, b.input("u2", (2, 5, 3), "float32")], {"axis": 1})
