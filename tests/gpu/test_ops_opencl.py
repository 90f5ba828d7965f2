"""Every op family on OpenCL (PoCL on CPUs) against onnxruntime, through the GPU schedules."""

import numpy as np
import pytest

from ember.errors import ScheduleError
from ember.lowering.kernel import run_op
from tests.ops.onnx_ref import onnx_run

rng = np.random.default_rng(0)


def rand(*shape):
    return rng.standard_normal(shape).astype("float32")


CASES = [
    # injective: elementwise, broadcast, layout
    ("Add", [rand(2, 3, 8), rand(3, 1)], {}),
    ("Sigmoid", [rand(4, 70)], {}),
    ("Transpose", [rand(2, 3, 5)], {"perm": [2, 0, 1]}),
    # reductions: per-thread and one block per row
    ("ReduceSum", [rand(3, 40)], {"axes": [1], "keepdims": 1}),
    ("ReduceMean", [rand(2, 600)], {"axes": [1], "keepdims": 0}),
    ("Softmax", [rand(3, 257)], {"axis": -1}),
    ("LayerNormalization", [rand(4, 160), rand(160), rand(160)], {"axis": -1}),
    # matrix products: shared-memory tiles and thin ones
    ("MatMul", [rand(40, 36), rand(36, 20)], {}),
    ("MatMul", [rand(3, 17, 33), rand(3, 33, 18)], {}),
    ("Gemm", [rand(1, 64), rand(32, 64), rand(32)], {"transB": 1}),
    # convolutions: direct, strided, depthwise
    ("Conv", [rand(1, 4, 9, 9), rand(8, 4, 3, 3)], {"pads": [1, 1, 1, 1]}),
    ("Conv", [rand(1, 4, 9, 9), rand(8, 4, 3, 3)], {"strides": [2, 2]}),
    ("Conv", [rand(1, 6, 8, 8), rand(6, 1, 3, 3)], {"pads": [1, 1, 1, 1], "group": 6}),
    # pooling
    ("MaxPool", [rand(1, 3, 8, 8)], {"kernel_shape": [3, 3], "strides": [2, 2]}),
    ("AveragePool", [rand(1, 3, 8, 8)], {"kernel_shape": [2, 2], "strides": [2, 2]}),
    ("GlobalAveragePool", [rand(1, 5, 16, 16)], {}),
]


@pytest.mark.parametrize("op,inputs,attrs", CASES, ids=[f"{c[0]}{i}" for i, c in enumerate(CASES)])
def test_op_matches_onnxruntime(opencl, op, inputs, attrs):
    onnx_attrs = dict(attrs)
    const = {}
    if op.startswith("Reduce"):  # axes is an input from opset 18 on
        const = {1: np.array(onnx_attrs.pop("axes"), np.int64)}
    (ref,) = onnx_run(op, inputs, onnx_attrs, const_inputs=const)
    got = run_op(op, inputs, attrs, target="opencl")[0]
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def test_scan_has_no_gpu_schedule():
    x = rand(3, 1, 4)
    w, r = rand(1, 8, 4), rand(1, 8, 2)
    with pytest.raises(ScheduleError, match="recurrences .scan. have no GPU schedule"):
        run_op("LSTM", [x, w, r], {"hidden_size": 2}, target="opencl")
