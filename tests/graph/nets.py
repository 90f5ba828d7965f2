"""Test networks built node by node: a ResNet-50 shaped graph (conv, BN, relu, residual adds)."""

from __future__ import annotations

import numpy as np

from ember.graph.ir import Graph, Value, tensor_type
from tests.graph.runner import Builder


def _zeros(b: Builder, name: str, shape: tuple[int, ...]) -> Value:
    return Value(b.unique(name), tensor_type(shape, "float32"),
                 np.broadcast_to(np.float32(0), shape))


def _conv_bn(b: Builder, x: Value, out_ch: int, kernel: int, stride: int, relu: bool,
             seed: int, weights: bool) -> Value:
    n, c, h, w = x.type.shape
    pad = kernel // 2
    oh, ow = (h + 2 * pad - kernel) // stride + 1, (w + 2 * pad - kernel) // stride + 1
    rng = np.random.default_rng(seed)

    def const(name: str, shape: tuple[int, ...], positive: bool = False) -> Value:
        if not weights:  # shapes only: a zero-strided view, no memory
            return _zeros(b, name, shape)
        data = rng.standard_normal(shape).astype(np.float32) * 0.1
        return b.constant(name, np.abs(data) + 0.5 if positive else data)

    wt = const("w", (out_ch, c, kernel, kernel))
    (y,) = b.node("Conv", [x, wt], [(n, out_ch, oh, ow)],
                  {"kernel_shape": (kernel, kernel), "strides": (stride, stride),
                   "pads": (pad,) * 4, "dilations": (1, 1), "group": 1})
    bn_in = [y, const("gamma", (out_ch,), True), const("beta", (out_ch,)),
             const("mean", (out_ch,)), const("var", (out_ch,), True)]
    (y,) = b.node("BatchNormalization", bn_in, [y.type.shape], {"epsilon": 1e-5})
    if relu:
        (y,) = b.node("Relu", [y], [y.type.shape])
    return y


def resnet50(image: int = 224, weights: bool = False, width: int = 64,
             blocks: tuple[int, ...] = (3, 4, 6, 3)) -> Graph:
    """ResNet-50 v1 (bottleneck blocks, stride on the 3x3 conv) up to the classifier."""
    b = Builder("resnet50")
    x = b.input("data", (1, 3, image, image), "float32")
    seed = 0
    y = _conv_bn(b, x, width, 7, 2, True, seed, weights)
    n, c, h, w = y.type.shape
    (y,) = b.node("MaxPool", [y], [(n, c, (h - 1) // 2 + 1, (w - 1) // 2 + 1)],
                  {"kernel_shape": (3, 3), "strides": (2, 2), "pads": (1, 1, 1, 1)})
    for stage, count in enumerate(blocks):
        mid = width * 2 ** stage
        for i in range(count):
            stride = 2 if i == 0 and stage > 0 else 1
            seed += 4
            shortcut = y
            if i == 0:
                shortcut = _conv_bn(b, y, mid * 4, 1, stride, False, seed, weights)
            t = _conv_bn(b, y, mid, 1, 1, True, seed + 1, weights)
            t = _conv_bn(b, t, mid, 3, stride, True, seed + 2, weights)
            t = _conv_bn(b, t, mid * 4, 1, 1, False, seed + 3, weights)
            (t,) = b.node("Add", [t, shortcut], [t.type.shape])
            (y,) = b.node("Relu", [t], [t.type.shape])
    n, c, h, w = y.type.shape
    (y,) = b.node("GlobalAveragePool", [y], [(n, c, 1, 1)])
    (y,) = b.node("Flatten", [y], [(n, c)], {"axis": 1})
    fc = _zeros(b, "fc_w", (1000, c))
    (y,) = b.node("Gemm", [y, fc], [(n, 1000)], {"transB": 1})
    return b.finish([y])
