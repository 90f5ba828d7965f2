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


def test_max_unpool_after_max_pool() -> None:
    """MaxPool's indices at run time, then MaxUnpool: against onnxruntime at the default
    shape; a larger output_shape pads that result at the end of each spatial axis (ONNX's
    definition; onnxruntime reads the indices in the larger shape instead)."""
    rng = np.random.default_rng(6)
    results = []
    x = rng.standard_normal((2, 3, 6, 8)).astype(np.float32)
    for output_shape in (None, [2, 3, 7, 9]):
        inputs = ["pooled", "where"] + (["shape"] if output_shape else [])
        inits = [nh.from_array(np.array(output_shape, np.int64), "shape")] if output_shape \
            else []
        model = model_of(
            [h.make_node("MaxPool", ["x"], ["pooled", "where"], kernel_shape=[2, 2],
                         strides=[2, 2]),
             h.make_node("MaxUnpool", inputs, ["y"], kernel_shape=[2, 2], strides=[2, 2])],
            [h.make_tensor_value_info("x", T.FLOAT, [2, 3, 6, 8])],
            [h.make_tensor_value_info("y", T.FLOAT, output_shape or [2, 3, 6, 8])], inits,
            opset=11)
        compiled = ember.compile(model)
        if output_shape is None:
            assert_matches_ort(model, {"x": x}, compiled)
        results.append(compiled.run({"x": x})[0])
    default, padded = results
    # each 2x2 window keeps only its maximum, in place
    windows = x.reshape(2, 3, 3, 2, 4, 2).max(axis=(3, 5))
    kept = x == np.repeat(np.repeat(windows, 2, 2), 2, 3)
    np.testing.assert_array_equal(default, np.where(kept, x, 0))
    np.testing.assert_array_equal(padded, np.pad(default, [(0, 0), (0, 0), (0, 1), (0, 1)]))


def test_max_unpool_errors() -> None:
    from ember.frontend.onnx import from_onnx
    from ember.frontend.onnx_compose import unpooled_shape

    with pytest.raises(ShapeError, match=r"MaxUnpool: kernel_shape \(2,\) must give one size "
                                         r"per spatial axis"):
        unpooled_shape({"kernel_shape": [2]}, (1, 1, 4, 4))
    with pytest.raises(ShapeError, match=r"strides \(2,\) and pads .* must have 2 and 4"):
        unpooled_shape({"kernel_shape": [2, 2], "strides": [2]}, (1, 1, 4, 4))
    with pytest.raises(ShapeError, match=r"must be >= 1 and pads >= 0"):
        unpooled_shape({"kernel_shape": [2, 0]}, (1, 1, 4, 4))
    small = nh.from_array(np.array([1, 1, 3, 3], np.int64), "shape")
    model = model_of([h.make_node("MaxUnpool", ["x", "i", "shape"], ["y"], kernel_shape=[2, 2],
                                  strides=[2, 2])],
                     [h.make_tensor_value_info("x", T.FLOAT, [1, 1, 2, 2]),
                      h.make_tensor_value_info("i", T.INT64, [1, 1, 2, 2])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, 1, 3, 3])], [small])
    with pytest.raises(ShapeError, match=r"node 'maxunpool_0' \(MaxUnpool\): output_shape "
                                         r"\(1, 1, 3, 3\) must keep N and C and be at least"):
        from_onnx(model)


@pytest.mark.parametrize("bins,length,rate,low,high", [(8, 16, 8192, 0, 4096),
                                                        (5, 64, 16000, 100, 7000)])
def test_mel_weight_matrix_matches_onnxruntime(bins, length, rate, low, high) -> None:
    from ember.frontend.onnx_dynamic import mel_weight_matrix

    arrays = [np.array(bins, np.int64), np.array(length, np.int64), np.array(rate, np.int64),
              np.array(low, np.float32), np.array(high, np.float32)]
    names = ["bins", "length", "rate", "low", "high"]
    model = model_of([h.make_node("MelWeightMatrix", names, ["w"])], [],
                     [h.make_tensor_value_info("w", T.FLOAT, [length // 2 + 1, bins])],
                     [nh.from_array(a, n) for a, n in zip(arrays, names)])
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (want,) = session.run(None, {})
    (got,) = mel_weight_matrix({}, arrays)
    assert got.shape == want.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    assert (got >= 0).all() and (got <= 1).all()  # triangles between 0 and 1


def test_mel_weight_matrix_errors() -> None:
    from ember.frontend.onnx_dynamic import mel_weight_matrix

    def args(*values):
        return [np.array(v) for v in values]

    with pytest.raises(ShapeError, match=r"needs num_mel_bins >= 1.*got 0, 16"):
        mel_weight_matrix({}, args(0, 16, 8000, 0.0, 4000.0))
    with pytest.raises(ShapeError, match=r"upper_edge_hertz 8000.0 lies past the DFT's "
                                         r"highest bin"):
        mel_weight_matrix({}, args(4, 16, 8000, 0.0, 8000.0))
    with pytest.raises(ShapeError, match=r"num_mel_bins must be a scalar"):
        mel_weight_matrix({}, [np.array([2, 3])] + args(16, 8000, 0.0, 4000.0))
    with pytest.raises(UnsupportedOpError, match=r"ONNX data type 8"):
        mel_weight_matrix({"output_datatype": 8}, args(4, 16, 8000, 0.0, 4000.0))
