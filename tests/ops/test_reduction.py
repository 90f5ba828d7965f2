"""Reductions, arg min/max, CumSum and softmax against onnxruntime, plus schedule structure."""

import numpy as np
import pytest

import ember
from ember.errors import ShapeError, UnsupportedOpError
from ember.graph.ir import GraphBuilder, Node, Value, tensor_type
from ember.lowering.kernel import group_compute, schedule_for
from ember.ops.registry import get_op
from ember.target import Target
from tests.ops.onnx_ref import check_op, ember_run

rng = np.random.default_rng(11)

REDUCES = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
           "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"]
AXES = [(-1,), (0,), (1,), (0, 2), (-3, -1), None]


def data(op: str, shape: tuple, dtype: str = "float32") -> np.ndarray:
    if dtype.startswith("int"):
        high = 3 if op == "ReduceProd" else 20
        return rng.integers(-high, high, shape).astype(dtype)
    x = rng.standard_normal(shape).astype(dtype)
    if op in ("ReduceProd",):
        return (np.abs(x) * 0.3 + 0.8).astype(dtype)
    if op == "ReduceLogSum":
        return np.abs(x) + 0.1
    return x


@pytest.mark.parametrize("axes", AXES, ids=str)
@pytest.mark.parametrize("op", REDUCES)
def test_reduce(op: str, axes: tuple | None) -> None:
    x = data(op, (3, 5, 37))
    for keepdims in (0, 1):
        consts = {1: np.array(axes, "int64")} if axes is not None else {}
        check_op(op, [x], {"keepdims": keepdims}, const_inputs=consts, attr_names={1: "axes"},
                 rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin",
                                "ReduceProd", "ReduceL1", "ReduceSumSquare"])
@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_reduce_int(op: str, dtype: str) -> None:
    x = data(op, (4, 6, 5), dtype)
    for axes in ((1,), (0, 2)):
        check_op(op, [x], {"keepdims": 0}, const_inputs={1: np.array(axes, "int64")},
                 attr_names={1: "axes"})


def test_reduce_bool() -> None:
    x = rng.random((3, 4, 20)) > 0.8
    for op in ("ReduceMax", "ReduceMin"):
        for axes in ((1,), (0, 2)):
            check_op(op, [x], {"keepdims": 0}, const_inputs={1: np.array(axes, "int64")},
                     attr_names={1: "axes"}, opset=20)


def test_reduce_empty_axes() -> None:
    x = data("ReduceSum", (3, 4, 5))
    # empty axes: reduce everything, or nothing with noop_with_empty_axes
    check_op("ReduceSum", [x], {"keepdims": 1}, const_inputs={1: np.array([], "int64")},
             attr_names={1: "axes"}, rtol=1e-5)
    check_op("ReduceMean", [x], {"noop_with_empty_axes": 1},
             const_inputs={1: np.array([], "int64")}, attr_names={1: "axes"})
    (got,) = ember_run("ReduceMax", [x], {"axes": (), "noop_with_empty_axes": 1})
    np.testing.assert_array_equal(got, x)


def test_reduce_opset13_axes_attribute() -> None:
    # before opset 18 the axes are an attribute; ember sees the same attribute either way
    x = data("ReduceMean", (2, 3, 20))
    check_op("ReduceMean", [x], {"axes": [1, -1], "keepdims": 0}, opset=13)


@pytest.mark.parametrize("shape,axes", [((64, 1000), (1,)), ((1000, 40), (0,)),
                                        ((8, 16, 300), (1, 2)), ((5000,), None)])
def test_reduce_large(shape: tuple, axes: tuple | None) -> None:
    # big enough for the rfactor / column-vector / parallel paths
    x = rng.standard_normal(shape).astype("float32")
    (got,) = ember_run("ReduceSum", [x], {"axes": axes, "keepdims": 0})
    np.testing.assert_allclose(got, x.sum(axis=axes), rtol=1e-4, atol=1e-3)
    (got,) = ember_run("ReduceMax", [x], {"axes": axes, "keepdims": 1})
    np.testing.assert_array_equal(got, x.max(axis=axes, keepdims=True))


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
def test_arg(op: str) -> None:
    xf = rng.standard_normal((3, 5, 20)).astype("float32")
    xi = rng.integers(-2, 3, (3, 5, 20)).astype("int32")  # many ties
    for x in (xf, xi):
        for axis in (-1, 0, 1):
            for keepdims in (0, 1):
                for last in (0, 1):
                    check_op(op, [x], {"axis": axis, "keepdims": keepdims,
                                       "select_last_index": last})


@pytest.mark.parametrize("dtype", ["float32", "int32", "int64"])
def test_cumsum(dtype: str) -> None:
    x = (rng.standard_normal((3, 4, 9)) * 10).astype(dtype)
    for axis in (0, 2, -2):
        for exclusive in (0, 1):
            for reverse in (0, 1):
                check_op("CumSum", [x], {"exclusive": exclusive, "reverse": reverse},
                         const_inputs={1: np.array(axis, "int64")}, attr_names={1: "axis"},
                         atol=1e-4)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_softmax(op: str) -> None:
    x = rng.standard_normal((2, 3, 4, 37)).astype("float32")
    for axis in (-1, 0, 1, 2):
        check_op(op, [x], {"axis": axis}, rtol=1e-5, atol=1e-6)
    # numerically stable: large logits do not overflow
    check_op(op, [x * 200], {"axis": -1}, rtol=1e-5, atol=1e-5)
    check_op(op, [rng.standard_normal((64, 1000)).astype("float32")], rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------------------------
def lowered(op: str, shape: tuple, attrs: dict) -> str:
    opdef = get_op(op)
    full = opdef.complete_attrs(attrs)
    x = Value("x", tensor_type(shape, "float32"))
    (out_type,) = opdef.infer(full, [x.type])
    y = Value("y", out_type)
    placeholders, env = group_compute([Node(op, "n", (x,), (y,), full)], [x])
    s = schedule_for(opdef, [env[y]], Target("llvm"))
    return str(ember.lower(s, [*placeholders, env[y]]))


def test_schedule_row_reduction_vectorized_partial_sums() -> None:
    text = lowered("ReduceSum", (64, 1024), {"axes": (1,), "keepdims": 0})
    assert "parallel" in text and "vectorized" in text and ".rf" in text


def test_schedule_column_reduction_vectorized_across_columns() -> None:
    text = lowered("ReduceMean", (1024, 256), {"axes": (0,), "keepdims": 0})
    assert "parallel" in text and "vectorized" in text and ".rf" not in text


def test_schedule_softmax_one_kernel_per_row() -> None:
    text = lowered("Softmax", (64, 1000), {"axis": -1})
    lines = text.splitlines()
    loops = [line for line in lines if line.strip().startswith("for ")]
    assert "parallel" in loops[0]  # the row loop; max, sum and output computed inside it
    assert sum("vectorized" in line for line in loops) >= 3
    assert all(line.startswith("    ") for line in lines[2:] if line.strip())


def test_errors() -> None:
    b = GraphBuilder("g")
    x = b.input("x", (2, 3, 4), "float32")
    with pytest.raises(ShapeError, match=r"node 'reducesum' \(ReduceSum\).*axis 3 is out of range"):
        b.add("ReduceSum", [x], {"axes": (3,)})
    with pytest.raises(ShapeError, match="name an axis twice"):
        b.add("ReduceMax", [x], {"axes": (1, -2)})
    with pytest.raises(ShapeError, match=r"node 'softmax' \(Softmax\).*axis -4"):
        b.add("Softmax", [x], {"axis": -4})
    with pytest.raises(ShapeError, match="ArgMax.*axis 5"):
        b.add("ArgMax", [x], {"axis": 5})
    i = b.input("i", (2, 3), "int32")
    with pytest.raises(ShapeError, match="ReduceL2 needs float"):
        b.add("ReduceL2", [i])
    with pytest.raises(ShapeError, match="'axis' input is required"):
        b.add("CumSum", [x])
    with pytest.raises(UnsupportedOpError, match="exclusive must be 0 or 1"):
        b.add("CumSum", [x], {"axis": 0, "exclusive": 2})


def test_c_target() -> None:
    from ember.lowering.kernel import run_op

    x = rng.standard_normal((16, 100)).astype("float32")
    (got,) = run_op("Softmax", [x], {}, target="c")
    e = np.exp(x - x.max(-1, keepdims=True))
    np.testing.assert_allclose(got, e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-7)
    (got,) = run_op("ReduceMean", [x], {"axes": (0,), "keepdims": 0}, target="c")
    np.testing.assert_allclose(got, x.mean(0), rtol=1e-5, atol=1e-6)
