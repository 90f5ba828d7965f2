"""MXNet operators as ember ops: CONVERTERS maps an MXNet op name to its converter.

Attribute names and defaults are MXNet's (BatchNorm's eps 1e-3 and fix_gamma True, Pooling's
stride 1 and count_include_pad True, FullyConnected's flatten True, ...).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ember.errors import UnsupportedOpError
from ember.frontend.mxnet import Converter, Node, _Importer
from ember.graph.ir import Value


def _spatial(node: Node, key: str, rank: int, default: int) -> tuple[int, ...]:
    values = node.ints(key)
    return values if values else (default,) * rank


def _check_layout(node: Node) -> None:
    layout = node.get("layout")
    if layout not in (None, "NCHW", "NCW", "NCDHW"):
        raise UnsupportedOpError(f"layout '{layout}' is not supported (channels first only)")


def convert_convolution(imp: _Importer, node: Node) -> Value:
    _check_layout(node)
    x, weight = node.inputs[0], node.inputs[1]
    bias = None if node.get("no_bias", False) or len(node.inputs) < 3 else node.inputs[2]
    kernel = node.ints("kernel")
    rank = len(kernel)
    pad = _spatial(node, "pad", rank, 0)
    attrs: dict[str, Any] = {"kernel_shape": kernel, "strides": _spatial(node, "stride", rank, 1),
                             "dilations": _spatial(node, "dilate", rank, 1),
                             "pads": pad + pad, "group": int(node.get("num_group", 1))}
    if node.op == "Deconvolution":
        if node.ints("target_shape"):
            raise UnsupportedOpError("target_shape is not supported (give pad and adj)")
        attrs["output_padding"] = _spatial(node, "adj", rank, 0)
        return imp.add("ConvTranspose", [x, weight, bias], attrs)
    return imp.add("Conv", [x, weight, bias], attrs)


def convert_batch_norm(imp: _Importer, node: Node) -> Value:
    x, gamma, beta, mean, var = node.inputs[:5]
    if int(node.get("axis", 1)) != 1:
        raise UnsupportedOpError(f"axis={node.get('axis')} is not supported (channels: axis 1)")
    if node.get("fix_gamma", True):                 # MXNet's default: gamma read as 1
        gamma = imp.constant(f"{node.name}:gamma", np.ones(gamma.type.shape,
                                                           gamma.type.dtype.numpy))
    return imp.add("BatchNormalization", [x, gamma, beta, mean, var],
                   {"epsilon": float(node.get("eps", 1e-3))})


_ACTIVATIONS = {"relu": "Relu", "sigmoid": "Sigmoid", "tanh": "Tanh", "softrelu": "Softplus",
                "softsign": "Softsign"}


def convert_activation(imp: _Importer, node: Node) -> Value:
    kind = node.get("act_type")
    if kind not in _ACTIVATIONS:
        raise UnsupportedOpError(f"act_type '{kind}' is not supported (supported: "
                                 f"{sorted(_ACTIVATIONS)})")
    return imp.add(_ACTIVATIONS[kind], [node.inputs[0]])


def convert_leaky_relu(imp: _Importer, node: Node) -> Value:
    x = node.inputs[0]
    kind = node.get("act_type", "leaky")
    slope = float(node.get("slope", 0.25))
    if kind == "leaky":
        return imp.add("LeakyRelu", [x], {"alpha": slope})
    if kind == "elu":
        return imp.add("Elu", [x], {"alpha": slope})
    if kind == "selu":
        return imp.add("Selu", [x])
    if kind == "gelu":
        return imp.add("Gelu", [x])
    if kind == "prelu":
        gamma = node.inputs[1]
        if x.type.ndim > 2 and gamma.type.size > 1:     # one slope per channel
            shape = (gamma.type.size,) + (1,) * (x.type.ndim - 2)
            gamma = imp.add("Reshape", [gamma], {"shape": shape})
        return imp.add("PRelu", [x, gamma])
    raise UnsupportedOpError(f"act_type '{kind}' is not supported")


def convert_pooling(imp: _Importer, node: Node) -> Value:
    _check_layout(node)
    x = node.inputs[0]
    kind = node.get("pool_type", "max")
    if kind not in ("max", "avg"):
        raise UnsupportedOpError(f"pool_type '{kind}' is not supported (max, avg)")
    if node.get("global_pool", False):
        return imp.add("GlobalMaxPool" if kind == "max" else "GlobalAveragePool", [x])
    kernel = node.ints("kernel")
    rank = len(kernel)
    pad = _spatial(node, "pad", rank, 0)
    convention = node.get("pooling_convention", "valid")
    if convention not in ("valid", "full"):
        raise UnsupportedOpError(f"pooling_convention '{convention}' is not supported")
    attrs: dict[str, Any] = {"kernel_shape": kernel, "strides": _spatial(node, "stride", rank, 1),
                             "pads": pad + pad, "ceil_mode": int(convention == "full")}
    if kind == "avg":
        include = node.get("count_include_pad")
        attrs["count_include_pad"] = int(True if include is None else bool(include))
        return imp.add("AveragePool", [x], attrs)
    return imp.add("MaxPool", [x], attrs)


def convert_fully_connected(imp: _Importer, node: Node) -> Value:
    x, weight = node.inputs[0], node.inputs[1]
    bias = None if node.get("no_bias", False) or len(node.inputs) < 3 else node.inputs[2]
    if node.get("flatten", True):
        if x.type.ndim != 2:
            x = imp.add("Flatten", [x], {"axis": 1})
        return imp.add("Gemm", [x, weight, bias], {"transB": 1})
    y = imp.add("MatMul", [x, imp.add("Transpose", [weight], {"perm": (1, 0)})])
    return y if bias is None else imp.add("Add", [y, bias])


def convert_flatten(imp: _Importer, node: Node) -> Value:
    return imp.add("Flatten", [node.inputs[0]], {"axis": 1})


def convert_concat(imp: _Importer, node: Node) -> Value:
    x = node.inputs
    if len(x) == 1:
        return x[0]
    axis = int(node.get("dim", 1))
    return imp.add("Concat", x, {"axis": axis + x[0].type.ndim if axis < 0 else axis})


def convert_identity(imp: _Importer, node: Node) -> Value:
    return node.inputs[0]


def convert_clip(imp: _Importer, node: Node) -> Value:
    return imp.add("Clip", [node.inputs[0]], {"min": float(node.get("a_min")),
                                              "max": float(node.get("a_max"))})


def binary(op: str) -> Converter:
    def convert(imp: _Importer, node: Node) -> Value:
        return imp.add(op, node.inputs[:2])
    return convert


def scalar(op: str, reverse: bool = False) -> Converter:
    """x op scalar (or scalar op x for the _r* forms)."""
    def convert(imp: _Importer, node: Node) -> Value:
        x = node.inputs[0]
        value = imp.scalar(float(node.get("scalar", 0.0)), x)
        return imp.add(op, [value, x] if reverse else [x, value])
    return convert


def unary(op: str) -> Converter:
    def convert(imp: _Importer, node: Node) -> Value:
        return imp.add(op, [node.inputs[0]])
    return convert


def convert_square(imp: _Importer, node: Node) -> Value:
    return imp.add("Mul", [node.inputs[0], node.inputs[0]])


def convert_add_n(imp: _Importer, node: Node) -> Value:
    return node.inputs[0] if len(node.inputs) == 1 else imp.add("Sum", node.inputs)


def convert_softmax(imp: _Importer, node: Node) -> Value:
    x = node.inputs[0]
    if node.op == "SoftmaxOutput":                 # inference: the softmax itself
        axis = 1 if node.get("multi_output", False) else -1
    elif node.op == "SoftmaxActivation":
        axis = 1 if node.get("mode", "instance") == "channel" else -1
    else:
        axis = int(node.get("axis", -1))
    if node.get("temperature") not in (None, 1, 1.0):
        x = imp.add("Div", [x, imp.scalar(float(node.get("temperature")), x)])
    return imp.add("LogSoftmax" if node.op == "log_softmax" else "Softmax", [x],
                   {"axis": axis})


def convert_reshape(imp: _Importer, node: Node) -> Value:
    x = node.inputs[0]
    if node.get("reverse", False):
        raise UnsupportedOpError("reverse=True is not supported")
    shape = list(node.ints("shape"))
    if any(s < -1 for s in shape):
        raise UnsupportedOpError(f"shape {tuple(shape)}: the special values -2, -3 and -4 are "
                                 "not supported (0 and -1 are)")
    shape = [x.type.shape[i] if s == 0 else s for i, s in enumerate(shape)]
    return imp.add("Reshape", [x], {"shape": tuple(shape)})


def convert_transpose(imp: _Importer, node: Node) -> Value:
    x = node.inputs[0]
    axes = node.ints("axes") or tuple(reversed(range(x.type.ndim)))
    return imp.add("Transpose", [x], {"perm": axes})


def convert_expand_dims(imp: _Importer, node: Node) -> Value:
    x = node.inputs[0]
    axis = int(node.get("axis"))
    return imp.add("Unsqueeze", [x], {"axes": (axis + x.type.ndim + 1 if axis < 0 else axis,)})


def reduce(op: str) -> Converter:
    def convert(imp: _Importer, node: Node) -> Value:
        x = node.inputs[0]
        if node.get("exclude", False):
            raise UnsupportedOpError("exclude=True is not supported")
        axes = node.ints("axis") or tuple(range(x.type.ndim))
        axes = tuple(a + x.type.ndim if a < 0 else a for a in axes)
        return imp.add(op, [x], {"axes": axes, "keepdims": int(bool(node.get("keepdims",
                                                                              False)))})
    return convert


def convert_slice_axis(imp: _Importer, node: Node) -> Value:
    x = node.inputs[0]
    axis = int(node.get("axis"))
    axis = axis + x.type.ndim if axis < 0 else axis
    size = x.type.shape[axis]
    begin = int(node.get("begin", 0))
    end = node.get("end")
    end = size if end is None else int(end)
    return imp.add("Slice", [x], {"starts": (begin,), "ends": (end,), "axes": (axis,)})


def convert_upsampling(imp: _Importer, node: Node) -> Value:
    x = node.inputs[0]
    if node.get("sample_type", "nearest") != "nearest" or len(node.inputs) != 1:
        raise UnsupportedOpError("only nearest upsampling of one input is supported")
    scale = int(node.get("scale"))
    sizes = x.type.shape[:2] + tuple(d * scale for d in x.type.shape[2:])
    return imp.add("Resize", [x], {"sizes": sizes, "mode": "nearest",
                                   "coordinate_transformation_mode": "asymmetric",
                                   "nearest_mode": "floor"})


def convert_embedding(imp: _Importer, node: Node) -> Value:
    data, weight = node.inputs[0], node.inputs[1]
    indices = imp.add("Cast", [data], {"to": 7})           # int64: MXNet feeds floats
    return imp.add("Gather", [weight, indices], {"axis": 0})


CONVERTERS: dict[str, Callable[[_Importer, Node], Any]] = {
    "Convolution": convert_convolution, "Deconvolution": convert_convolution,
    "BatchNorm": convert_batch_norm, "Activation": convert_activation,
    "LeakyReLU": convert_leaky_relu, "Pooling": convert_pooling,
    "FullyConnected": convert_fully_connected, "Flatten": convert_flatten,
    "flatten": convert_flatten, "Concat": convert_concat, "concat": convert_concat,
    "Dropout": convert_identity, "_copy": convert_identity, "identity": convert_identity,
    "BlockGrad": convert_identity, "stop_gradient": convert_identity, "clip": convert_clip,
    "add_n": convert_add_n, "ElementWiseSum": convert_add_n, "square": convert_square,
    "softmax": convert_softmax, "log_softmax": convert_softmax,
    "SoftmaxActivation": convert_softmax, "SoftmaxOutput": convert_softmax,
    "Reshape": convert_reshape, "reshape": convert_reshape, "transpose": convert_transpose,
    "expand_dims": convert_expand_dims, "mean": reduce("ReduceMean"),
    "sum": reduce("ReduceSum"), "max": reduce("ReduceMax"), "min": reduce("ReduceMin"),
    "slice_axis": convert_slice_axis, "UpSampling": convert_upsampling,
    "Embedding": convert_embedding,
}
for _names, _op in ((("elemwise_add", "_plus", "_Plus", "_add", "broadcast_add",
                      "broadcast_plus"), "Add"),
                    (("elemwise_sub", "_minus", "_Minus", "_sub", "broadcast_sub",
                      "broadcast_minus"), "Sub"),
                    (("elemwise_mul", "_mul", "_Mul", "broadcast_mul"), "Mul"),
                    (("elemwise_div", "_div", "_Div", "broadcast_div"), "Div"),
                    (("_maximum", "broadcast_maximum"), "Max"),
                    (("_minimum", "broadcast_minimum"), "Min")):
    for _name in _names:
        CONVERTERS[_name] = binary(_op)
for _name, _op, _reverse in (("_plus_scalar", "Add", False), ("_minus_scalar", "Sub", False),
                             ("_rminus_scalar", "Sub", True), ("_mul_scalar", "Mul", False),
                             ("_div_scalar", "Div", False), ("_rdiv_scalar", "Div", True),
                             ("_power_scalar", "Pow", False), ("_maximum_scalar", "Max", False),
                             ("_minimum_scalar", "Min", False)):
    CONVERTERS[_name] = scalar(_op, _reverse)
for _name, _op in (("relu", "Relu"), ("sigmoid", "Sigmoid"), ("tanh", "Tanh"), ("exp", "Exp"),
                   ("log", "Log"), ("sqrt", "Sqrt"), ("abs", "Abs"), ("negative", "Neg"),
                   ("erf", "Erf")):
    CONVERTERS[_name] = unary(_op)
