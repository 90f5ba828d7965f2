"""RNN, LSTM and GRU against onnxruntime over directions, optional inputs and attributes."""

import numpy as np
import pytest

from ember.errors import ShapeError, UnsupportedOpError
from ember.graph.ir import GraphBuilder
from tests.ops.onnx_ref import check_op, ember_run, onnx_run

RNG = np.random.default_rng(5)
T, B, I, H = 5, 2, 6, 8
TOL = {"rtol": 1e-4, "atol": 1e-5}


def rand(*shape: int) -> np.ndarray:
    return (RNG.standard_normal(shape) * 0.5).astype("float32")


def lstm_inputs(dirs: int, bias=True, lens=None, init=False, peep=False):
    inputs = [rand(T, B, I), rand(dirs, 4 * H, I), rand(dirs, 4 * H, H),
              rand(dirs, 8 * H) if bias else None, lens,
              rand(dirs, B, H) if init else None, rand(dirs, B, H) if init else None,
              rand(dirs, 3 * H) if peep else None]
    while inputs[-1] is None:
        inputs.pop()
    return inputs


def gru_inputs(dirs: int, bias=True, lens=None, init=False):
    inputs = [rand(T, B, I), rand(dirs, 3 * H, I), rand(dirs, 3 * H, H),
              rand(dirs, 6 * H) if bias else None, lens, rand(dirs, B, H) if init else None]
    while inputs[-1] is None:
        inputs.pop()
    return inputs


LENS = np.array([5, 3], "int32")


@pytest.mark.parametrize("direction, kwargs, attrs", [
    ("forward", {}, {}),
    ("reverse", {"bias": False}, {}),
    ("bidirectional", {"init": True, "peep": True}, {}),
    ("bidirectional", {"lens": LENS}, {}),
    ("forward", {"init": True}, {"clip": 0.7, "input_forget": 1}),
    ("forward", {}, {"activations": ["HardSigmoid", "Relu", "Tanh"],
                     "activation_alpha": [0.3], "activation_beta": [0.4]}),
])
def test_lstm_matches_onnxruntime(direction, kwargs, attrs):
    dirs = 2 if direction == "bidirectional" else 1
    check_op("LSTM", lstm_inputs(dirs, **kwargs),
             {"hidden_size": H, "direction": direction, **attrs}, num_outputs=3, **TOL)


@pytest.mark.parametrize("direction, kwargs, attrs", [
    ("forward", {}, {}),
    ("reverse", {"init": True}, {"linear_before_reset": 1}),
    ("bidirectional", {"lens": LENS}, {"clip": 0.5}),
    ("bidirectional", {"bias": False}, {"linear_before_reset": 1}),
])
def test_gru_matches_onnxruntime(direction, kwargs, attrs):
    dirs = 2 if direction == "bidirectional" else 1
    check_op("GRU", gru_inputs(dirs, **kwargs),
             {"hidden_size": H, "direction": direction, **attrs}, num_outputs=2, **TOL)


def rnn_inputs(dirs: int, bias=True, lens=None, init=False):
    inputs = [rand(T, B, I), rand(dirs, H, I), rand(dirs, H, H),
              rand(dirs, 2 * H) if bias else None, lens, rand(dirs, B, H) if init else None]
    while inputs[-1] is None:
        inputs.pop()
    return inputs


@pytest.mark.parametrize("direction, kwargs, attrs", [
    ("forward", {}, {}),
    ("reverse", {"init": True}, {}),
    ("bidirectional", {"lens": LENS, "init": True}, {}),
    ("reverse", {"lens": LENS, "bias": False}, {"clip": 0.4}),
    ("forward", {}, {"activations": ["Relu"]}),
    ("bidirectional", {}, {"activations": ["LeakyRelu", "Sigmoid"], "activation_alpha": [0.2]}),
])
def test_simple_rnn_matches_onnxruntime(direction, kwargs, attrs):
    dirs = 2 if direction == "bidirectional" else 1
    check_op("RNN", rnn_inputs(dirs, **kwargs),
             {"hidden_size": H, "direction": direction, **attrs}, num_outputs=2, **TOL)


def test_batch_major_layout_matches_sequence_major():
    """layout=1 (onnxruntime lacks it): same numbers as layout 0 with transposed tensors."""
    x, w, r, bias = rand(T, B, I), rand(2, 4 * H, I), rand(2, 4 * H, H), rand(2, 8 * H)
    h0, c0 = rand(2, B, H), rand(2, B, H)
    attrs = {"hidden_size": H, "direction": "bidirectional"}
    y, yh, yc = onnx_run("LSTM", [x, w, r, bias, None, h0, c0], attrs, num_outputs=3)
    got = ember_run("LSTM", [x.transpose(1, 0, 2), w, r, bias, None, h0.transpose(1, 0, 2),
                             c0.transpose(1, 0, 2)], {**attrs, "layout": 1})
    np.testing.assert_allclose(got[0], y.transpose(2, 0, 1, 3), **TOL)
    np.testing.assert_allclose(got[1], yh.transpose(1, 0, 2), **TOL)
    np.testing.assert_allclose(got[2], yc.transpose(1, 0, 2), **TOL)


def test_rnn_errors():
    b = GraphBuilder("bad")
    x = b.input("x", (T, B, I), "float32")
    w, r = b.constant("w", rand(1, 4 * H, I)), b.constant("r", rand(1, 4 * H, H))
    with pytest.raises(UnsupportedOpError, match="direction='sideways'"):
        b.add("LSTM", [x, w, r], {"hidden_size": H, "direction": "sideways"})
    with pytest.raises(ShapeError, match=r"node 'lstm_1' \(LSTM\): input R has shape"):
        b.add("LSTM", [x, w, b.constant("r2", rand(1, 4 * H, H + 1))], {"hidden_size": H})
    with pytest.raises(ShapeError, match="input W has shape"):
        b.add("GRU", [x, w, r], {"hidden_size": H})
    with pytest.raises(ShapeError, match="input W has shape"):
        b.add("RNN", [x, w, r], {"hidden_size": H})
    with pytest.raises(UnsupportedOpError, match="activation 'gelu'"):
        b.add("LSTM", [x, w, r], {"hidden_size": H, "activations": ["Gelu", "Tanh", "Tanh"]})
    with pytest.raises(UnsupportedOpError, match="layout=2"):
        b.add("LSTM", [x, w, r], {"hidden_size": H, "layout": 2})


@pytest.mark.parametrize("kind, direction, attrs, lens", [
    ("LSTM", "bidirectional", {}, np.array([7, 4, 1], "int32")),
    ("LSTM", "forward", {"clip": 0.8}, None),
    ("GRU", "reverse", {"linear_before_reset": 1}, None),
    ("GRU", "bidirectional", {}, np.array([2, 7, 5], "int32")),
    ("RNN", "bidirectional", {"clip": 1.5}, np.array([3, 7, 6], "int32")),
])
def test_packed_weights_match_onnxruntime(kind, direction, attrs, lens):
    """Weights as constants (packed at compile time), hidden sizes that are not a multiple
    of the 32-unit blocks and a gate count that does not fill the last input panel."""
    from ember.lowering.kernel import run_op

    t, b, i, h = 7, 3, 36, 20
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[kind]
    dirs = 2 if direction == "bidirectional" else 1
    rng = np.random.default_rng(11)

    def r(*shape):
        return (rng.standard_normal(shape) * 0.4).astype("float32")

    inputs = [r(t, b, i), r(dirs, gates * h, i), r(dirs, gates * h, h), r(dirs, 2 * gates * h),
              lens]
    full = {"hidden_size": h, "direction": direction, **attrs}
    outputs = 3 if kind == "LSTM" else 2
    want = onnx_run(kind, inputs, full, num_outputs=outputs)
    got = run_op(kind, inputs, full, constant=[1, 2, 3])
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, **TOL)


def test_lstm_wide_recurrent_product_split_over_threads():
    """H = 256: the per-step recurrent product is wide enough to run split over 2 threads
    (RECURRENT_PARALLEL_MIN); the numbers must not depend on it."""
    from ember.ops.rnn import RECURRENT_PARALLEL_MIN
    from ember.runtime.threadpool import num_threads, set_num_threads

    t, b, i, h = 3, 2, 8, 256
    assert 4 * h * h >= RECURRENT_PARALLEL_MIN
    rng = np.random.default_rng(11)
    x = rng.standard_normal((t, b, i)).astype("float32")
    w = (rng.standard_normal((1, 4 * h, i)) * 0.3).astype("float32")
    r = (rng.standard_normal((1, 4 * h, h)) * 0.06).astype("float32")
    bias = (rng.standard_normal((1, 8 * h)) * 0.1).astype("float32")
    refs = onnx_run("LSTM", [x, w, r, bias], {"hidden_size": h}, num_outputs=3)
    before = num_threads()
    set_num_threads(2)
    try:
        got = ember_run("LSTM", [x, w, r, bias], {"hidden_size": h})
    finally:
        set_num_threads(before)
    for g, want in zip(got, refs):
        np.testing.assert_allclose(g, want, rtol=1e-4, atol=1e-4)
