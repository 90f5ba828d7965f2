"""Models onnxruntime refuses are ModelErrors in ember too, naming the node, input or
initializer; never a numpy ValueError or a silently different model."""

import numpy as np
import pytest

import ember
from ember.errors import ModelError

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402
from onnx import numpy_helper  # noqa: E402

vi = h.make_tensor_value_info


def model(nodes, inputs, outputs, inits=(), opset=17):
    graph = h.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])


def _compile(m):
    return ember.compile(m, cache=False)


@pytest.mark.parametrize("extra", [-4, 4])
def test_initializer_data_must_fill_its_dims(extra: int) -> None:
    w = numpy_helper.from_array(np.ones((2, 2), "float32"), "w")
    w.raw_data = w.raw_data[:extra] if extra < 0 else w.raw_data + bytes(extra)
    m = model([h.make_node("Add", ["x", "w"], ["y"])], [vi("x", T.FLOAT, [2, 2])],
              [vi("y", T.FLOAT, [2, 2])], [w])
    # too short: onnx's checker says so; too long: ember's own check (numpy would raise)
    with pytest.raises(ModelError, match="tensor name: w\\) raw_data size|initializer 'w': "
                                         "the data of tensor 'w' does not match its dims"):
        _compile(m)


def test_graph_without_outputs() -> None:
    m = model([h.make_node("Relu", ["x"], ["y"])], [vi("x", T.FLOAT, [2])], [])
    with pytest.raises(ModelError, match="declares no outputs"):
        _compile(m)


def test_declared_output_type_must_match() -> None:
    m = model([h.make_node("Relu", ["x"], ["y"])], [vi("x", T.FLOAT, [2])],
              [vi("y", T.INT32, [2])])
    with pytest.raises(ModelError, match="graph output 'y' is declared int32 but the graph "
                                         "computes float32"):
        _compile(m)


def test_input_types_follow_the_schema() -> None:
    shape = numpy_helper.from_array(np.array([4.0, 1.0]), "s")  # a double shape
    m = model([h.make_node("Reshape", ["x", "s"], ["y"], name="r")],
              [vi("x", T.FLOAT, [2, 2])], [vi("y", T.FLOAT, [4, 1])], [shape])
    with pytest.raises(ModelError, match="node 'r' \\(Reshape\\): input 1 \\('shape'\\) has "
                                         "type tensor\\(double\\); the ONNX schema allows "
                                         "tensor\\(int64\\)"):
        _compile(m)
    idx = numpy_helper.from_array(np.array([0.0], "float32"), "i")
    m = model([h.make_node("Gather", ["x", "i"], ["y"], name="g")],
              [vi("x", T.FLOAT, [2, 2])], [vi("y", T.FLOAT, [1, 2])], [idx])
    with pytest.raises(ModelError, match="node 'g' \\(Gather\\): input 1 \\('indices'\\)"):
        _compile(m)


def test_split_needs_split_or_num_outputs_from_opset_18() -> None:
    outs = [vi("a", T.FLOAT, [2, 2]), vi("b", T.FLOAT, [2, 2])]
    m = model([h.make_node("Split", ["x"], ["a", "b"], axis=0, name="s")],
              [vi("x", T.FLOAT, [4, 2])], outs, opset=18)
    with pytest.raises(ModelError, match="node 's' \\(Split, opset 18\\): give either the "
                                         "'split' input or the 'num_outputs' attribute"):
        _compile(m)
    even = model([h.make_node("Split", ["x"], ["a", "b"], axis=0)],
                 [vi("x", T.FLOAT, [4, 2])], outs, opset=13)  # before 18: split evenly
    x = np.arange(8, dtype="float32").reshape(4, 2)
    a, b = _compile(even).run({"x": x})
    np.testing.assert_array_equal(np.concatenate([a, b]), x)


def test_shapeless_output_is_named() -> None:
    m = model([h.make_node("Relu", ["x"], ["y"])], [vi("x", T.FLOAT, [2])],
              [vi("y", T.FLOAT, None)])
    with pytest.raises(ModelError, match="graph output 0 'y' has a type without a shape"):
        _compile(m)


def test_checker_crash_on_garbage_names_the_model(tmp_path) -> None:
    m = model([h.make_node("Relu", ["x"], ["y"])], [vi("x", T.FLOAT, [2])],
              [vi("y", T.FLOAT, [2])])
    m.graph.node[0].op_type = "Relu\udcff".encode("utf-8", "surrogateescape").decode(
        "latin-1")
    with pytest.raises(ember.EmberError):
        _compile(m)


def test_declared_value_info_type_must_match() -> None:
    graph = h.make_graph([h.make_node("Relu", ["x"], ["a"]), h.make_node("Neg", ["a"], ["y"])],
                         "g", [vi("x", T.FLOAT, [2])], [vi("y", T.FLOAT, [2])],
                         value_info=[vi("a", T.INT32, [2])])
    m = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    with pytest.raises(ModelError, match="value_info 'a' is declared int32 but the graph "
                                         "computes float32"):
        _compile(m)


def test_output_without_element_type() -> None:
    m = model([h.make_node("Relu", ["x"], ["y"])], [vi("x", T.FLOAT, [2])],
              [vi("y", T.UNDEFINED, [2])])
    with pytest.raises(ModelError, match="graph output 'y' has element type 0 \\(UNDEFINED\\)"):
        _compile(m)


def test_names_that_are_not_text() -> None:
    m = model([h.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", T.FLOAT, [2])],
              [vi("y", T.FLOAT, [2])])
    data = m.SerializeToString().replace(b"\x1a\x01r", b"\x1a\x01\xff")  # node name "r"
    with pytest.raises(ModelError, match="node 0 \\('Relu'\\) has a name.*not valid UTF-8"):
        _compile(onnx.load_from_string(data))


# models whose shapes are decided at run time (ember.compile returns a SpecializedModel):
# the broken ones are refused by compile, as static ones are, not accepted until a run
def test_specialized_model_with_an_undefined_input_fails_at_compile() -> None:
    m = model([h.make_node("Relu", ["z"], ["y"], name="relu")], [vi("x", T.FLOAT, ["n", 4])],
              [vi("y", T.FLOAT, ["n", 4])])
    with pytest.raises(ModelError, match="node 'relu' \\(Relu\\): input 'z' is not defined"):
        _compile(m)


def test_graph_input_without_a_type_fails_at_compile() -> None:
    typeless = onnx.ValueInfoProto(name="x")
    m = model([h.make_node("Relu", ["x"], ["y"])], [vi("x", T.FLOAT, [2])],
              [vi("y", T.FLOAT, [2])])
    m.graph.input[0].CopyFrom(typeless)
    with pytest.raises(ModelError, match="graph input 0 'x' has no type; the ONNX spec "
                                         "requires one"):
        _compile(m)


def test_graph_input_of_undefined_element_type_fails_at_compile() -> None:
    from ember.errors import UnsupportedOpError

    m = model([h.make_node("Relu", ["x"], ["y"])], [vi("x", T.UNDEFINED, ["n"])],
              [vi("y", T.FLOAT, ["n"])])
    with pytest.raises(UnsupportedOpError, match="graph input 'x': data type UNDEFINED is not "
                                                 "supported"):
        _compile(m)
