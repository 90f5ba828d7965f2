"""Shape and data-movement ops against onnxruntime: reshape, slice, gather, scatter, pad, ..."""

from __future__ import annotations

import numpy as np
import pytest

from ember.errors import ShapeError, UnsupportedOpError
from ember.graph.ir import Node, Value, tensor_type
from ember.lowering.kernel import build_group, run_op
from ember.ops.registry import get_op
from tests.ops.onnx_ref import check_op, onnx_run

rng = np.random.default_rng(7)


def rand(*shape: int, dtype: str = "float32") -> np.ndarray:
    if dtype == "float32":
        return rng.standard_normal(shape).astype("float32")
    return rng.integers(-50, 50, shape).astype(dtype)


def i64(*values: int) -> np.ndarray:
    return np.array(values, dtype="int64")


@pytest.mark.parametrize("shape, allowzero", [
    ((2, 0, 4), 0), ((4, -1), 0), ((-1,), 0), ((3, 2, 2, 2), 0), ((6, 4), 1),
])
def test_reshape(shape, allowzero):
    x = rand(2, 3, 4, dtype="int64" if allowzero else "float32")
    check_op("Reshape", [x], {"allowzero": allowzero}, const_inputs={1: i64(*shape)},
             attr_names={1: "shape"})


@pytest.mark.parametrize("shape, match", [
    ((5, -1), "cannot infer the -1"), ((5, 5), "cannot reshape"), ((-1, -1), "more than one"),
    ((0, 0, 0, 0), "copies dimension 3"),
])
def test_reshape_errors(shape, match):
    with pytest.raises(ShapeError, match=match):
        run_op("Reshape", [rand(2, 3, 4)], {"shape": shape})


@pytest.mark.parametrize("axis", [0, 1, 2, -1, 3])
def test_flatten(axis):
    check_op("Flatten", [rand(2, 3, 4)], {"axis": axis})


def test_squeeze_unsqueeze():
    x = rand(1, 3, 1, 4)
    check_op("Squeeze", [x], const_inputs={1: i64(0, -2)}, attr_names={1: "axes"})
    check_op("Squeeze", [x])
    check_op("Unsqueeze", [rand(3, 4, dtype="int64")], const_inputs={1: i64(-1, 0, 2)},
             attr_names={1: "axes"})
    with pytest.raises(ShapeError, match="has size 3, not 1"):
        run_op("Squeeze", [x], {"axes": (1,)})
    with pytest.raises(ShapeError, match="out of range"):
        run_op("Unsqueeze", [x], {"axes": (7,)})


@pytest.mark.parametrize("perm", [None, (0, 2, 1, 3), (3, 1, 0, 2)])
def test_transpose(perm):
    attrs = {} if perm is None else {"perm": perm}
    check_op("Transpose", [rand(2, 3, 4, 5)], attrs)


def test_transpose_bad_perm():
    with pytest.raises(ShapeError, match="not a permutation of 0..2"):
        run_op("Transpose", [rand(2, 3, 4)], {"perm": (0, 0, 1)})


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concat(axis):
    # outer axis with 2 inputs: clamped reads + select; many or innermost: guarded reads
    xs = {-1: [rand(2, 3, 4), rand(2, 3, 1), rand(2, 3, 0), rand(2, 3, 5)],
          1: [rand(2, 1, 4), rand(2, 3, 4)],
          0: [rand(k % 3 + 1, 3, 4, dtype="int64") for k in range(6)]}[axis]
    check_op("Concat", xs, {"axis": axis})


def test_concat_errors():
    with pytest.raises(ShapeError, match="input 1 has shape"):
        run_op("Concat", [rand(2, 3), rand(3, 3)], {"axis": 1})
    with pytest.raises(ShapeError, match="axis 2 is out of range"):
        run_op("Concat", [rand(2, 3), rand(2, 3)], {"axis": 2})


def test_split():
    x = rand(7, 4)
    check_op("Split", [x], {"axis": 0}, const_inputs={1: i64(2, 4, 1)},
             attr_names={1: "split"}, num_outputs=3)
    check_op("Split", [x], {"axis": -2, "num_outputs": 3}, num_outputs=3, opset=18)
    check_op("Split", [x], {"axis": 1}, num_outputs=2, opset=13,
             ember_attrs={"num_outputs": 2})
    with pytest.raises(ShapeError, match="do not add up"):
        run_op("Split", [x], {"split": (3, 3)})


@pytest.mark.parametrize("starts, ends, axes, steps", [
    ((1, 0), (3, 10), None, None),
    ((-1, 2), (-10**9, 0), (0, -1), (-1, -1)),
    ((0,), (2**62,), (2,), (2,)),
    ((5, -2), (0, -100), (1, 2), (-2, -3)),
    ((10,), (20,), (1,), (1,)),
])
def test_slice(starts, ends, axes, steps):
    consts = {1: i64(*starts), 2: i64(*ends), 3: None if axes is None else i64(*axes),
              4: None if steps is None else i64(*steps)}
    check_op("Slice", [rand(4, 6, 5)], const_inputs=consts,
             attr_names={1: "starts", 2: "ends", 3: "axes", 4: "steps"})


def test_slice_errors():
    with pytest.raises(ShapeError, match="step for axis 0 is 0"):
        run_op("Slice", [rand(4)], {"starts": (0,), "ends": (2,), "steps": (0,)})
    with pytest.raises(ShapeError, match="out of range"):
        run_op("Slice", [rand(4)], {"starts": (0,), "ends": (2,), "axes": (1,)})


@pytest.mark.parametrize("axis, dtype", [(0, "float32"), (1, "int64"), (-1, "float32")])
def test_gather(axis, dtype):
    x = rand(4, 5, 6, dtype=dtype)
    dim = x.shape[axis]
    idx = rng.integers(-dim, dim, (2, 3)).astype("int64" if axis else "int32")
    check_op("Gather", [x, idx], {"axis": axis})
    scalar_index = np.array(-2, "int64")
    (ref,) = onnx_run("Gather", [x, scalar_index], {"axis": axis})
    np.testing.assert_array_equal(run_with_scalars("Gather", [x, scalar_index], {"axis": axis}),
                                  ref)


def run_with_scalars(op: str, arrays: list[np.ndarray], attrs: dict) -> np.ndarray:
    """Like run_op for one output, keeping 0-d inputs 0-d (run_op makes them 1-d)."""
    opdef = get_op(op)
    full = opdef.complete_attrs(attrs)
    values = [Value(f"x{i}", tensor_type(a.shape, a.dtype)) for i, a in enumerate(arrays)]
    (out_type,) = opdef.infer(full, [v.type for v in values])
    out = Value("y", out_type)
    module = build_group(op.lower(), [Node(op, "n", tuple(values), (out,), full)], values, [out])
    result = np.zeros(out_type.shape, out_type.dtype.numpy)
    module(*arrays, result)
    return result


def test_gather_elements_and_nd():
    x = rand(3, 4, 5)
    idx = rng.integers(-4, 4, (3, 2, 5)).astype("int64")
    check_op("GatherElements", [x, idx], {"axis": 1})
    check_op("GatherElements", [x, rng.integers(-5, 5, (2, 4, 3)).astype("int32")],
             {"axis": -1})
    nd = np.stack([rng.integers(-3, 3, (2, 2)), rng.integers(0, 4, (2, 2))], -1).astype("int64")
    check_op("GatherND", [x, nd])
    nd_b = rng.integers(0, 4, (3, 2, 1)).astype("int64")
    check_op("GatherND", [x, nd_b], {"batch_dims": 1})
    with pytest.raises(ShapeError, match="last dim of indices"):
        run_op("GatherND", [x, np.zeros((2, 4), "int64")])


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_elements(reduction):
    x = rand(4, 5)
    idx = rng.integers(-4, 4, (3, 5)).astype("int64")
    if reduction == "none":  # duplicates make the result order dependent
        idx = np.array([[0, 1, 2, 3, -4], [1, 2, 3, 0, 2], [2, 3, 0, 1, 1]], "int64")
    upd = rand(3, 5)
    check_op("ScatterElements", [x, idx, upd], {"axis": 0, "reduction": reduction}, opset=18)
    check_op("ScatterElements",
             [rand(5, 4, dtype="int64"), idx.T.copy(), rand(5, 3, dtype="int64")],
             {"axis": -1, "reduction": reduction}, opset=18)


def test_scatter_nd_and_errors():
    x = rand(4, 3, 2)
    idx = i64(2, 0, -1).reshape(3, 1)
    check_op("ScatterND", [x, idx, rand(3, 3, 2)], opset=18)
    check_op("ScatterND", [x, idx, rand(3, 3, 2)], {"reduction": "add"}, opset=18)
    check_op("ScatterND", [x, i64(1, 2, 3, 0).reshape(2, 2), rand(2, 2)],
             {"reduction": "mul"}, opset=18)
    with pytest.raises(UnsupportedOpError, match="reduction 'sub'"):
        run_op("ScatterElements", [x, np.zeros_like(x, "int64"), x], {"reduction": "sub"})
    with pytest.raises(ShapeError, match="must have one shape"):
        run_op("ScatterElements", [x, np.zeros((4, 3, 1), "int64"), x])


def test_expand_tile():
    check_op("Expand", [rand(3, 1)], const_inputs={1: i64(2, 1, 4)}, attr_names={1: "shape"})
    check_op("Expand", [rand(1, 4, dtype="int64")], const_inputs={1: i64(3, 1)},
             attr_names={1: "shape"})
    check_op("Tile", [rand(2, 3)], const_inputs={1: i64(2, 3)}, attr_names={1: "repeats"})
    check_op("Tile", [rand(2, 3, dtype="int64")], const_inputs={1: i64(1, 2)},
             attr_names={1: "repeats"})
    with pytest.raises(ShapeError, match="cannot expand"):
        run_op("Expand", [rand(3, 2)], {"shape": (4, 3)})
    with pytest.raises(ShapeError, match="repeats"):
        run_op("Tile", [rand(3, 2)], {"repeats": (1,)})


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
def test_pad(mode):
    x = rand(3, 4, 5)
    pads = i64(0, 2, 1, 1, 3, 2)
    value = np.array(1.5, "float32") if mode == "constant" else None
    check_op("Pad", [x], {"mode": mode}, const_inputs={1: pads, 2: value},
             attr_names={1: "pads", 2: "constant_value"})
    check_op("Pad", [x.astype("int64")], {"mode": mode},
             const_inputs={1: i64(1, -1, 2, 0), 2: None, 3: i64(-1, 0)},
             attr_names={1: "pads", 3: "axes"}, opset=18)


def test_pad_errors():
    with pytest.raises(UnsupportedOpError, match="mode 'mirror'"):
        run_op("Pad", [rand(3)], {"pads": (1, 1), "mode": "mirror"})
    with pytest.raises(ShapeError, match="2 x 2 entries"):
        run_op("Pad", [rand(3, 3)], {"pads": (1, 1)})


def test_shape_size_constant_of_shape():
    x = rand(2, 3, 4)
    check_op("Shape", [x])
    check_op("Shape", [x], {"start": 1, "end": -1}, opset=15)
    check_op("Shape", [x], {"start": -10}, opset=15)
    check_op("Size", [x])
    from onnx import numpy_helper

    for value in (np.array([2.5], "float32"), np.array([7], "int64"), None):
        attrs = {} if value is None else {"value": numpy_helper.from_array(value)}
        ember = {} if value is None else {"value": value}
        check_op("ConstantOfShape", [], attrs, const_inputs={0: i64(2, 3)},
                 attr_names={0: "input"}, ember_attrs=ember)


@pytest.mark.parametrize("start, limit, delta, dtype", [
    (1, 10, 3, "int64"), (10, -3, -4, "int32"), (0.5, 3.0, 0.7, "float32"), (5, 1, 2, "int64"),
])
def test_range(start, limit, delta, dtype):
    args = [np.array(v, dtype) for v in (start, limit, delta)]
    (ref,) = onnx_run("Range", [], const_inputs=dict(enumerate(args)))
    attrs = dict(zip(("start", "limit", "delta"), args))  # numpy scalars keep the dtype
    (got,) = run_op("Range", [], attrs)
    assert got.dtype == ref.dtype
    np.testing.assert_allclose(got, ref, rtol=1e-6)
    (got,) = run_op("Range", [], {"start": start, "limit": limit, "delta": delta})
    np.testing.assert_allclose(got, ref, rtol=1e-6)
    half = {k: np.float16(v) for k, v in zip(("start", "limit", "delta"), (start, limit, delta))}
    (got,) = run_op("Range", [], half)
    want = np.arange(*half.values(), dtype="float32")
    np.testing.assert_allclose(got, want.astype("float16"), rtol=1e-3)
    assert got.dtype == np.float16
    with pytest.raises(ShapeError, match="delta is 0"):
        run_op("Range", [], {"start": 1, "limit": 2, "delta": 0})


@pytest.mark.parametrize("upper, k", [(1, 0), (0, 0), (1, -1), (0, 2)])
def test_trilu(upper, k):
    check_op("Trilu", [rand(2, 4, 5)], {"upper": upper}, const_inputs={1: np.array(k, "int64")},
             attr_names={1: "k"})


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_onehot(axis):
    idx = rng.integers(-5, 5, (2, 3)).astype("int64")
    check_op("OneHot", [idx, np.array([3, 7], "int64")], {"axis": axis},
             const_inputs={1: np.array(5, "int64")}, attr_names={1: "depth"})
    check_op("OneHot", [idx.astype("float32"), np.array([0.5, 2.0], "float32")], {"axis": axis},
             const_inputs={1: np.array([5.0], "float32")}, attr_names={1: "depth"})


def test_eyelike():
    check_op("EyeLike", [rand(3, 4)], {"k": 1})
    check_op("EyeLike", [rand(4, 3)], {"k": -2, "dtype": 7})
    with pytest.raises(ShapeError, match="must be 2-D"):
        run_op("EyeLike", [rand(3)])


def test_split_infers_several_outputs():
    split = get_op("Split")
    attrs = split.complete_attrs({"num_outputs": 4})
    outs = split.infer(attrs, [tensor_type((10, 2), "float32")])
    assert [t.shape for t in outs] == [(3, 2), (3, 2), (3, 2), (1, 2)]


def test_parallel_sizes():
    """Shapes above the parallel threshold take the parallel, vectorized schedule."""
    x = rand(16, 40, 48)
    check_op("Transpose", [x], {"perm": (2, 0, 1)})
    check_op("Concat", [x, rand(16, 40, 9)], {"axis": 2})
    check_op("Pad", [x], {"mode": "reflect"}, const_inputs={1: i64(0, 3, 5, 0, 2, 7)},
             attr_names={1: "pads"})
    check_op("Slice", [x], const_inputs={1: i64(-1, 1), 2: i64(-100, 47), 3: i64(1, 2),
                                          4: i64(-1, 2)},
             attr_names={1: "starts", 2: "ends", 3: "axes", 4: "steps"})
    check_op("Gather", [x, rng.integers(-40, 40, (30,)).astype("int64")], {"axis": 1})
    check_op("Reshape", [x], const_inputs={1: i64(8, -1, 96)}, attr_names={1: "shape"})
