"""Conv, ConvTranspose and pooling ops against onnxruntime; fused epilogues; error paths."""

import numpy as np
import pytest

from ember.errors import ShapeError, UnsupportedOpError
from ember.graph.ir import GraphBuilder
from ember.lowering.kernel import build_group, run_op
from tests.ops.onnx_ref import check_op, onnx_run

RNG = np.random.default_rng(7)


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype("float32")


CONV_CASES = [
    # (x shape, w shape, with bias, attrs)
    ((2, 16, 9, 10), (32, 16, 3, 3), True, {"pads": [1, 1, 1, 1]}),
    ((1, 16, 11, 9), (16, 16, 3, 3), False, {"strides": [2, 2], "dilations": [2, 1]}),
    ((1, 32, 8, 8), (32, 16, 1, 1), True, {"group": 2}),
    ((1, 8, 9, 10), (8, 1, 3, 3), True, {"group": 8, "auto_pad": "SAME_UPPER",
                                         "strides": [2, 2]}),
    ((1, 8, 10, 9), (16, 1, 3, 3), False, {"group": 8, "auto_pad": "SAME_LOWER",
                                           "strides": [2, 1]}),
    ((1, 3, 12, 12), (6, 3, 5, 5), True, {"auto_pad": "VALID", "strides": [3, 2]}),
    ((1, 4, 7, 7), (8, 4, 3, 3), False, {"pads": [0, 2, 1, 0], "kernel_shape": [3, 3]}),
    ((2, 6, 9), (4, 3, 3), True, {"group": 2, "pads": [2, 1]}),
    ((1, 4, 5, 6, 5), (16, 4, 3, 2, 3), False, {"pads": [1, 0, 1, 1, 1, 0]}),
]


@pytest.mark.parametrize("xs, ws, bias, attrs", CONV_CASES)
def test_conv_matches_onnxruntime(xs, ws, bias, attrs):
    inputs = [rand(*xs), rand(*ws)] + ([rand(ws[0])] if bias else [])
    check_op("Conv", inputs, attrs, rtol=1e-4, atol=1e-4)


CONV_TRANSPOSE_CASES = [
    ((1, 4, 5, 6), (4, 6, 3, 3), True, {"strides": [2, 2], "pads": [1, 1, 1, 1],
                                        "output_padding": [1, 1]}),
    ((1, 4, 5, 6), (4, 3, 3, 3), False, {"group": 2, "dilations": [2, 2]}),
    ((1, 4, 5, 5), (4, 16, 2, 2), False, {"strides": [2, 2], "output_shape": [9, 10]}),
    # output_shape beyond the full transposed convolution (3 * 2 + 3 = 9, 2 * 2 + 3 = 7)
    ((1, 2, 3, 3), (2, 3, 3, 3), True, {"strides": [3, 2], "output_shape": [10, 8]}),
    ((1, 4, 5, 5), (4, 2, 3, 3), False, {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ((2, 3, 7), (3, 2, 4), True, {"strides": [3], "pads": [1, 2]}),
]


@pytest.mark.parametrize("xs, ws, bias, attrs", CONV_TRANSPOSE_CASES)
def test_conv_transpose_matches_onnxruntime(xs, ws, bias, attrs):
    inputs = [rand(*xs), rand(*ws)] + ([rand(ws[1] * attrs.get("group", 1))] if bias else [])
    check_op("ConvTranspose", inputs, attrs, rtol=1e-4, atol=1e-4)


def _runnable_presets() -> list[str]:
    from ember.codegen.llvm_target import check_runs_here
    from ember.errors import TargetError
    from ember.target import Target

    if not Target("llvm").triple.startswith("x86_64"):
        return ["llvm"]
    found = []
    for name in ("llvm -mcpu=x86-64-v2", "llvm -mcpu=x86-64-v3", "llvm -mcpu=x86-64-v4", "llvm"):
        try:
            check_runs_here(Target(name))
        except TargetError:
            continue
        found.append(name)
    return found


@pytest.mark.parametrize("target", _runnable_presets())
def test_conv_transpose_3d_on_each_vector_width(target):
    # the spread stage stores 16 lanes per 9-wide row; with 256-bit registers LLVM once split
    # its masked load and read the all-masked upper half unmasked (garbage in the last column)
    x, w = rand(1, 1, 3, 4, 5), rand(1, 2, 3, 3, 3)
    want = onnx_run("ConvTranspose", [x, w])[0]
    got = run_op("ConvTranspose", [x, w], {}, target=target)[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


POOL_CASES = [
    ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}, 2),
    ("MaxPool", {"kernel_shape": [3, 2], "strides": [2, 2], "ceil_mode": 1}, 2),
    ("MaxPool", {"kernel_shape": [2, 2], "dilations": [2, 2], "storage_order": 1}, 2),
    ("MaxPool", {"kernel_shape": [3, 3], "auto_pad": "SAME_UPPER", "strides": [2, 2]}, 1),
    ("AveragePool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}, 1),
    ("AveragePool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1],
                     "count_include_pad": 1, "ceil_mode": 1}, 1),
    ("AveragePool", {"kernel_shape": [2, 3], "strides": [2, 2], "ceil_mode": 1}, 1),
    ("AveragePool", {"kernel_shape": [3, 3], "auto_pad": "SAME_LOWER"}, 1),
    ("LpPool", {"kernel_shape": [2, 2], "strides": [2, 2]}, 1),
    ("LpPool", {"kernel_shape": [3, 3], "p": 3, "pads": [1, 1, 1, 1]}, 1),
]


@pytest.mark.parametrize("op, attrs, outputs", POOL_CASES)
def test_pool_matches_onnxruntime(op, attrs, outputs):
    check_op(op, [rand(2, 5, 9, 10)], attrs, num_outputs=outputs, rtol=1e-5, atol=1e-5)


def test_pool_1d_and_global_pools():
    x1 = rand(2, 3, 11)
    check_op("MaxPool", [x1], {"kernel_shape": [3], "strides": [2], "pads": [1, 1]})
    check_op("AveragePool", [x1], {"kernel_shape": [4], "strides": [3]})
    x = rand(2, 6, 5, 7)
    check_op("GlobalAveragePool", [x], {})
    check_op("GlobalMaxPool", [x], {})


def test_conv_bias_relu_residual_fused_into_one_kernel():
    """Conv -> Add(bias) -> Relu -> Add(residual) compiled as one group."""
    x, w = rand(1, 16, 10, 12), rand(32, 16, 3, 3) * 0.2
    bias, res = rand(32, 1, 1), rand(1, 32, 10, 12)
    b = GraphBuilder("block")
    xv, rv = b.input("x", x.shape, "float32"), b.input("res", res.shape, "float32")
    wv, bv = b.constant("w", w), b.constant("bias", bias)
    (y,) = b.add("Conv", [xv, wv], {"pads": [1, 1, 1, 1]})
    (y,) = b.add("Add", [y, bv])
    (y,) = b.add("Relu", [y])
    (y,) = b.add("Add", [y, rv])
    g = b.finish([y])
    module = build_group("block", g.nodes, [xv, wv, bv, rv], [y])
    out = np.zeros(y.type.shape, "float32")
    module(x, w, bias, res, out)
    (conv,) = onnx_run("Conv", [x, w], {"pads": [1, 1, 1, 1]})
    np.testing.assert_allclose(out, np.maximum(conv + bias, 0) + res, rtol=1e-4, atol=1e-4)


def test_depthwise_conv_with_epilogue():
    x, w = rand(1, 8, 9, 9), rand(8, 1, 3, 3)
    b = GraphBuilder("dw")
    xv, wv = b.input("x", x.shape, "float32"), b.constant("w", w)
    (y,) = b.add("Conv", [xv, wv], {"group": 8, "pads": [1, 1, 1, 1], "strides": [2, 2]})
    (y,) = b.add("Relu", [y])
    g = b.finish([y])
    module = build_group("dw", g.nodes, [xv, wv], [y])
    out = np.zeros(y.type.shape, "float32")
    module(x, w, out)
    (ref,) = onnx_run("Conv", [x, w], {"group": 8, "pads": [1, 1, 1, 1], "strides": [2, 2]})
    np.testing.assert_allclose(out, np.maximum(ref, 0), rtol=1e-4, atol=1e-4)


def test_conv_schedule_knob_keeps_numbers():
    from ember import te
    from ember.lowering.build import build
    from ember.ops.conv import OPS, ConvNCHWKnobs, schedule_conv
    from ember.target import Target

    x, w = rand(1, 8, 6, 12), rand(16, 8, 3, 3)
    X = te.placeholder(x.shape, "float32", name="X")
    W = te.placeholder(w.shape, "float32", name="W")
    (out,) = OPS["Conv"].compute(OPS["Conv"].complete_attrs({"pads": [1, 1, 1, 1]}), [X, W])
    (ref,) = run_op("Conv", [x, w], {"pads": [1, 1, 1, 1]})
    for tile in (3, 5):  # 5 does not divide the width: tails
        module = build(schedule_conv([out], Target("llvm"), ConvNCHWKnobs(ow_tile=tile)),
                       [X, W, out])
        got = np.zeros(ref.shape, "float32")
        module(x, w, got)
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_conv_shape_errors_name_the_node():
    b = GraphBuilder("bad")
    x = b.input("x", (1, 8, 5, 5), "float32")
    w = b.constant("w", rand(4, 3, 3, 3))
    with pytest.raises(ShapeError, match=r"node 'conv' \(Conv\).*8 channels.*expects 3"):
        b.add("Conv", [x, w])
    w2 = b.constant("w2", rand(6, 2, 3, 3))
    with pytest.raises(ShapeError, match=r"node 'conv_1' \(Conv\): group=3 must divide"):
        b.add("Conv", [x, w2], {"group": 3})
    w3 = b.constant("w3", rand(4, 8, 7, 7))
    with pytest.raises(ShapeError, match="smaller than the dilated kernel"):
        b.add("Conv", [x, w3])
    with pytest.raises(ShapeError, match="bias B has shape"):
        b.add("Conv", [x, b.constant("w4", rand(4, 8, 3, 3)), b.constant("bias", rand(5))])


def test_unsupported_attribute_values():
    b = GraphBuilder("bad")
    x = b.input("x", (1, 8, 5, 5), "float32")
    w = b.constant("w", rand(4, 8, 3, 3))
    with pytest.raises(UnsupportedOpError, match="auto_pad='SAME'"):
        b.add("Conv", [x, w], {"auto_pad": "SAME"})
    with pytest.raises(UnsupportedOpError, match="storage_order=2"):
        b.add("MaxPool", [x], {"kernel_shape": [2, 2], "storage_order": 2})
    with pytest.raises(UnsupportedOpError, match="required attribute 'kernel_shape'"):
        b.add("AveragePool", [x])
    with pytest.raises(ShapeError, match="kernel_shape"):
        b.add("MaxPool", [x], {"kernel_shape": [2]})


# -- separable pools: full vectors and tails, 3-D windows, fused epilogues -----------------
WIDE_POOL_CASES = [
    ("MaxPool", (1, 3, 19, 37), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("MaxPool", (1, 2, 15, 40), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    ("MaxPool", (1, 2, 12, 35), {"kernel_shape": [2, 3], "dilations": [2, 2],
                                 "pads": [0, 2, 1, 1]}),
    ("AveragePool", (1, 3, 14, 34), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),
    ("AveragePool", (1, 2, 13, 33), {"kernel_shape": [3, 3], "strides": [2, 2],
                                     "pads": [1, 1, 1, 1], "count_include_pad": 1}),
    ("LpPool", (1, 2, 9, 36), {"kernel_shape": [3, 2], "strides": [1, 2], "p": 2}),
    ("MaxPool", (1, 2, 5, 6, 33), {"kernel_shape": [2, 3, 3], "strides": [1, 2, 2],
                                   "pads": [0, 1, 1, 1, 0, 1]}),
    ("AveragePool", (1, 2, 5, 6, 20), {"kernel_shape": [3, 2, 3], "strides": [2, 1, 2]}),
]


@pytest.mark.parametrize("op, shape, attrs", WIDE_POOL_CASES)
def test_wide_and_3d_pools_match_onnxruntime(op, shape, attrs):
    check_op(op, [rand(*shape)], attrs, rtol=1e-5, atol=1e-5)


def test_pool_schedule_is_separable_and_vectorized():
    from ember import te
    from ember.lowering.build import optimize
    from ember.ops.pool import OPS, schedule_pool
    from ember.target import Target
    from ember.te.lower import lower

    x = te.placeholder((1, 4, 24, 40), "float32", name="x")
    opdef = OPS["MaxPool"]
    attrs = {**opdef.attrs, "kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}
    (y,) = opdef.compute(attrs, [x])[:1]
    text = str(optimize(lower(schedule_pool([y], Target("llvm")), [x, y], name="mp")))
    assert "maxpool_rows = allocate" in text and "# parallel" in text
    lanes = Target("llvm").vector_lanes("float32")
    assert f", 2, {lanes})]" in text  # stride-2 vector reads of the row buffer


def test_maxpool_relu_and_global_pools_fused():
    x = rand(1, 6, 17, 35)
    b = GraphBuilder("mp")
    xv = b.input("x", x.shape, "float32")
    y = b.add("MaxPool", [xv], {"kernel_shape": [3, 3], "strides": [2, 2],
                                "pads": [1, 1, 1, 1]})[0]
    (y,) = b.add("Relu", [y])
    g = b.finish([y])
    module = build_group("mp", g.nodes, [xv], [y])
    out = np.zeros(y.type.shape, "float32")
    module(x, out)
    (ref,) = onnx_run("MaxPool", [x], {"kernel_shape": [3, 3], "strides": [2, 2],
                                       "pads": [1, 1, 1, 1]})
    np.testing.assert_allclose(out, np.maximum(ref, 0), rtol=1e-6)
    x3 = rand(2, 5, 3, 7, 9)
    check_op("GlobalAveragePool", [x3], {}, rtol=1e-5, atol=1e-6)
    check_op("GlobalMaxPool", [x3], {})
    check_op("GlobalAveragePool", [rand(1, 20, 13, 13)], {}, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
def test_maxpool_on_8bit_integers_matches_onnxruntime(dtype):
    info = np.iinfo(dtype)
    x = RNG.integers(info.min, info.max, (1, 3, 7, 8), endpoint=True).astype(dtype)
    # padded taps must not win: every value, including the type's minimum, can be the max
    check_op("MaxPool", [x], {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]})


def test_average_and_lp_pool_reject_integers():
    x = np.zeros((1, 1, 4, 4), "uint8")
    for op in ("AveragePool", "LpPool"):
        with pytest.raises(ShapeError, match="input X must be a float tensor, got uint8"):
            run_op(op, [x], {"kernel_shape": [2, 2]})
    with pytest.raises(ShapeError, match="float or 8-bit integer tensor, got int32"):
        run_op("MaxPool", [x.astype("int32")], {"kernel_shape": [2, 2]})
