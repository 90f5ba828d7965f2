"""Normalization ops against onnxruntime, fused schedule structure and error paths."""

import numpy as np
import pytest

import ember
from ember.errors import ShapeError, UnsupportedOpError
from ember.graph.ir import GraphBuilder, Node, Value, tensor_type
from ember.lowering.kernel import group_compute, schedule_for
from ember.ops.registry import get_op
from ember.target import Target
from tests.ops.onnx_ref import check_op, ember_run

rng = np.random.default_rng(5)


def randn(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype("float32")


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (4, 3), (2, 3, 33)])
def test_batch_norm(shape: tuple) -> None:
    c = shape[1]
    var = np.abs(randn(c)) + 0.1
    check_op("BatchNormalization", [randn(*shape), randn(c), randn(c), randn(c), var],
             {"epsilon": 1e-3}, rtol=1e-5, atol=1e-6)


def test_batch_norm_large_is_parallel() -> None:
    x, scale, bias, mean = randn(2, 16, 32, 32), randn(16), randn(16), randn(16)
    var = np.abs(randn(16)) + 0.1
    (got,) = ember_run("BatchNormalization", [x, scale, bias, mean, var])
    shape = (1, 16, 1, 1)
    want = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + 1e-5) * \
        scale.reshape(shape) + bias.reshape(shape)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("axis", [-1, 1, 2, 0])
def test_layer_norm(axis: int) -> None:
    x = randn(2, 3, 4, 21)
    tail = x.shape[axis % 4:]
    check_op("LayerNormalization", [x, randn(*tail), randn(*tail)], {"axis": axis,
             "epsilon": 1e-3}, num_outputs=3, opset=17, rtol=1e-4, atol=1e-5)


def test_layer_norm_broadcast_params_and_no_bias() -> None:
    x = randn(3, 4, 40)
    check_op("LayerNormalization", [x, randn(40)], {"axis": -2}, opset=17, rtol=1e-4,
             atol=1e-5)
    check_op("LayerNormalization", [x, randn(1, 40), randn(40)], {"axis": -2}, opset=17,
             rtol=1e-4, atol=1e-5)


def test_layer_norm_large_rows() -> None:
    x, scale, bias = randn(64, 768) * 3 + 1, randn(768), randn(768)
    y, mean, inv = ember_run("LayerNormalization", [x, scale, bias])
    mu = x.mean(-1, keepdims=True)
    sigma = np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(mean, mu, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(inv, 1 / sigma, rtol=1e-4)
    np.testing.assert_allclose(y, (x - mu) / sigma * scale + bias, rtol=1e-4, atol=1e-4)


def test_instance_norm() -> None:
    check_op("InstanceNormalization", [randn(2, 3, 4, 5), randn(3), randn(3)],
             {"epsilon": 1e-3}, rtol=1e-4, atol=1e-5)
    check_op("InstanceNormalization", [randn(2, 4, 50), randn(4), randn(4)], rtol=1e-4,
             atol=1e-5)


def test_mean_variance_normalization() -> None:
    x = randn(2, 3, 4, 5)
    check_op("MeanVarianceNormalization", [x], rtol=1e-4, atol=1e-5)
    check_op("MeanVarianceNormalization", [x], {"axes": [1, -1]}, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("p", [1, 2])
def test_lp_normalization(p: int) -> None:
    x = randn(3, 4, 19)
    for axis in (-1, 0, 1):
        check_op("LpNormalization", [x], {"p": p, "axis": axis}, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("p", [1, 2])
def test_lp_normalization_of_a_zero_row_is_zero(p: int) -> None:
    x = randn(2, 3, 5)
    x[1, :, 2] = 0.0                                  # one all-zero row along axis 1
    (got,) = ember_run("LpNormalization", [x], {"p": p, "axis": 1})
    norm = np.abs(x).sum(1, keepdims=True) if p == 1 else np.sqrt((x * x).sum(1, keepdims=True))
    with np.errstate(invalid="ignore"):
        want = np.where(norm == 0, 0, x / norm)
    assert not np.isnan(got).any()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_layer_norm_schedule_is_one_row_loop() -> None:
    opdef = get_op("LayerNormalization")
    full = opdef.complete_attrs({})
    inputs = [Value("x", tensor_type((64, 768), "float32")),
              Value("s", tensor_type((768,), "float32")),
              Value("b", tensor_type((768,), "float32"))]
    types = opdef.infer(full, [v.type for v in inputs])
    outputs = [Value(f"y{i}", t) for i, t in enumerate(types)]
    placeholders, env = group_compute([Node("LayerNormalization", "ln", tuple(inputs),
                                            tuple(outputs), full)], inputs)
    y = env[outputs[0]]  # only Y used: both statistics are computed per row inside its loop
    text = str(ember.lower(schedule_for(opdef, [y], Target("llvm")), [*placeholders, y]))
    loops = [line for line in text.splitlines() if line.strip().startswith("for ")]
    assert "parallel" in loops[0] and loops[0].startswith("  for ")
    assert all(line.startswith("    ") for line in loops[1:])
    assert sum("vectorized" in line for line in loops) >= 5


def test_errors() -> None:
    b = GraphBuilder("g")
    x = b.input("x", (2, 3, 4), "float32")
    c3 = b.input("c3", (3,), "float32")
    c4 = b.input("c4", (4,), "float32")
    with pytest.raises(UnsupportedOpError, match="training_mode=1"):
        b.add("BatchNormalization", [x, c3, c3, c3, c3], {"training_mode": 1})
    with pytest.raises(ShapeError, match=r"node 'batchnormalization_1'.*scale must have shape"):
        b.add("BatchNormalization", [x, c4, c3, c3, c3])
    with pytest.raises(ShapeError, match=r"LayerNormalization.*Scale of shape \(3,\)"):
        b.add("LayerNormalization", [x, c3])
    with pytest.raises(ShapeError, match="InstanceNormalization.*rank >= 3"):
        b.add("InstanceNormalization", [b.input("m", (2, 3), "float32"), c3, c3])
    with pytest.raises(UnsupportedOpError, match="p must be 1 or 2"):
        b.add("LpNormalization", [x], {"p": 3})
    with pytest.raises(ShapeError, match="axis 3 is out of range"):
        b.add("LayerNormalization", [x, c4], {"axis": 3})
    with pytest.raises(ShapeError, match="needs float"):
        b.add("InstanceNormalization", [b.input("i", (2, 3, 4), "int32"), c3, c3])
