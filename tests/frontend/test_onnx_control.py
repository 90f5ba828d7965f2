"""ONNX Loop, Scan, sequences and optionals: unrolled and resolved at import, checked against
numpy on random inputs; sequence inputs and outputs as Python lists; every refusal."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import ember
from ember.errors import ArgumentError, ModelError, ShapeError, UnsupportedOpError
from ember.frontend import onnx_control
from ember.frontend.onnx import UnsupportedModelError, from_onnx, import_onnx
from ember.frontend.onnx_sequence import TENSOR, OptLayout, SeqLayout, flatten_feed
from ember.lowering.evaluate import evaluate_node
from ember.specialize import SpecializedModel

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def make_model(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def tensor(name, shape, elem=F):
    return helper.make_tensor_value_info(name, elem, shape)


def seq(name, elem=F, shape=None):
    return helper.make_tensor_sequence_value_info(name, elem, shape)


def const(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def rng_array(rng, shape):
    return rng.standard_normal(shape).astype(np.float32)


# Scan -------------------------------------------------------------------------------------
def scan_model(length=4):
    """state' = state * 0.5 + x_t + y_t; outputs the state and (x_t - y_t) per step.
    x scans axis 0 forward, y axis 1 backward; the second output stacks on axis 1, reversed."""
    body = helper.make_graph(
        [helper.make_node("Mul", ["s", "half"], ["h"]),
         helper.make_node("Add", ["h", "xt"], ["a"]),
         helper.make_node("Add", ["a", "yt"], ["s_out"]),
         helper.make_node("Sub", ["xt", "yt"], ["d"]),
         helper.make_node("Identity", ["s_out"], ["s_scan"])],
        "body", [tensor("s", [3]), tensor("xt", [3]), tensor("yt", [3])],
        [tensor("s_out", [3]), tensor("s_scan", [3]), tensor("d", [3])],
        [const("half", np.float32(0.5))])
    scan = helper.make_node("Scan", ["s0", "x", "y"], ["s_final", "states", "diffs"], body=body,
                            num_scan_inputs=2, scan_input_axes=[0, 1],
                            scan_input_directions=[0, 1], scan_output_axes=[0, 1],
                            scan_output_directions=[0, 1])
    return make_model([scan], [tensor("s0", [3]), tensor("x", [length, 3]),
                               tensor("y", [3, length])],
                      [tensor("s_final", [3]), tensor("states", [length, 3]),
                       tensor("diffs", [3, length])])


def scan_reference(s0, x, y):
    states, diffs, s = [], [], s0
    n = x.shape[0]
    for t in range(n):
        yt = y[:, n - 1 - t]
        s = s * np.float32(0.5) + x[t] + yt
        states.append(s)
        diffs.append(x[t] - yt)
    return s, np.stack(states), np.stack(diffs[::-1], axis=1)


def test_scan_matches_numpy_with_axes_and_directions():
    rng = np.random.default_rng(0)
    s0, x, y = rng_array(rng, (3,)), rng_array(rng, (4, 3)), rng_array(rng, (3, 4))
    compiled = ember.compile(scan_model())
    for got, want in zip(compiled.run([s0, x, y]), scan_reference(s0, x, y)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_scan_over_nothing_and_mismatched_lengths_are_refused():
    model = scan_model(length=0)
    with pytest.raises(UnsupportedModelError, match="a scan over 0 iterations"):
        from_onnx(model, {"x": (0, 3), "y": (3, 0)})
    model = scan_model()
    model.graph.input[2].type.tensor_type.shape.dim[1].dim_value = 5
    with pytest.raises(ShapeError, match=r"different lengths \[4, 5\]"):
        from_onnx(model)


# Loop -------------------------------------------------------------------------------------
def loop_model(trip_input=False, cond_body=None, trip=3):
    """y' = y * 0.5 + x[i]; scan output y' per iteration. The body's condition is `cond_body`
    (nodes computing 'c_out'), else the condition passed through."""
    nodes = cond_body or [helper.make_node("Identity", ["c_in"], ["c_out"])]
    body = helper.make_graph(
        nodes + [helper.make_node("Gather", ["x", "i"], ["xi"]),
                 helper.make_node("Mul", ["y_in", "half"], ["h"]),
                 helper.make_node("Add", ["h", "xi"], ["y_out"]),
                 helper.make_node("Identity", ["y_out"], ["y_scan"])],
        "body", [tensor("i", [], I64), tensor("c_in", [], B), tensor("y_in", [2])],
        [tensor("c_out", [], B), tensor("y_out", [2]), tensor("y_scan", [2])],
        [const("half", np.float32(0.5))])
    loop = helper.make_node("Loop", ["M" if trip is not None else "", "cond", "y0"],
                            ["y", "ys"], body=body)
    inputs = [tensor("x", [8, 2]), tensor("y0", [2])]
    inits = [const("cond", np.array(True))]
    if trip_input:
        inputs.insert(0, tensor("M", [], I64))
    elif trip is not None:
        inits.append(const("M", np.array(trip, np.int64)))
    return make_model([loop], inputs, [tensor("y", [2]), tensor("ys", ["n", 2])], inits)


def loop_reference(x, y, trip):
    ys = []
    for i in range(trip):
        y = y * np.float32(0.5) + x[i]
        ys.append(y)
    return y, np.stack(ys)


def test_loop_with_constant_trip_count_is_unrolled():
    rng = np.random.default_rng(1)
    x, y0 = rng_array(rng, (8, 2)), rng_array(rng, (2,))
    graph = from_onnx(loop_model(trip=3))
    assert sum(n.op == "Mul" for n in graph.nodes) == 3      # one body copy per iteration
    got = ember.compile(graph).run([x, y0])
    for g, w in zip(got, loop_reference(x, y0, 3)):
        np.testing.assert_allclose(g, w, rtol=1e-6)


def test_loop_trip_count_from_run_time_data_specializes():
    rng = np.random.default_rng(2)
    x, y0 = rng_array(rng, (8, 2)), rng_array(rng, (2,))
    model = loop_model(trip_input=True)
    with pytest.raises(UnsupportedModelError, match="input 'M' must be a constant") as info:
        from_onnx(model)
    assert info.value.dynamic_values == {"M"}
    compiled = ember.compile(model)
    for trip in (2, 5, 2):
        got = compiled.run([np.array(trip, np.int64), x, y0])
        for g, w in zip(got, loop_reference(x, y0, trip)):
            np.testing.assert_allclose(g, w, rtol=1e-6)
    assert compiled.compiles == 3        # a shape program, then one main program per count


def test_loop_condition_from_the_iteration_number_ends_it():
    # no trip count: runs while i + 1 < 4, i.e. 4 iterations
    cond_body = [helper.make_node("Add", ["i", "one"], ["next"]),
                 helper.make_node("Less", ["next", "four"], ["c_out"])]
    model = loop_model(cond_body=cond_body, trip=None)
    model.graph.node[0].attribute[0].g.initializer.extend(
        [const("one", np.int64(1)), const("four", np.int64(4))])
    rng = np.random.default_rng(3)
    x, y0 = rng_array(rng, (8, 2)), rng_array(rng, (2,))
    got = ember.compile(model).run([x, y0])
    for g, w in zip(got, loop_reference(x, y0, 4)):
        np.testing.assert_allclose(g, w, rtol=1e-6)


def test_loop_condition_from_data_is_refused():
    cond_body = [helper.make_node("ReduceSum", ["y_in"], ["total"], keepdims=0),
                 helper.make_node("Less", ["total", "limit"], ["c_out"])]
    model = loop_model(cond_body=cond_body, trip=None)
    model.graph.node[0].attribute[0].g.initializer.append(const("limit", np.float32(10)))
    with pytest.raises(UnsupportedModelError,
                       match=r"node 'loop_0' \(Loop.*condition after iteration 0 is computed "
                             "from run-time data"):
        from_onnx(model)


def test_unrolling_is_bounded(monkeypatch):
    with pytest.raises(UnsupportedModelError, match="1000000 iterations: .* at most 1024"):
        from_onnx(loop_model(trip=10**6))
    forever = loop_model(trip=None)                  # no trip count, condition always true
    with pytest.raises(UnsupportedModelError, match="1025 iterations"):
        from_onnx(forever)
    monkeypatch.setattr(onnx_control, "MAX_UNROLLED_NODES", 10)
    monkeypatch.setattr("ember.frontend.onnx.MAX_UNROLLED_NODES", 10)
    with pytest.raises(UnsupportedModelError, match="more than 10 nodes"):
        from_onnx(loop_model(trip=3))


def test_loop_over_no_iteration_gives_empty_scan_outputs():
    rng = np.random.default_rng(4)
    x, y0 = rng_array(rng, (8, 2)), rng_array(rng, (2,))
    y, ys = ember.compile(loop_model(trip=0)).run([x, y0])
    np.testing.assert_array_equal(y, y0)
    assert ys.shape == (0, 2) and ys.dtype == np.float32


# sequences inside a model -------------------------------------------------------------------
def test_sequence_ops_inside_a_model_match_numpy():
    # split x (6, 4) into rows of 2, drop the middle piece, put -x[:1] first, read piece 1,
    # concatenate all; the length is a constant output
    nodes = [
        helper.make_node("SplitToSequence", ["x", "two"], ["pieces"], axis=0),
        helper.make_node("SequenceErase", ["pieces", "one"], ["kept"]),
        helper.make_node("Slice", ["x", "zero1", "one1"], ["head"]),
        helper.make_node("Neg", ["head"], ["neg"]),
        helper.make_node("SequenceInsert", ["kept", "neg", "zero"], ["longer"]),
        helper.make_node("SequenceAt", ["longer", "minus1"], ["last"]),
        helper.make_node("ConcatFromSequence", ["longer"], ["joined"], axis=0),
        helper.make_node("SequenceLength", ["longer"], ["count"]),
        helper.make_node("SplitToSequence", ["x"], ["cols"], axis=1, keepdims=0),
        helper.make_node("ConcatFromSequence", ["cols"], ["stacked"], axis=0, new_axis=1),
    ]
    inits = [const("two", np.int64(2)), const("one", np.int64(1)), const("zero", np.int64(0)),
             const("minus1", np.int64(-1)), const("zero1", np.array([0], np.int64)),
             const("one1", np.array([1], np.int64))]
    model = make_model(nodes, [tensor("x", [6, 4])],
                       [tensor("joined", [5, 4]), tensor("last", [2, 4]),
                        tensor("count", [], I64), tensor("stacked", [4, 6])], inits)
    x = rng_array(np.random.default_rng(5), (6, 4))
    joined, last, count, stacked = ember.compile(model).run([x])
    np.testing.assert_array_equal(joined, np.concatenate([-x[:1], x[:2], x[4:]]))
    np.testing.assert_array_equal(last, x[4:])
    assert count == 3 and count.dtype == np.int64
    np.testing.assert_array_equal(stacked, x.T)


def test_sequence_input_and_output_are_python_lists():
    # out = SequenceMap(Relu over each element) + the input's first element appended
    body = helper.make_graph([helper.make_node("Relu", ["e"], ["r"])], "body",
                             [tensor("e", None)], [tensor("r", None)])
    nodes = [helper.make_node("SequenceMap", ["xs"], ["relus"], body=body),
             helper.make_node("SequenceAt", ["xs", "zero"], ["first"]),
             helper.make_node("SequenceInsert", ["relus", "first"], ["out"]),
             helper.make_node("ConcatFromSequence", ["xs"], ["cat"], axis=0)]
    model = make_model(nodes, [seq("xs", F, ["n", 3])], [seq("out", F), tensor("cat", ["m", 3])],
                       [const("zero", np.int64(0))])
    compiled = ember.compile(model)
    assert isinstance(compiled, SpecializedModel)
    rng = np.random.default_rng(6)
    for lengths in ([2, 1], [1, 3, 2], [2, 1]):
        xs = [rng_array(rng, (n, 3)) for n in lengths]
        out, cat = compiled.run({"xs": xs})
        assert isinstance(out, list) and len(out) == len(xs) + 1
        for got, want in zip(out, [np.maximum(a, 0) for a in xs] + [xs[0]]):
            np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(cat, np.concatenate(xs))
    assert compiled.compiles == 2        # the third run reuses the first structure


def test_flat_import_of_a_sequence_input():
    model = make_model([helper.make_node("ConcatFromSequence", ["xs"], ["y"], axis=1)],
                       [seq("xs", F, [2, None])], [tensor("y", [2, 5])])
    graph, layouts = import_onnx(model, {"xs": [(2, 2), (2, 3)]})
    assert [v.name for v in graph.inputs] == ["xs[0]", "xs[1]"]
    assert layouts == (TENSOR,)
    with pytest.raises(ShapeError, match=r"graph input 'xs' is a sequence: pass input_shapes"):
        from_onnx(model)
    with pytest.raises(ShapeError, match="one shape per element"):
        from_onnx(model, {"xs": (2, 2)})
    with pytest.raises(ShapeError, match=r"graph input 'xs\[0\]': shape \(3, 2\) does not fit"):
        from_onnx(model, {"xs": [(3, 2)]})
    with pytest.raises(ArgumentError, match="only tensors can be bound"):
        from_onnx(model, {"xs": [(2, 2)]}, constant_inputs={"xs": np.zeros((2, 2))})
    with pytest.raises(ArgumentError, match=r"sequence or optional inputs: their shapes come"):
        SpecializedModel(model, lambda g: None, {"xs": [(2, 2)]})


def test_run_values_must_fit_the_input_kinds():
    proto_type = seq("xs", F).type
    with pytest.raises(ArgumentError, match="input 'xs' is a sequence: pass a list of arrays"):
        flatten_feed("xs", proto_type, np.zeros(3, np.float32))
    with pytest.raises(ArgumentError, match=r"input 'xs\[0\]' is a tensor: pass an array"):
        flatten_feed("xs", proto_type, [[np.zeros(3)]])
    shapes, flat = flatten_feed("xs", proto_type, [np.zeros(2), np.ones((1, 2))])
    assert shapes == [(2,), (1, 2)] and list(flat) == ["xs[0]", "xs[1]"]


# optionals ---------------------------------------------------------------------------------
def optional_model():
    opt = helper.make_value_info("o", helper.make_optional_type_proto(
        helper.make_tensor_type_proto(F, [3])))
    nodes = [helper.make_node("OptionalHasElement", ["o"], ["has"]),
             helper.make_node("Optional", ["x"], ["wrapped"]),
             helper.make_node("OptionalGetElement", ["wrapped"], ["back"]),
             helper.make_node("Identity", ["o"], ["o_out"])]
    out = helper.make_value_info("o_out", opt.type)
    return make_model(nodes, [opt, tensor("x", [3])], [tensor("has", [], B),
                                                       tensor("back", [3]), out], opset=18)


def test_optional_inputs_and_outputs():
    compiled = ember.compile(optional_model())
    x = rng_array(np.random.default_rng(7), (3,))
    has, back, o = compiled.run([None, x])
    assert has == np.array(False) and o is None
    np.testing.assert_array_equal(back, x)
    has, back, o = compiled.run([x * 2, x])
    assert has == np.array(True)
    np.testing.assert_array_equal(o, x * 2)
    assert import_onnx(optional_model(), {"o": None})[1][2] == OptLayout(None)


def test_loop_carrying_an_optional_sequence():
    # the model of onnx's test_loop16_seq_none (whose expected output the suite cannot
    # compare): an empty optional becomes [0.], then x[:i + 1] is appended 5 times
    then_g = helper.make_graph([helper.make_node("SequenceConstruct", ["zero_f"], ["init"])],
                               "then", [], [seq("init", F)], [const("zero_f", np.float32(0))])
    else_g = helper.make_graph([helper.make_node("OptionalGetElement", ["opt_in"], ["s_in"])],
                               "else", [], [seq("s_in", F)])
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]),
         helper.make_node("OptionalHasElement", ["opt_in"], ["has"]),
         helper.make_node("Not", ["has"], ["none"]),
         helper.make_node("If", ["none"], ["s"], then_branch=then_g, else_branch=else_g),
         helper.make_node("Add", ["i", "one"], ["end"]),
         helper.make_node("Unsqueeze", ["end", "axes"], ["end1"]),
         helper.make_node("Slice", ["x", "start", "end1"], ["piece"]),
         helper.make_node("SequenceInsert", ["s", "piece"], ["s_out"])],
        "body", [tensor("i", [], I64), tensor("c_in", [], B),
                 helper.make_value_info("opt_in", helper.make_optional_type_proto(
                     helper.make_sequence_type_proto(helper.make_tensor_type_proto(F, None))))],
        [tensor("c_out", [], B), seq("s_out", F)],
        [const("one", np.int64(1)), const("axes", np.array([0], np.int64)),
         const("start", np.array([0], np.int64))])
    opt = helper.make_value_info("opt", body.input[2].type)
    model = make_model([helper.make_node("Loop", ["M", "cond", "opt"], ["res"], body=body)],
                       [tensor("M", [], I64), tensor("cond", [], B), tensor("x", [5]), opt],
                       [seq("res", F)], opset=16)
    x = rng_array(np.random.default_rng(8), (5,))
    compiled = ember.compile(model)
    (res,) = compiled.run([np.array(5, np.int64), np.array(True), x, None])
    want = [np.array(0, np.float32)] + [x[:i + 1] for i in range(5)]
    assert len(res) == len(want)
    for got, w in zip(res, want):
        np.testing.assert_array_equal(got, w)


def test_optional_and_sequence_misuse_is_refused():
    model = make_model([helper.make_node("OptionalGetElement", ["o"], ["y"])],
                       [optional_model().graph.input[0]], [tensor("y", [3])], opset=18)
    with pytest.raises(ShapeError, match="OptionalGetElement.*the optional is empty"):
        from_onnx(model, {"o": None})
    model = make_model([helper.make_node("SplitToSequence", ["x"], ["s"]),
                        helper.make_node("Relu", ["s"], ["y"])],
                       [tensor("x", [2, 3])], [tensor("y", [3])])
    with pytest.raises(ModelError, match=r"input 0 \('s'\) is a sequence; Relu takes tensors"):
        from_onnx(model)
    model = make_model([helper.make_node("SplitToSequence", ["x"], ["s"]),
                        helper.make_node("SequenceAt", ["s", "five"], ["y"])],
                       [tensor("x", [2, 3])], [tensor("y", [1, 3])],
                       [const("five", np.int64(5))])
    with pytest.raises(ShapeError, match=r"position 5 is out of range for a "
                                         r"sequence of 2 tensors \(expected -2..1\)"):
        from_onnx(model)
    model = make_model([helper.make_node("SplitToSequence", ["x"], ["y"])],
                       [tensor("x", [2, 3])], [tensor("y", [2, 3])])
    with pytest.raises(ModelError, match="'y' is declared a tensor but the graph computes a "
                                         "sequence"):
        from_onnx(model)
    model = make_model([helper.make_node("SequenceEmpty", [], ["s"], dtype=I64),
                        helper.make_node("SequenceInsert", ["s", "x"], ["y"])],
                       [tensor("x", [3])], [seq("y", I64)])
    with pytest.raises(ModelError, match="a float32 tensor cannot join a sequence of int64"):
        from_onnx(model)


# a loop as torch exports it --------------------------------------------------------------
def test_torch_scripted_loop_over_a_symbolic_length():
    # torch.jit.script + torch.onnx.export: Loop with the trip count from Shape(x), a
    # SequenceEmpty carried through SequenceInsert, then ConcatFromSequence
    torch = pytest.importorskip("torch")
    import io
    import warnings

    import onnx

    class Recurrent(torch.nn.Module):
        def forward(self, x):
            h = torch.zeros(x.shape[1])
            outs = []
            for t in range(x.shape[0]):
                h = torch.tanh(h * 0.5 + x[t])
                outs.append(h)
            return h, torch.stack(outs)

    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(torch.jit.script(Recurrent()), (torch.randn(4, 3),), buffer,
                          input_names=["x"], output_names=["h", "hs"], opset_version=17,
                          dynamo=False, dynamic_axes={"x": {0: "T"}})
    model = onnx.load_from_string(buffer.getvalue())
    assert "Loop" in [n.op_type for n in model.graph.node]
    compiled = ember.compile(model)
    rng = np.random.default_rng(9)
    for length in (4, 6):
        x = rng_array(rng, (length, 3))
        h, hs = compiled.run([x])
        want_h, want = np.zeros(3, np.float32), []
        for t in range(length):
            want_h = np.tanh(want_h * np.float32(0.5) + x[t])
            want.append(want_h)
        np.testing.assert_allclose(h, want_h, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(hs, np.stack(want), rtol=1e-5, atol=1e-6)


# malformed loops, scans and sequence ops ------------------------------------------------
def _body(nodes, inputs, outputs, inits=()):
    return helper.make_graph(nodes, "body", inputs, outputs, list(inits))


def _scan(body, inputs, input_infos, outputs, **attrs):
    node = helper.make_node("Scan", inputs, [o.name for o in outputs], body=body, **attrs)
    return make_model([node], input_infos, outputs)


def _add_body(n_in=2):
    names = ["s", "xt", "yt"][:n_in]
    return _body([helper.make_node("Add", ["s", "xt"], ["s_out"]),
                  helper.make_node("Identity", ["s_out"], ["o"])],
                 [tensor(n, [3]) for n in names], [tensor("s_out", [3]), tensor("o", [3])])


def _loop(body, inputs=("M", "cond", "y0"), outputs=("y",), inits=None):
    inits = inits if inits is not None else [const("M", np.array(2, np.int64)),
                                             const("cond", np.array(True))]
    node = helper.make_node("Loop", list(inputs), list(outputs), body=body)
    return make_model([node], [tensor("y0", [2])], [tensor(o, ["d"]) for o in outputs], inits)


def _loop_body(extra_nodes=(), scan="y_out", cond="c_in", more_inputs=()):
    return _body([helper.make_node("Identity", [cond], ["c_out"]),
                  helper.make_node("Neg", ["y_in"], ["y_out"]), *extra_nodes],
                 [tensor("i", [], I64), tensor("c_in", [], B), tensor("y_in", [2]),
                  *more_inputs],
                 [tensor("c_out", None, B), tensor("y_out", [2]), tensor(scan, None)])


def _seq_model(nodes, out, inits=(), x_shape=(2, 3)):
    return make_model(nodes, [tensor("x", list(x_shape))], [out], inits)


MALFORMED = {
    "scan inputs and body disagree": (
        lambda: _scan(_add_body(3), ["s0", "x"], [tensor("s0", [3]), tensor("x", [2, 3])],
                      [tensor("s", [3]), tensor("os", [2, 3])], num_scan_inputs=1),
        ModelError, r"2 inputs, num_scan_inputs 1 and a body of 3 inputs do not agree"),
    "scan axes of the wrong length": (
        lambda: _scan(_add_body(), ["s0", "x"], [tensor("s0", [3]), tensor("x", [2, 3])],
                      [tensor("s", [3]), tensor("os", [2, 3])], num_scan_inputs=1,
                      scan_input_axes=[0, 1]),
        ModelError, r"'scan_input_axes' has 2 entries, expected 1"),
    "scan input axis out of range": (
        lambda: _scan(_add_body(), ["s0", "x"], [tensor("s0", [3]), tensor("x", [2, 3])],
                      [tensor("s", [3]), tensor("os", [2, 3])], num_scan_inputs=1,
                      scan_input_axes=[2]),
        ShapeError, r"scan_input_axes\[0\] = 2 is out of range for rank 2"),
    "scan output axis out of range": (
        lambda: _scan(_add_body(), ["s0", "x"], [tensor("s0", [3]), tensor("x", [2, 3])],
                      [tensor("s", [3]), tensor("os", [2, 3])], num_scan_inputs=1,
                      scan_output_axes=[-3]),
        ShapeError, r"scan_output_axes\[0\] = -3 is out of range for rank 2"),
    "loop body with too few inputs": (
        lambda: _loop(_body([helper.make_node("Identity", ["c_in"], ["c_out"])],
                            [tensor("i", [], I64), tensor("c_in", [], B)],
                            [tensor("c_out", [], B)])),
        ModelError, r"the body takes 2 inputs; it must take 2 \+ 1"),
    "loop trip count with two elements": (
        lambda: _loop(_loop_body(), inits=[const("M", np.array([2, 2], np.int64)),
                                           const("cond", np.array(True))],
                      outputs=("y", "ys")),
        ModelError, r"'M' must be a tensor with one element"),
    "loop scan output changing shape": (
        lambda: _loop(_loop_body([helper.make_node("Add", ["i", "one"], ["n"]),
                                  helper.make_node("Unsqueeze", ["n", "ax"], ["n1"]),
                                  helper.make_node("Expand", ["one_f", "n1"], ["grow"])],
                                 scan="grow"),
                      inits=[const("M", np.array(2, np.int64)), const("cond", np.array(True)),
                             const("one", np.int64(1)), const("one_f", np.float32(1)),
                             const("ax", np.array([0], np.int64))],
                      outputs=("y", "ys")),
        ShapeError, r"the scan output 'ys' has different shapes in different iterations: "
                    r"\[\(1,\), \(2,\)\]"),
    "loop condition of two elements": (
        lambda: _loop(_body([helper.make_node("Identity", ["two_c"], ["c_out"]),
                             helper.make_node("Neg", ["y_in"], ["y_out"])],
                            [tensor("i", [], I64), tensor("c_in", [], B), tensor("y_in", [2])],
                            [tensor("c_out", None, B), tensor("y_out", [2])]),
                      inits=[const("M", np.array(2, np.int64)), const("cond", np.array(True)),
                             const("two_c", np.array([True, True]))]),
        ModelError, r"the body's condition must be a tensor with one element"),
    "loop of no iteration without a declared scan shape": (
        lambda: _loop(_loop_body(), inits=[const("M", np.array(0, np.int64)),
                                           const("cond", np.array(True))],
                      outputs=("y", "ys")),
        UnsupportedModelError, r"scan output 'y_out' declares no static shape"),
    "sequence op on a tensor": (
        lambda: _seq_model([helper.make_node("SequenceLength", ["x"], ["n"])],
                           tensor("n", [], I64)),
        ModelError, r"SequenceLength\): input 0 \('x'\) must be a sequence"),
    "tensor input given a sequence": (
        lambda: _seq_model([helper.make_node("SplitToSequence", ["x"], ["s"]),
                            helper.make_node("SequenceInsert", ["s", "s"], ["y"])],
                           seq("y", F)),
        ModelError, r"SequenceInsert\): input 1 must be a tensor"),
    "position of two elements": (
        lambda: _seq_model([helper.make_node("SplitToSequence", ["x"], ["s"]),
                            helper.make_node("SequenceErase", ["s", "p"], ["y"])],
                           seq("y", F), [const("p", np.array([0, 0], np.int64))]),
        ModelError, r"'position' must be an int32 or int64 scalar"),
    "erase from an empty sequence": (
        lambda: _seq_model([helper.make_node("SequenceEmpty", [], ["s"]),
                            helper.make_node("SequenceErase", ["s"], ["y"])], seq("y", F)),
        ShapeError, r"SequenceErase\): the sequence is empty"),
    "split axis out of range": (
        lambda: _seq_model([helper.make_node("SplitToSequence", ["x"], ["y"], axis=2)],
                           seq("y", F)),
        ShapeError, r"axis 2 is out of range for rank 2"),
    "split of size zero": (
        lambda: _seq_model([helper.make_node("SplitToSequence", ["x", "z"], ["y"])],
                           seq("y", F), [const("z", np.int64(0))]),
        ShapeError, r"split 0 must be positive"),
    "split sizes not adding up": (
        lambda: _seq_model([helper.make_node("SplitToSequence", ["x", "z"], ["y"])],
                           seq("y", F), [const("z", np.array([1, 2], np.int64))]),
        ShapeError, r"split sizes \(1, 2\) do not add up to dimension 0 \(2\)"),
    "concatenating an empty sequence": (
        lambda: _seq_model([helper.make_node("SequenceEmpty", [], ["s"]),
                            helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0)],
                           tensor("y", ["d"])),
        ShapeError, r"ConcatFromSequence\): the sequence is empty"),
    "new axis out of range": (
        lambda: _seq_model([helper.make_node("SplitToSequence", ["x"], ["s"]),
                            helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=3,
                                             new_axis=1)], tensor("y", ["d"])),
        ShapeError, r"axis 3 is out of range for new_axis on rank 2"),
    "sequence output declared of another type": (
        lambda: _seq_model([helper.make_node("SplitToSequence", ["x"], ["y"])],
                           seq("y", I64)),
        ModelError, r"'y' is declared a sequence of int64 but the graph computes one of "
                    r"float32"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_control_flow_and_sequences_are_refused(case):
    build, error, match = MALFORMED[case]
    with pytest.raises(error, match=match):
        from_onnx(build(), evaluate=evaluate_node)


def test_sequence_map_inputs_of_different_lengths_are_refused():
    body = _body([helper.make_node("Add", ["a", "b"], ["c"])], [tensor("a", None),
                                                              tensor("b", None)],
                 [tensor("c", None)])
    model = make_model([helper.make_node("SequenceMap", ["xs", "ys"], ["zs"], body=body)],
                       [seq("xs", F), seq("ys", F)], [seq("zs", F)])
    with pytest.raises(ShapeError, match="input 1 has 1 tensors, input 0 has 2"):
        from_onnx(model, {"xs": [(2,), (2,)], "ys": [(2,)]})
    graph, layouts = import_onnx(model, {"xs": [], "ys": []})       # empty in, empty out
    assert layouts == (SeqLayout(()),) and graph.outputs == ()


def test_containers_where_tensors_belong_are_refused():
    # a sequence scanned by Scan, a sequence as a Loop's scan output, an optional of an
    # optional, a sequence of sequences as a graph input, a map input
    body = _add_body()
    model = make_model([helper.make_node("SplitToSequence", ["x"], ["xs"]),
                        helper.make_node("Scan", ["s0", "xs"], ["s", "os"], body=body,
                                         num_scan_inputs=1)],
                       [tensor("s0", [3]), tensor("x", [2, 3])],
                       [tensor("s", [3]), tensor("os", [2, 3])])
    with pytest.raises(ModelError, match=r"Scan\): scan input 0 must be a tensor"):
        from_onnx(model)
    loop_body = _body([helper.make_node("Identity", ["c_in"], ["c_out"]),
                       helper.make_node("SequenceConstruct", ["y_in"], ["y_seq"]),
                       helper.make_node("Identity", ["y_in"], ["y_out"])],
                      [tensor("i", [], I64), tensor("c_in", [], B), tensor("y_in", [2])],
                      [tensor("c_out", [], B), tensor("y_out", [2]), seq("y_seq", F)])
    with pytest.raises(UnsupportedModelError, match="a scan output that is not a tensor"):
        from_onnx(_loop(loop_body, outputs=("y", "ys")))
    opt_type = helper.make_optional_type_proto(helper.make_tensor_type_proto(F, [2]))
    model = make_model([helper.make_node("Optional", ["o"], ["oo"]),
                        helper.make_node("OptionalGetElement", ["oo"], ["y"])],
                       [helper.make_value_info("o", opt_type)], [tensor("y", [2])], opset=18)
    with pytest.raises(UnsupportedModelError, match="an optional of an optional"):
        from_onnx(model, {"o": (2,)})
    nested = helper.make_sequence_type_proto(helper.make_sequence_type_proto(
        helper.make_tensor_type_proto(F, None)))
    model = make_model([helper.make_node("Identity", ["s"], ["y"])],
                       [helper.make_value_info("s", nested)],
                       [helper.make_value_info("y", nested)])
    with pytest.raises(UnsupportedOpError, match="'s': sequences of sequences or optionals"):
        from_onnx(model, {"s": [[(2,)]]})
    map_type = helper.make_map_type_proto(TensorProto.INT64, helper.make_tensor_type_proto(F,
                                                                                         [2]))
    with pytest.raises(ArgumentError, match="input 'm': values of kind map_type are not "
                                            "supported"):
        flatten_feed("m", map_type, {1: np.zeros(2)})


def test_sequence_map_of_an_empty_sequence_needs_a_declared_type():
    body = _body([helper.make_node("Neg", ["a"], ["b"])], [tensor("a", None)],
                 [helper.make_value_info("b", helper.make_tensor_type_proto(0, None))])
    model = make_model([helper.make_node("SequenceMap", ["xs"], ["ys"], body=body)],
                       [seq("xs", F)], [seq("ys", F)])
    with pytest.raises(ModelError, match="body output 0 has no declared element type"):
        from_onnx(model, {"xs": []})
    (y,) = ember.compile(model).run([[np.ones(2, np.float32)]])
    np.testing.assert_array_equal(y, [-np.ones(2, np.float32)])


def test_a_long_unrolled_loop_compiles():
    # 300 iterations of y = tanh(y * 0.5): 600 elementwise ops in one chain, fused in groups
    # of a bounded size (one kernel for all would be an expression too deep to compile)
    body = _body([helper.make_node("Identity", ["c_in"], ["c_out"]),
                  helper.make_node("Mul", ["y_in", "half"], ["m"]),
                  helper.make_node("Tanh", ["m"], ["y_out"])],
                 [tensor("i", [], I64), tensor("c_in", [], B), tensor("y_in", [2])],
                 [tensor("c_out", [], B), tensor("y_out", [2])], [const("half", np.float32(0.5))])
    model = _loop(body, inits=[const("M", np.array(300, np.int64)), const("cond", np.array(True))])
    y0 = rng_array(np.random.default_rng(10), (2,))
    (got,) = ember.compile(model).run([y0])
    want = y0
    for _ in range(300):
        want = np.tanh(want * np.float32(0.5))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
