"""fold_batch_norm: BatchNormalization folded into Conv / Gemm / MatMul(+Add) weights."""

from collections.abc import Sequence

import numpy as np
import pytest

from ember.graph.ir import Value
from ember.graph.passes.fold_batch_norm import fold_batch_norm
from tests.graph.runner import Builder, assert_same_results

CONV = {"kernel_shape": (3, 3), "strides": (1, 1), "pads": (1, 1, 1, 1), "dilations": (1, 1),
        "group": 1}


def _bn(b: Builder, x: Value, channels: int, seed: int, eps: float = 1e-3) -> Value:
    params = [b.const("scale", (channels,), seed), b.const("bias", (channels,), seed + 1),
              b.const("mean", (channels,), seed + 2),
              b.const("var", (channels,), seed + 3, positive=True)]
    (y,) = b.node("BatchNormalization", [x, *params], [x.type.shape], {"epsilon": eps})
    return y


def _conv(b: Builder, x: Value, out_ch: int, bias: bool, group: int = 1,
          stride: int = 1) -> Value:
    n, c, h, w = x.type.shape
    ins = [x, b.const("w", (out_ch, c // group, 3, 3), 10)]
    if bias:
        ins.append(b.const("b", (out_ch,), 11))
    attrs = {**CONV, "group": group, "strides": (stride, stride)}
    oh, ow = (h - 1) // stride + 1, (w - 1) // stride + 1
    (y,) = b.node("Conv", ins, [(n, out_ch, oh, ow)], attrs)
    return y


@pytest.mark.parametrize("bias,group,stride", [(False, 1, 1), (True, 1, 2), (True, 2, 1)])
def test_conv_bn_folds_into_conv(bias: bool, group: int, stride: int) -> None:
    b = Builder()
    x = b.input("x", (2, 4, 7, 6), "float32")
    y = _bn(b, _conv(b, x, 6, bias, group, stride), 6, seed=bias + group)
    (z,) = b.node("Relu", [y], [y.type.shape])
    g = b.finish([z])
    out = fold_batch_norm(g)
    assert [n.op for n in out.nodes] == ["Conv", "Relu"]
    conv = out.nodes[0]
    assert conv.outputs == (y,) and conv.attrs["group"] == group
    assert conv.inputs[1].is_constant and conv.inputs[2].type.shape == (6,)
    assert_same_results(g, out, rtol=1e-4, atol=1e-5)


def test_conv_with_another_reader_is_left_alone() -> None:
    b = Builder()
    x = b.input("x", (1, 3, 5, 5), "float32")
    c = _conv(b, x, 4, True)
    y = _bn(b, c, 4, seed=3)
    (z,) = b.node("Add", [y, c], [y.type.shape])
    g = b.finish([z])
    assert fold_batch_norm(g) is g


def test_non_constant_weights_or_training_mode_are_left_alone() -> None:
    b = Builder()
    x = b.input("x", (1, 3, 5, 5), "float32")
    w = b.input("w", (4, 3, 3, 3), "float32")
    (c,) = b.node("Conv", [x, w], [(1, 4, 5, 5)], CONV)
    y = _bn(b, c, 4, seed=4)
    c2 = _conv(b, x, 4, False)
    params = [b.const(f"p{i}", (4,), i, positive=True) for i in range(4)]
    (y2,) = b.node("BatchNormalization", [c2, *params], [c2.type.shape],
                   {"epsilon": 1e-5, "training_mode": 1})
    c3 = _conv(b, x, 4, False)
    per_pixel = [b.const(f"q{i}", (4, 5, 5), i, positive=True) for i in range(4)]
    (y3,) = b.node("BatchNormalization", [c3, *per_pixel], [c3.type.shape],
                   {"epsilon": 1e-5, "spatial": 0})
    g = b.finish([y, y2, y3])
    assert fold_batch_norm(g) is g


@pytest.mark.parametrize("trans_b,bias_shape,beta", [(0, (5,), 1.0), (1, (3, 5), 0.5),
                                                     (1, None, 1.0)])
def test_gemm_bn(trans_b: int, bias_shape: Sequence[int] | None, beta: float) -> None:
    b = Builder()
    x = b.input("x", (3, 4), "float32")
    ins = [x, b.const("w", (5, 4) if trans_b else (4, 5), 20)]
    if bias_shape is not None:
        ins.append(b.const("c", bias_shape, 21))
    (y,) = b.node("Gemm", ins, [(3, 5)], {"transB": trans_b, "alpha": 0.7, "beta": beta})
    z = _bn(b, y, 5, seed=22)
    g = b.finish([z])
    out = fold_batch_norm(g)
    assert [n.op for n in out.nodes] == ["Gemm"] and out.nodes[0].attrs["beta"] == 1.0
    assert_same_results(g, out, rtol=1e-4)


@pytest.mark.parametrize("with_add,swap", [(False, False), (True, False), (True, True)])
def test_matmul_bn(with_add: bool, swap: bool) -> None:
    b = Builder()
    x = b.input("x", (3, 4), "float32")
    (y,) = b.node("MatMul", [x, b.const("w", (4, 6), 30)], [(3, 6)])
    if with_add:
        c = b.const("c", (6,), 31)
        (y,) = b.node("Add", [c, y] if swap else [y, c], [(3, 6)])
    z = _bn(b, y, 6, seed=32)
    g = b.finish([z])
    out = fold_batch_norm(g)
    assert [n.op for n in out.nodes] == ["MatMul", "Add"]
    assert out.nodes[1].outputs == (z,) and out.nodes[1].inputs[1].is_constant
    assert_same_results(g, out, rtol=1e-4)


def test_matmul_on_3d_is_not_folded() -> None:
    b = Builder()
    x = b.input("x", (2, 3, 4), "float32")
    (y,) = b.node("MatMul", [x, b.const("w", (4, 3), 40)], [(2, 3, 3)])
    z = _bn(b, y, 3, seed=41)
    g = b.finish([z])
    assert fold_batch_norm(g) is g


def test_folded_weights_match_formula() -> None:
    b = Builder()
    x = b.input("x", (1, 2, 4, 4), "float32")
    y = _bn(b, _conv(b, x, 3, True), 3, seed=50, eps=1e-5)
    g = b.finish([y])
    bn = g.nodes[1]
    w, bias = g.nodes[0].inputs[1].data, g.nodes[0].inputs[2].data
    scale, beta, mean, var = (v.data for v in bn.inputs[1:])
    s = scale / np.sqrt(var + 1e-5)
    conv = fold_batch_norm(g).nodes[0]
    np.testing.assert_allclose(conv.inputs[1].data, w * s[:, None, None, None], rtol=1e-6)
    np.testing.assert_allclose(conv.inputs[2].data, (bias - mean) * s + beta, rtol=1e-5)
