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
