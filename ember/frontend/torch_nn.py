"""ATen neural-network operators as ember ops (the NN table): convolution, matrix products,
normalization, softmax, pooling and resizing."""

from __future__ import annotations

from typing import Any

import numpy as np

from ember.errors import UnsupportedOpError
from ember.frontend.torch import Call, Converter, _Importer
from ember.graph.ir import Value

Result = Any


def _ints(value: Any, count: int) -> list[int]:
    """An int[N] argument: torch lets one value (or a one-element list) stand for all N."""
    values = [int(v) for v in (value if isinstance(value, (list, tuple)) else [value])]
    return values * count if len(values) == 1 else values


def convert_convolution(imp: _Importer, call: Call) -> Result:
    x, weight, bias = call["input"], call["weight"], call["bias"]
    spatial = weight.type.ndim - 2
    padding = _ints(call["padding"], spatial)
    attrs: dict[str, Any] = {
        "kernel_shape": tuple(weight.type.shape[2:]), "strides": tuple(_ints(call["stride"],
                                                                            spatial)),
        "dilations": tuple(_ints(call["dilation"], spatial)), "pads": tuple(padding * 2),
        "group": int(call["groups"])}
    if call["transposed"]:
        attrs["output_padding"] = tuple(_ints(call["output_padding"], spatial))
        return imp.add1("ConvTranspose", [x, weight, bias], attrs)
    if any(int(p) for p in call["output_padding"] or []):
        raise UnsupportedOpError("output_padding on a non-transposed convolution is not "
                                 "supported")
    return imp.add1("Conv", [x, weight, bias], attrs)


def _producer(imp: _Importer, value: Value, op: str) -> Any:
    """The node of kind `op` that made `value`, if the last node making it is one."""
    for node in reversed(imp.builder.nodes):
        if node.outputs[0] is value:
            return node if node.op == op else None
    return None


def _transposed_source(imp: _Importer, value: Value) -> Value | None:
    """The matrix whose 2-D transpose `value` is, when a Transpose node just made it."""
    node = _producer(imp, value, "Transpose")
    if node is not None and tuple(node.attrs.get("perm") or ()) == (1, 0):
        return node.inputs[0]
    return None


def _flattened_source(imp: _Importer, value: Value) -> Value | None:
    """The tensor [..., K] that a Reshape just flattened into the matrix `value` [M, K]."""
    node = _producer(imp, value, "Reshape")
    if node is None:
        return None
    source = node.inputs[0]
    rows, k = value.type.shape
    if source.type.ndim > 2 and source.type.shape[-1] == k \
            and int(np.prod(source.type.shape[:-1], dtype=np.int64)) == rows:
        return source
    return None


def convert_addmm(imp: _Importer, call: Call) -> Result:
    """addmm(bias, a, b, beta, alpha) = beta * bias + alpha * (a @ b): ONNX's Gemm. A linear
    layer's b is its weight transposed: Gemm reads the weight itself (transB), as an ONNX
    export would, and the transpose dies. On a tensor of rank > 2 flattened just before,
    it is MatMul + Add on that tensor."""
    attrs = {"alpha": float(call["alpha"]), "beta": float(call["beta"])}
    source = _flattened_source(imp, call["mat1"])
    if source is not None and attrs == {"alpha": 1.0, "beta": 1.0}:
        # a linear layer on [..., K]: MatMul and Add on the unflattened tensor, as an ONNX
        # export has it, so the reshapes on both sides cancel instead of copying
        y = imp.add1("Add", [imp.add1("MatMul", [source, call["mat2"]]), call["self"]])
        return imp.add1("Reshape", [y], {"shape": call["mat1"].type.shape[:1]
                                          + call["mat2"].type.shape[1:]})
    weight = _transposed_source(imp, call["mat2"])
    if weight is not None:
        return imp.add1("Gemm", [call["mat1"], weight, call["self"]], {**attrs, "transB": 1})
    return imp.add1("Gemm", [call["mat1"], call["mat2"], call["self"]], attrs)


def convert_matmul(imp: _Importer, call: Call) -> Result:
    other = call.args.get("mat2", call.args.get("other"))
    return imp.add1("MatMul", [call["self"], other])


def _filled(imp: _Importer, call: Call, channels: int, value: float, like: Value) -> Value:
    return imp.constant(f"{call.label}:{'scale' if value else 'bias'}",
                        np.full((channels,), value, like.type.dtype.numpy))


def convert_batch_norm(imp: _Importer, call: Call) -> Result:
    x = call["input"]
    channels = x.type.shape[1]
    scale = call["weight"] if call["weight"] is not None else _filled(imp, call, channels, 1.0, x)
    shift = call["bias"] if call["bias"] is not None else _filled(imp, call, channels, 0.0, x)
    y = imp.add1("BatchNormalization", [x, scale, shift, call["running_mean"],
                                        call["running_var"]], {"epsilon": float(call["eps"])})
    return y, None, None


def convert_layer_norm(imp: _Importer, call: Call) -> Result:
    x = call["input"]
    shape = tuple(int(s) for s in call["normalized_shape"])
    weight, bias = call["weight"], call["bias"]
    if weight is None:
        weight = imp.constant(f"{call.label}:scale", np.ones(shape, x.type.dtype.numpy))
    if bias is None:
        bias = imp.constant(f"{call.label}:bias", np.zeros(shape, x.type.dtype.numpy))
    y = imp.add1("LayerNormalization", [x, weight, bias],
                 {"axis": -len(shape), "epsilon": float(call["eps"])})
    return y, None, None


def convert_group_norm(imp: _Importer, call: Call) -> Result:
    """Group norm as instance norm over (N, groups, C/groups * HxW), then the per-channel
    affine transform."""
    x = call["input"]
    groups = int(call["group"])
    n, c = x.type.shape[0], x.type.shape[1]
    grouped = imp.add1("Reshape", [x], {"shape": (n, groups, -1)})
    ones = imp.constant(f"{call.label}:ones", np.ones((groups,), x.type.dtype.numpy))
    zeros = imp.constant(f"{call.label}:zeros", np.zeros((groups,), x.type.dtype.numpy))
    normed = imp.add1("InstanceNormalization", [grouped, ones, zeros],
                      {"epsilon": float(call["eps"])})
    y = imp.add1("Reshape", [normed], {"shape": x.type.shape})
    trailing = (1,) * (x.type.ndim - 2)
    if call["weight"] is not None:
        scale = imp.add1("Reshape", [call["weight"]], {"shape": (c,) + trailing})
        y = imp.add1("Mul", [y, scale])
    if call["bias"] is not None:
        shift = imp.add1("Reshape", [call["bias"]], {"shape": (c,) + trailing})
        y = imp.add1("Add", [y, shift])
    return y, None, None


def softmax(op: str) -> Converter:
    def convert(imp: _Importer, call: Call) -> Result:
        x = imp.cast(call["self"], call.out_dtype)
        return imp.add1(op, [x], {"axis": int(call["dim"])})
    return convert


def _pool_attrs(call: Call, spatial: int) -> dict[str, Any]:
    kernel = _ints(call["kernel_size"], spatial)
    stride = call["stride"]
    stride = kernel if not stride else _ints(stride, spatial)
    padding = _ints(call["padding"], spatial)
    return {"kernel_shape": tuple(kernel), "strides": tuple(stride),
            "pads": tuple(padding * 2), "ceil_mode": int(bool(call["ceil_mode"]))}


def convert_max_pool(imp: _Importer, call: Call) -> Result:
    x = call["self"]
    spatial = x.type.ndim - 2
    attrs = _pool_attrs(call, spatial)
    attrs["dilations"] = tuple(_ints(call["dilation"], spatial))
    y = imp.add1("MaxPool", [x], attrs)
    return (y, None) if call.target.split(".")[1].endswith("with_indices") else y


def convert_avg_pool(imp: _Importer, call: Call) -> Result:
    x = call["self"]
    if call.args.get("divisor_override") is not None:
        raise UnsupportedOpError("divisor_override is not supported")
    attrs = _pool_attrs(call, x.type.ndim - 2)
    attrs["count_include_pad"] = int(bool(call["count_include_pad"]))
    return imp.add1("AveragePool", [x], attrs)


def adaptive_pool(op: str, global_op: str) -> Converter:
    """Adaptive pooling whose output size divides the input: one fixed window."""
    def convert(imp: _Importer, call: Call) -> Result:
        x = call["self"]
        spatial = x.type.ndim - 2
        sizes = [x.type.shape[2 + i] if s is None else int(s)
                 for i, s in enumerate(_ints(call["output_size"], spatial))]
        inputs = x.type.shape[2:]
        with_indices = op == "MaxPool"
        if all(s == 1 for s in sizes):
            y = imp.add1(global_op, [x])
        elif all(i % s == 0 for i, s in zip(inputs, sizes)):
            kernel = tuple(i // s for i, s in zip(inputs, sizes))
            y = imp.add1(op, [x], {"kernel_shape": kernel, "strides": kernel})
        else:
            raise UnsupportedOpError(f"adaptive pooling from {tuple(inputs)} to {tuple(sizes)} "
                                     "(sizes that do not divide) is not supported")
        return (y, None) if with_indices else y
    return convert


def convert_upsample(imp: _Importer, call: Call) -> Result:
    x = call.args.get("self", call.args.get("input"))
    spatial = x.type.ndim - 2
    sizes = call["output_size"]
    scales = call.args.get("scale_factors")
    if sizes is None and scales is not None:
        sizes = [int(np.floor(d * float(s))) for d, s in zip(x.type.shape[2:],
                                                            _floats(scales, spatial))]
    if sizes is None:
        raise UnsupportedOpError("resizing without output_size or scale_factors")
    full = tuple(x.type.shape[:2]) + tuple(int(s) for s in sizes)
    attrs: dict[str, Any] = {"sizes": full}
    if "nearest" in call.target:
        # torch's nearest: source index floor(dst * in / out)
        attrs.update(mode="nearest", coordinate_transformation_mode="asymmetric",
                     nearest_mode="floor")
    else:
        attrs.update(mode="linear", coordinate_transformation_mode=(
            "align_corners" if call["align_corners"] else "pytorch_half_pixel"))
    return imp.add1("Resize", [x], attrs)


def _floats(value: Any, count: int) -> list[float]:
    values = [float(v) for v in (value if isinstance(value, (list, tuple)) else [value])]
    return values * count if len(values) == 1 else values


def convert_attention(imp: _Importer, call: Call) -> Result:
    """scaled_dot_product_attention: softmax(q k^T * scale + mask) v, torch's math form; rows
    a boolean mask hides entirely give zeros, as in torch."""
    q, k, v, mask = call["query"], call["key"], call["value"], call["attn_mask"]
    if float(call["dropout_p"]) != 0.0:
        raise UnsupportedOpError("dropout_p != 0 (training) is not supported")
    if k.type.shape[-3:-2] != q.type.shape[-3:-2] and q.type.ndim >= 3:
        raise UnsupportedOpError(f"key heads {k.type.shape[-3]} differ from query heads "
                                 f"{q.type.shape[-3]} (grouped-query attention)")
    dtype = q.type.dtype
    rank = q.type.ndim
    scale = call["scale"]
    scale = 1.0 / float(np.sqrt(q.type.shape[-1])) if scale is None else float(scale)
    perm = tuple(range(rank - 2)) + (rank - 1, rank - 2)
    scores = imp.add1("MatMul", [imp.add1("Mul", [q, imp.scalar(scale, dtype)]),
                                 imp.add1("Transpose", [k], {"perm": perm})])
    length, source = q.type.shape[-2], k.type.shape[-2]
    hidden = None
    if call["is_causal"]:
        allowed = np.tril(np.ones((length, source), bool))
        bias = np.where(allowed, 0.0, -np.inf).astype(dtype.numpy)
        scores = imp.add1("Add", [scores, imp.constant(f"{call.label}:causal", bias)])
    if mask is not None and mask.type.dtype.is_bool:
        hidden = imp.add1("Not", [mask])
        mask = imp.add1("Where", [mask, imp.scalar(0.0, dtype), imp.scalar(-np.inf, dtype)])
    if mask is not None:
        scores = imp.add1("Add", [scores, imp.cast(mask, dtype)])
    probs = imp.add1("Softmax", [scores], {"axis": -1})
    if hidden is not None:
        all_hidden = imp.add1("Cast", [imp.add1("ReduceMin", [imp.cast(hidden, dtype)],
                                                {"axes": (hidden.type.ndim - 1,),
                                                 "keepdims": 1})], {"to": 9})
        probs = imp.add1("Where", [all_hidden, imp.scalar(0.0, dtype), probs])
    return imp.add1("MatMul", [probs, v])


NN: dict[str, Converter] = {
    "scaled_dot_product_attention": convert_attention,
    "convolution": convert_convolution, "addmm": convert_addmm, "mm": convert_matmul,
    "bmm": convert_matmul, "matmul": convert_matmul,
    "_native_batch_norm_legit_no_training": convert_batch_norm,
    "native_layer_norm": convert_layer_norm, "native_group_norm": convert_group_norm,
    "_softmax": softmax("Softmax"), "_log_softmax": softmax("LogSoftmax"),
    "max_pool2d_with_indices": convert_max_pool, "max_pool2d": convert_max_pool,
    "max_pool1d": convert_max_pool, "max_pool3d_with_indices": convert_max_pool,
    "avg_pool2d": convert_avg_pool, "avg_pool1d": convert_avg_pool,
    "avg_pool3d": convert_avg_pool,
    "_adaptive_avg_pool2d": adaptive_pool("AveragePool", "GlobalAveragePool"),
    "adaptive_max_pool2d": adaptive_pool("MaxPool", "GlobalMaxPool"),
    "upsample_nearest2d": convert_upsample, "upsample_bilinear2d": convert_upsample,
}
