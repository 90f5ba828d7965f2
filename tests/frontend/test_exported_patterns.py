"""Patterns from real exported models (transformers' BERT, torch's LSTM, Paddle, audio
front ends), built the way the exporters write them and checked against onnxruntime."""

from __future__ import annotations

import pickle

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

import ember
from ember.errors import InternalError

ort = pytest.importorskip("onnxruntime")


def model_of(nodes, inputs, outputs, initializers=(), opset=17):
    graph = h.make_graph(nodes, "pattern", inputs, outputs, list(initializers))
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])
    onnx.checker.check_model(model)
    return model


def reference(model, feeds):
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def const(name, array):
    return nh.from_array(np.asarray(array), name)


def assert_matches(model, feeds, compiled=None, rtol=1e-5, atol=1e-5):
    compiled = compiled if compiled is not None else ember.compile(model)
    got = compiled.run(feeds)
    want = reference(model, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    return compiled


def test_gather_int64_indices_from_reshape():
    """Reshape([2,64] -> [128,1]) then Gather with int64 indices: the Gather's 64-bit index
    value is inlined into the Reshape's 32-bit index arithmetic."""
    rng = np.random.default_rng(0)
    model = model_of(
        [h.make_node("Reshape", ["x", "s"], ["r"]),
         h.make_node("Gather", ["r", "i"], ["y"], axis=0)],
        [h.make_tensor_value_info("x", T.INT64, [2, 64]),
         h.make_tensor_value_info("i", T.INT64, [5])],
        [h.make_tensor_value_info("y", T.INT64, [5, 1])],
        [const("s", np.array([128, 1], np.int64))])
    feeds = {"x": rng.integers(-1000, 1000, (2, 64)).astype(np.int64),
             "i": rng.integers(-128, 128, 5).astype(np.int64)}
    assert_matches(model, feeds)


def test_bert_padding_mask():
    """transformers' extended attention mask: Cast -> Flatten -> Gather -> Reshape -> And ->
    Where over the attention scores."""
    rng = np.random.default_rng(1)
    batch, seq = 2, 8
    model = model_of(
        [h.make_node("Cast", ["mask"], ["m_bool"], to=T.BOOL),
         h.make_node("Flatten", ["m_bool"], ["flat"], axis=0),
         h.make_node("Gather", ["flat", "pos"], ["picked"], axis=1),
         h.make_node("Reshape", ["picked", "shape4"], ["m4"]),
         h.make_node("And", ["m4", "causal"], ["keep"]),
         h.make_node("Where", ["keep", "scores", "neg"], ["masked"]),
         h.make_node("Softmax", ["masked"], ["probs"], axis=-1)],
        [h.make_tensor_value_info("mask", T.INT64, [batch, seq]),
         h.make_tensor_value_info("scores", T.FLOAT, [batch, 2, seq, seq])],
        [h.make_tensor_value_info("probs", T.FLOAT, [batch, 2, seq, seq])],
        [const("pos", np.arange(batch * seq, dtype=np.int64).reshape(1, -1)),
         const("shape4", np.array([batch, 1, 1, seq], np.int64)),
         const("causal", np.tril(np.ones((seq, seq), bool))),
         const("neg", np.array(-1e4, np.float32))])
    mask = np.ones((batch, seq), np.int64)
    mask[1, 5:] = 0                                       # padding of the second sequence
    feeds = {"mask": mask, "scores": rng.standard_normal((batch, 2, seq, seq), np.float32)}
    assert_matches(model, feeds)


def test_lstm_zero_initial_state_built_in_graph():
    """torch exports `h0 = torch.zeros(layers, batch, hidden)` as ConstantOfShape over the
    input's batch; folded to a constant, it is fused into the LSTM kernel's scan."""
    rng = np.random.default_rng(2)
    steps, batch, features, hidden = 5, 2, 4, 3
    zero = nh.from_array(np.zeros(1, np.float32))
    model = model_of(
        [h.make_node("Shape", ["x"], ["shape"]),
         h.make_node("Gather", ["shape", "one"], ["b"], axis=0),
         h.make_node("Concat", ["layers", "b", "hid"], ["state_shape"], axis=0),
         h.make_node("ConstantOfShape", ["state_shape"], ["h0"], value=zero),
         h.make_node("LSTM", ["x", "W", "R", "B", "", "h0", "h0"], ["y", "y_h"],
                     hidden_size=hidden)],
        [h.make_tensor_value_info("x", T.FLOAT, [steps, batch, features])],
        [h.make_tensor_value_info("y", T.FLOAT, [steps, 1, batch, hidden]),
         h.make_tensor_value_info("y_h", T.FLOAT, [1, batch, hidden])],
        [const("W", rng.standard_normal((1, 4 * hidden, features)).astype(np.float32)),
         const("R", rng.standard_normal((1, 4 * hidden, hidden)).astype(np.float32)),
         const("B", rng.standard_normal((1, 8 * hidden)).astype(np.float32)),
         const("one", np.array([1], np.int64)), const("layers", np.array([1], np.int64)),
         const("hid", np.array([hidden], np.int64))], opset=14)
    feeds = {"x": rng.standard_normal((steps, batch, features)).astype(np.float32)}
    assert_matches(model, feeds)


def test_kernel_failure_names_the_group_and_nodes(monkeypatch):
    """A compiler bug inside a kernel's lowering names the fused group and its nodes, and
    survives the trip back from a worker process."""
    from ember.lowering import compile as lowering_compile

    def broken(group, target="llvm"):
        raise KeyError("Stage(h0)")

    monkeypatch.setattr(lowering_compile, "lower_kernels", broken)
    model = model_of([h.make_node("Relu", ["x"], ["y"], name="the_relu")],
                     [h.make_tensor_value_info("x", T.FLOAT, [4])],
                     [h.make_tensor_value_info("y", T.FLOAT, [4])])
    with pytest.raises(InternalError, match=r"fused group .*Relu.*nodes 'the_relu'.*KeyError"
                                            r".*Stage\(h0\).*in broken") as info:
        ember.compile(model, cache=False)
    again = pickle.loads(pickle.dumps(info.value))
    assert str(again) == str(info.value)


def paddle_style_model():
    """Paddle writes an unknown batch as -1; the flatten is Reshape(x, [0, -1])."""
    rng = np.random.default_rng(3)
    return model_of(
        [h.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
         h.make_node("Relu", ["c"], ["r"]),
         h.make_node("Reshape", ["r", "flat"], ["f"]),
         h.make_node("MatMul", ["f", "fc"], ["y"])],
        [h.make_tensor_value_info("x", T.FLOAT, [-1, 2, 5, 5])],
        [h.make_tensor_value_info("y", T.FLOAT, [-1, 3])],
        [const("w", rng.standard_normal((4, 2, 3, 3)).astype(np.float32)),
         const("flat", np.array([0, -1], np.int64)),
         const("fc", rng.standard_normal((100, 3)).astype(np.float32))])


def test_batch_declared_minus_one_with_input_shapes():
    model = paddle_style_model()
    rng = np.random.default_rng(4)
    compiled = ember.compile(model, input_shapes={"x": (3, 2, 5, 5)})
    assert isinstance(compiled, ember.driver.CompiledModel)
    assert_matches(model, {"x": rng.standard_normal((3, 2, 5, 5)).astype(np.float32)},
                   compiled, rtol=1e-4, atol=1e-4)


def test_batch_declared_minus_one_one_model_two_batches():
    model = paddle_style_model()
    rng = np.random.default_rng(5)
    compiled = ember.compile(model)             # no input_shapes: specialized per batch
    for batch in (1, 4, 1):
        feeds = {"x": rng.standard_normal((batch, 2, 5, 5)).astype(np.float32)}
        assert_matches(model, feeds, compiled, rtol=1e-4, atol=1e-4)
    assert compiled.compiles == 2               # batch 1 came from the cache
    with pytest.raises(ember.errors.ArgumentError, match=r"input 'x': shape \(1, 3, 5, 5\) "
                                                         r"does not fit the model's \(\?, 2, 5"):
        compiled.run({"x": np.zeros((1, 3, 5, 5), np.float32)})


def test_reshape_shape_computed_from_symbolic_dims():
    """GPT-2/BERT-style head split: Reshape(x, Concat(Shape(x)[0:2], [heads, -1])) with
    symbolic batch and sequence."""
    rng = np.random.default_rng(6)
    model = model_of(
        [h.make_node("Shape", ["x"], ["s"]),
         h.make_node("Slice", ["s", "zero", "two"], ["bs"]),
         h.make_node("Concat", ["bs", "heads"], ["new_shape"], axis=0),
         h.make_node("Reshape", ["x", "new_shape"], ["split"]),
         h.make_node("Transpose", ["split"], ["y"], perm=[0, 2, 1, 3])],
        [h.make_tensor_value_info("x", T.FLOAT, ["batch", "seq", 8])],
        [h.make_tensor_value_info("y", T.FLOAT, ["batch", 2, "seq", 4])],
        [const("zero", np.array([0], np.int64)), const("two", np.array([2], np.int64)),
         const("heads", np.array([2, -1], np.int64))])
    compiled = ember.compile(model)
    for batch, seq in ((1, 5), (3, 7)):
        assert_matches(model, {"x": rng.standard_normal((batch, seq, 8)).astype(np.float32)},
                       compiled)


def test_shape_deciding_value_computed_from_input_data():
    """Range's limit and a Reshape's shape computed from input values (a length tensor):
    a shape program computes them at run time and the main program is compiled per value."""
    rng = np.random.default_rng(7)
    model = model_of(
        [h.make_node("ReduceMax", ["lengths"], ["longest"], keepdims=0),
         h.make_node("Range", ["zero", "longest", "one"], ["positions"]),
         h.make_node("Cast", ["positions"], ["pf"], to=T.FLOAT),
         h.make_node("Unsqueeze", ["pf", "axis0"], ["row"]),
         h.make_node("Mul", ["row", "scale"], ["y"])],
        [h.make_tensor_value_info("lengths", T.INT64, [3]),
         h.make_tensor_value_info("scale", T.FLOAT, [2, 1])],
        [h.make_tensor_value_info("y", T.FLOAT, [2, "n"])],
        [const("zero", np.array(0, np.int64)), const("one", np.array(1, np.int64)),
         const("axis0", np.array([0], np.int64))])
    compiled = ember.compile(model)
    scale = rng.standard_normal((2, 1)).astype(np.float32)
    for lengths in ([3, 5, 2], [7, 1, 1], [2, 5, 3]):
        assert_matches(model, {"lengths": np.array(lengths, np.int64), "scale": scale}, compiled)
    # one shape program, and one main program per distinct longest length (5, 7)
    assert compiled.compiles == 3


def test_if_on_sample_rate_compiles_only_the_taken_branch():
    """An audio front end wholly inside If(sr == 16000): the branch not taken has shapes
    that do not fit the input, so it must be neither compiled nor run."""
    rng = np.random.default_rng(8)
    then_graph = h.make_graph([h.make_node("Reshape", ["x", "frames16"], ["t"])], "then", [],
                              [h.make_tensor_value_info("t", T.FLOAT, ["n", 16])])
    else_graph = h.make_graph([h.make_node("Reshape", ["x", "frames8"], ["e"])], "else", [],
                              [h.make_tensor_value_info("e", T.FLOAT, ["n", 5])])
    model = model_of(
        [h.make_node("Equal", ["sr", "rate16k"], ["is16k"]),
         h.make_node("If", ["is16k"], ["frames"], then_branch=then_graph,
                     else_branch=else_graph),
         h.make_node("ReduceSum", ["frames", "last"], ["y"], keepdims=0)],
        [h.make_tensor_value_info("x", T.FLOAT, ["samples"]),
         h.make_tensor_value_info("sr", T.INT64, [])],
        [h.make_tensor_value_info("y", T.FLOAT, ["n"])],
        [const("rate16k", np.array(16000, np.int64)), const("last", np.array([-1], np.int64)),
         const("frames16", np.array([-1, 16], np.int64)),
         const("frames8", np.array([-1, 5], np.int64))])
    compiled = ember.compile(model)
    for samples, rate in ((64, 16000), (15, 8000), (32, 16000)):
        feeds = {"x": rng.standard_normal(samples).astype(np.float32),
                 "sr": np.array(rate, np.int64)}
        assert_matches(model, feeds, compiled)
    # 64 samples do not make 5-sample frames: the else branch was never built for them
    mains = [s.program.graph for s in compiled._steps.values() if not s.names]
    assert len(mains) == 3


def test_specialization_errors():
    model = paddle_style_model()
    compiled = ember.compile(model)
    with pytest.raises(ember.errors.ArgumentError, match=r"takes 1 inputs \['x'\], got 2"):
        compiled.run([np.zeros((1, 2, 5, 5), np.float32)] * 2)
    with pytest.raises(ember.errors.ArgumentError, match=r"missing \['x'\], unknown \['y'\]"):
        compiled.run({"y": np.zeros((1, 2, 5, 5), np.float32)})
    fixed = ember.compile(model, input_shapes={"x": (2, 2, 5, 5)})
    with pytest.raises(ember.errors.ArgumentError,
                       match=r"input 'x': expected shape \(2, 2, 5, 5\), got \(1"):
        fixed.run({"x": np.zeros((1, 2, 5, 5), np.float32)})
    with pytest.raises(ember.errors.ShapeError,
                       match=r"input_shapes\['x'\]: dimension 0 is negative \(-1\)"):
        ember.compile(model, input_shapes={"x": (-1, 2, 5, 5)})


def test_from_onnx_outputs_and_bound_node_values():
    from ember.frontend.onnx import from_onnx

    model = paddle_style_model()
    relu = np.random.default_rng(9).random((2, 4, 5, 5), np.float32)
    graph = from_onnx(model, input_shapes={"x": (2, 2, 5, 5)}, constant_inputs={"r": relu})
    assert not {"Conv", "Relu"} & {n.op for n in graph.nodes}     # cut at the bound value
    (got,) = ember.compile(graph).run([np.zeros((2, 2, 5, 5), np.float32)])
    fc = nh.to_array(next(t for t in model.graph.initializer if t.name == "fc"))
    np.testing.assert_allclose(got, relu.reshape(2, -1) @ fc, rtol=1e-5, atol=1e-5)
    prefix = from_onnx(model, input_shapes={"x": (2, 2, 5, 5)}, outputs=["c"])
    assert [n.op for n in prefix.nodes] == ["Conv"]
    with pytest.raises(ember.errors.ArgumentError, match=r"outputs names \['nope'\]"):
        from_onnx(model, input_shapes={"x": (2, 2, 5, 5)}, outputs=["nope"])
    with pytest.raises(ember.errors.ArgumentError, match=r"constant_inputs names \['nope'\], "
                                                         "which are not graph inputs or node"):
        from_onnx(model, constant_inputs={"nope": relu})


def test_nonzero_of_run_time_data():
    """torch.nonzero / masked indexing: Gather rows by NonZero of a run-time mask."""
    rng = np.random.default_rng(10)
    model = model_of(
        [h.make_node("Greater", ["scores", "threshold"], ["mask"]),
         h.make_node("NonZero", ["mask"], ["idx"]),
         h.make_node("Squeeze", ["idx", "axis0"], ["rows"]),
         h.make_node("Gather", ["x", "rows"], ["picked"], axis=0),
         h.make_node("Relu", ["picked"], ["y"])],
        [h.make_tensor_value_info("scores", T.FLOAT, [6]),
         h.make_tensor_value_info("x", T.FLOAT, [6, 3])],
        [h.make_tensor_value_info("y", T.FLOAT, ["n", 3])],
        [const("threshold", np.array(0.0, np.float32)),
         const("axis0", np.array([0], np.int64))])
    compiled = ember.compile(model)
    x = rng.standard_normal((6, 3)).astype(np.float32)
    for _ in range(3):
        assert_matches(model, {"scores": rng.standard_normal(6).astype(np.float32), "x": x},
                       compiled)


@pytest.mark.parametrize("center", [0, 1])
def test_detector_postprocess_non_max_suppression(center):
    """YOLO/SSD-style post-processing: NMS over run-time boxes and scores, then the kept
    boxes gathered."""
    rng = np.random.default_rng(12 + center)
    batches, classes, count = 2, 3, 12
    model = model_of(
        [h.make_node("NonMaxSuppression", ["boxes", "scores", "limit", "iou", "floor"],
                     ["sel"], center_point_box=center),
         h.make_node("Gather", ["sel", "col2"], ["box_index"], axis=1),
         h.make_node("Gather", ["flat_boxes", "box_index"], ["kept"], axis=0)],
        [h.make_tensor_value_info("boxes", T.FLOAT, [batches, count, 4]),
         h.make_tensor_value_info("scores", T.FLOAT, [batches, classes, count]),
         h.make_tensor_value_info("flat_boxes", T.FLOAT, [count, 4])],
        [h.make_tensor_value_info("sel", T.INT64, ["k", 3]),
         h.make_tensor_value_info("kept", T.FLOAT, ["k", 4])],
        [const("limit", np.array([3], np.int64)), const("iou", np.array([0.3], np.float32)),
         const("floor", np.array([0.2], np.float32)), const("col2", np.array(2, np.int64))])
    compiled = ember.compile(model)
    corners = rng.random((batches, count, 2)).astype(np.float32)
    sizes = rng.random((batches, count, 2)).astype(np.float32) * 0.5
    boxes = np.concatenate([corners, corners + sizes], axis=2) if not center else \
        np.concatenate([corners, sizes], axis=2)
    feeds = {"boxes": boxes, "scores": rng.random((batches, classes, count), np.float32),
             "flat_boxes": rng.standard_normal((count, 4)).astype(np.float32)}
    assert_matches(model, feeds, compiled)


def test_top_k_with_k_computed_at_run_time():
    rng = np.random.default_rng(14)
    model = model_of(
        [h.make_node("ReduceMax", ["budget"], ["k0"], keepdims=1),
         h.make_node("Cast", ["k0"], ["k"], to=T.INT64),
         h.make_node("TopK", ["x", "k"], ["values", "indices"], axis=-1)],
        [h.make_tensor_value_info("x", T.FLOAT, [2, 9]),
         h.make_tensor_value_info("budget", T.FLOAT, [3])],
        [h.make_tensor_value_info("values", T.FLOAT, [2, "k"]),
         h.make_tensor_value_info("indices", T.INT64, [2, "k"])])
    compiled = ember.compile(model)
    for budget in ([1, 4, 2], [3, 3, 0]):
        assert_matches(model, {"x": rng.standard_normal((2, 9)).astype(np.float32),
                               "budget": np.array(budget, np.float32)}, compiled)


def test_data_dependent_errors():
    from ember.frontend.onnx import UnsupportedModelError, from_onnx
    from ember.frontend.onnx_dynamic import non_max_suppression

    model = model_of([h.make_node("NonZero", ["x"], ["idx"])],
                     [h.make_tensor_value_info("x", T.FLOAT, [4])],
                     [h.make_tensor_value_info("idx", T.INT64, [1, "n"])])
    with pytest.raises(UnsupportedModelError, match=r"NonZero.*output shape depends on the "
                                                    "values of its input") as info:
        from_onnx(model)
    assert info.value.dynamic_values == {"idx"}
    with pytest.raises(ember.errors.ShapeError, match=r"boxes \(2, 5, 3\) must be \(B, N, 4\)"):
        non_max_suppression({}, [np.zeros((2, 5, 3), np.float32),
                                 np.zeros((2, 1, 5), np.float32)])


def test_specializations_are_bounded():
    from ember.specialize import SpecializedModel

    model = paddle_style_model()
    compiled = SpecializedModel(model, ember.compile, max_programs=2)
    rng = np.random.default_rng(15)
    for batch in (1, 2, 3, 1):                   # batch 1 was dropped when 3 came
        feeds = {"x": rng.standard_normal((batch, 2, 5, 5)).astype(np.float32)}
        assert_matches(model, feeds, compiled, rtol=1e-4, atol=1e-4)
    assert compiled.compiles == 4 and len(compiled._steps) == 2


def test_binding_one_output_of_a_node():
    """A value bound by name wins even when its node has other outputs that are computed
    (an If returning N, C, D, H, W where only D, H, W decide shapes)."""
    from ember.frontend.onnx import from_onnx

    model = model_of([h.make_node("Split", ["x"], ["a", "b"], axis=0, num_outputs=2),
                      h.make_node("Add", ["a", "b"], ["y"])],
                     [h.make_tensor_value_info("x", T.FLOAT, [4])],
                     [h.make_tensor_value_info("y", T.FLOAT, [2])], opset=18)
    a = np.array([10.0, 20.0], np.float32)
    graph = from_onnx(model, constant_inputs={"a": a})
    x = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    (got,) = ember.compile(graph).run([x])
    np.testing.assert_array_equal(got, a + x[2:])
