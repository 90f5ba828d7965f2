"""Bad shapes, thread counts and dims are EmberErrors naming what was wrong, never an
AssertionError from deep inside or a silently different model."""

import numpy as np
import pytest

import ember
from ember.errors import ArgumentError, EmberError, ShapeError
from ember.graph.ir import GraphBuilder
from ember.types import MAX_ELEMENTS
from ember.runtime import threadpool

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402


def _relu_model(dims: list) -> "onnx.ModelProto":
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, dims)
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="r")], "g", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("count,match", [
    (True, "expected an int thread count, got bool True"),
    (2.0, "got float 2.0"),
    ("4", "got str '4'"),
    (0, "in \\[1, 257\\], got 0"),
    (1 << 40, "got 1099511627776"),
])
def test_set_num_threads_rejects(count, match) -> None:
    before = threadpool.num_threads()
    with pytest.raises(ArgumentError, match=match):
        threadpool.set_num_threads(count)
    assert threadpool.num_threads() == before


def test_set_num_threads_accepts_numpy_ints() -> None:
    threadpool.set_num_threads(np.int64(2))
    threadpool.set_num_threads(1)


def test_env_thread_count_is_checked(monkeypatch) -> None:
    monkeypatch.setenv("EMBER_NUM_THREADS", "100000")
    with pytest.raises(EmberError, match="EMBER_NUM_THREADS must be a positive integer in "
                                         "\\[1, 257\\]"):
        threadpool.default_num_threads()


@pytest.mark.parametrize("shape,match", [
    ((1.5, 8), "dimension 0 must be an int, got float 1.5"),
    ((2, -3), "dimension 1 is negative \\(-3\\)"),
    ((True, 8), "dimension 0 must be an int, got bool True"),
    ((1 << 16, 1 << 16), f"shape .* elements; .* at most {MAX_ELEMENTS}"),
    ("28", "expected a sequence of ints"),
])
def test_input_shapes_are_checked(shape, match) -> None:
    model = _relu_model(["batch", 8])
    with pytest.raises(ShapeError, match=f"input_shapes\\['x'\\]: {match}"):
        ember.compile(model, input_shapes={"x": shape}, cache=False)
    with pytest.raises(ShapeError, match=f"graph input 'x': {match}"):
        GraphBuilder("g").input("x", shape, "float32")


def test_fractional_batch_is_not_compiled_as_batch_one() -> None:
    with pytest.raises(ShapeError, match="float 1.5"):
        ember.compile(_relu_model(["n", 8]), input_shapes={"x": (1.5, 8)}, cache=False)
    model = ember.compile(_relu_model(["n", 8]), input_shapes={"x": (np.int64(3), 8)},
                          cache=False)
    x = np.linspace(-1, 1, 24, dtype="float32").reshape(3, 8)
    np.testing.assert_array_equal(model.run({"x": x})[0], np.maximum(x, 0))


@pytest.mark.parametrize("dims,match", [
    ([1 << 31, 1], "graph input 'x': shape \\(2147483648, 1\\) has 2147483648 elements"),
])
def test_bad_dims_in_the_model(dims, match) -> None:
    with pytest.raises(ShapeError, match=match):
        ember.compile(_relu_model(dims), cache=False)


def test_huge_intermediate_is_refused_by_the_node() -> None:
    b = GraphBuilder("g")
    x = b.input("x", (1 << 16, 1), "float32")
    y = b.input("y", (1, 1 << 16), "float32")
    with pytest.raises(ShapeError, match="node 'add' \\(Add\\) output 0: shape"):
        b.add("Add", [x, y])


def _tiny_graph():
    b = GraphBuilder("t")
    x = b.input("x", (2, 8), "float32")
    y, = b.add("Relu", [x])
    return b.finish([y])


@pytest.mark.parametrize("kwargs,match", [
    ({"opt_level": True}, "opt_level must be an int in \\[0, 3\\], got True"),
    ({"jobs": -1}, "jobs must be a positive int"),
    ({"jobs": "4"}, "jobs must be a positive int"),
    ({"cache": 123}, "cache must be True, False, a directory or a KernelCache, got int"),
    ({"input_shapes": [("x", (2, 8))]}, "input_shapes must map input names to shapes"),
    ({"prepack": "no"}, "prepack must be True, False or None"),
    ({"progress": 5}, "progress must be True, False or None"),
])
def test_compile_arguments_are_checked(kwargs, match) -> None:
    kwargs.setdefault("cache", False)
    with pytest.raises(ArgumentError, match=match):
        ember.compile(_tiny_graph(), **kwargs)


def test_export_paths_are_checked(tmp_path) -> None:
    with pytest.raises(ArgumentError, match="output path must be a str or Path, got int"):
        ember.export_library(_tiny_graph(), 5)
    with pytest.raises(ArgumentError, match="is a directory, not an .onnx file"):
        ember.compile(str(tmp_path))


@pytest.mark.parametrize("shape", [(1 << 31,), (1 << 16, 1 << 16)])
def test_te_shapes_past_32_bit_indices_are_refused(shape) -> None:
    from ember import te

    # before: llvmlite's "Operands must be the same type, got (i32, i64)" at build time
    with pytest.raises(ShapeError, match="elements; tensors of at most 2147483647 elements"):
        te.placeholder(shape, "float32", name="a")


@pytest.mark.parametrize("inputs,match", [
    (None, "expected the inputs as a dict \\(name -> array\\) or a list of arrays in the "
           "order \\['x'\\], got NoneType"),
    (7, "got int"),
    ("x", "got str"),
    ({"x": "abc"}, "input 'x': cannot convert the given str to float32"),
    ({"x": [[1, 2, 3], [4, 5]]}, "input 'x': cannot convert the given list to float32"),
    ({"x": [["a"] * 8] * 2}, "input 'x': cannot convert the given list to float32"),
])
def test_run_inputs_numpy_cannot_convert(inputs, match) -> None:
    model = ember.compile(_tiny_graph(), cache=False)
    with pytest.raises(ArgumentError, match=match):
        model.run(inputs)
    ok = model.run({"x": [[1.0] * 8, [-1.0] * 8]})[0]  # a nested list that converts is fine
    np.testing.assert_array_equal(ok, np.maximum(np.array([[1.0] * 8, [-1.0] * 8]), 0))


def test_zero_size_matmul_is_an_ember_error_not_a_crash() -> None:
    # found by the fuzz suite: a batch of 0 reached max() of an empty sequence in pick_tile
    from ember.ops.conv_common import pick_tile

    assert pick_tile(0, 8) == 1 and pick_tile(12, 8) == 6
    b = GraphBuilder("t")
    x = b.input("x", (0, 8), "float32")
    w = b.constant("w", np.ones((8, 5), "float32"))
    y, = b.add("MatMul", [x, w])
    try:
        model = ember.compile(b.finish([y]), cache=False)
    except EmberError:
        return
    assert model.run({"x": np.zeros((0, 8), "float32")})[0].shape == (0, 5)
