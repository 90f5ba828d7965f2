"""Unique and Compress: outputs sized by input values, on the host or as a Gather of known
indices, checked against numpy and onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

import ember
from ember.errors import ShapeError, UnsupportedOpError
from ember.frontend.onnx_dynamic import compress, unique
from ember.specialize import SpecializedModel

ort = pytest.importorskip("onnxruntime")


def model_of(nodes, inputs, outputs, initializers=(), opset=17):
    graph = h.make_graph(nodes, "g", inputs, outputs, list(initializers))
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])
    onnx.checker.check_model(model)
    return model


def assert_matches_ort(model, feeds, compiled):
    got = compiled.run(feeds)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = session.run(None, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


def test_unique_sorted_matches_numpy() -> None:
    rng = np.random.default_rng(3)
    x = rng.integers(0, 6, (4, 5)).astype(np.float32)
    y, first, inverse, counts = unique({"sorted": 1}, [x])
    ny, nfirst, ninverse, ncounts = np.unique(x, return_index=True, return_inverse=True,
                                              return_counts=True)
    np.testing.assert_array_equal(y, ny)
    np.testing.assert_array_equal(first, nfirst)
    np.testing.assert_array_equal(inverse, ninverse.reshape(-1))
    np.testing.assert_array_equal(counts, ncounts)
    assert first.dtype == inverse.dtype == counts.dtype == np.int64


def test_unique_unsorted_keeps_first_occurrence_order() -> None:
    x = np.array([2, 1, 1, 3, 4, 3, 2], np.int32)
    y, first, inverse, counts = unique({"sorted": 0}, [x])
    np.testing.assert_array_equal(y, [2, 1, 3, 4])
    np.testing.assert_array_equal(first, [0, 1, 3, 4])
    np.testing.assert_array_equal(inverse, [0, 1, 1, 2, 3, 2, 0])
    np.testing.assert_array_equal(counts, [2, 2, 2, 1])
    np.testing.assert_array_equal(y[inverse], x)  # the inverse rebuilds the input


@pytest.mark.parametrize("axis,is_sorted", [(0, 1), (1, 0), (-1, 1)])
def test_unique_along_an_axis_at_run_time(axis: int, is_sorted: int) -> None:
    rng = np.random.default_rng(4 + axis)
    model = model_of(
        [h.make_node("Unique", ["x"], ["y", "first", "inverse", "counts"], axis=axis,
                     sorted=is_sorted),
         h.make_node("Neg", ["y"], ["z"])],
        [h.make_tensor_value_info("x", T.FLOAT, [4, 4])],
        [h.make_tensor_value_info("z", T.FLOAT, ["a", "b"]),
         h.make_tensor_value_info("first", T.INT64, ["n"]),
         h.make_tensor_value_info("inverse", T.INT64, [4]),
         h.make_tensor_value_info("counts", T.INT64, ["n"])])
    compiled = ember.compile(model)
    for _ in range(2):  # slices repeat, so some are not unique
        x = rng.integers(0, 2, (4, 4)).astype(np.float32)
        assert_matches_ort(model, {"x": x}, compiled)


def test_compress_at_run_time_and_with_a_constant_condition() -> None:
    rng = np.random.default_rng(5)
    inputs = [h.make_tensor_value_info("x", T.FLOAT, [3, 4])]
    run_time = model_of([h.make_node("Compress", ["x", "c"], ["y"], axis=1)],
                        inputs + [h.make_tensor_value_info("c", T.BOOL, [4])],
                        [h.make_tensor_value_info("y", T.FLOAT, [3, "n"])])
    compiled = ember.compile(run_time)
    for _ in range(2):
        feeds = {"x": rng.standard_normal((3, 4)).astype(np.float32),
                 "c": rng.random(4) < 0.5}
        assert_matches_ort(run_time, feeds, compiled)
    # a constant condition (shorter than the flattened input) is a Gather: no host step
    cond = nh.from_array(np.array([True, False, True, True, False]), "c")
    fixed = model_of([h.make_node("Compress", ["x", "c"], ["y"])], inputs,
                     [h.make_tensor_value_info("y", T.FLOAT, [3])], [cond])
    compiled = ember.compile(fixed)
    assert not isinstance(compiled, SpecializedModel)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    np.testing.assert_array_equal(compiled.run({"x": x})[0], x.reshape(-1)[[0, 2, 3]])


def test_bad_attributes_and_shapes() -> None:
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(ShapeError, match=r"Unique: axis 2 is out of range for rank 2"):
        unique({"axis": 2}, [x])
    with pytest.raises(UnsupportedOpError, match=r"Unique: sorted must be 0 or 1, got 3"):
        unique({"sorted": 3}, [x])
    with pytest.raises(ShapeError, match=r"Compress: condition has 4 elements, more than the "
                                         r"3 along the axis"):
        compress({"axis": 1}, [x, np.ones(4, bool)])
    with pytest.raises(ShapeError, match=r"Compress: condition must be 1-D"):
        compress({}, [x, np.ones((2, 3), bool)])
    with pytest.raises(ShapeError, match=r"Compress: axis -3 is out of range"):
        compress({"axis": -3}, [x, np.ones(2, bool)])
