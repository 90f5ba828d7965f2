"""GPU convolution (implicit GEMM, direct, depthwise) and pooling schedules on OpenCL (PoCL
on CPUs) against onnxruntime, for every algorithm and some odd tile knobs; the kernels'
shapes (shared tiles, one kernel per group) and the knobs' errors."""

import shutil
import subprocess

import numpy as np
import pytest

from ember.errors import ScheduleError
from ember.graph.ir import Node, Value, tensor_type
from ember.lowering.build import lower_gpu
from ember.lowering.kernel import lower_group_kernels, run_op
from ember.codegen.gpu import gpu_code
from ember.ops.gpu.conv import GpuConvKnobs
from ember.ops.gpu.pool import GpuPoolKnobs
from ember.ops.registry import get_op
from ember.target import Target
from tests.ops.onnx_ref import onnx_run

rng = np.random.default_rng(1)


def rand(*shape):
    return rng.standard_normal(shape).astype("float32")


def lowered(op, shapes, attrs, knobs=None, target="opencl"):
    """The group's device program (kernels) and source for one op."""
    opdef = get_op(op)
    full = opdef.complete_attrs(attrs, op)
    values = [Value(f"x{i}", tensor_type(s, "float32")) for i, s in enumerate(shapes)]
    types = opdef.infer(full, [v.type for v in values])
    outs = [Value(f"y{i}", t) for i, t in enumerate(types)]
    node = Node(op, "n", tuple(values), tuple(outs), full)
    kernels = lower_group_kernels([node], values, outs[:1], "k", target, knobs=knobs)
    return gpu_code(lower_gpu(kernels.main), Target(target))


CONVS = [
    # (x, w, bias?, attrs): 3x3 padded, strided with bias and odd sizes, 1x1, dilated
    ((1, 4, 9, 9), (8, 4, 3, 3), False, {"pads": [1, 1, 1, 1]}),
    ((2, 5, 10, 11), (12, 5, 3, 3), True, {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
    ((1, 16, 7, 7), (24, 16, 1, 1), True, {}),
    ((1, 3, 12, 12), (6, 3, 3, 3), False, {"dilations": [2, 2], "pads": [2, 1, 2, 1]}),
]
KNOBS = [None, GpuConvKnobs("gemm", 4, 2, 2, 8, 8), GpuConvKnobs("direct", 2, 4, 4, 4, 2),
         GpuConvKnobs("gemm", 3, 3, 3, 5, 7), GpuConvKnobs("direct", 3, 1, 5, 3, 3)]
# (conv case, knobs): every case with the default, each algorithm on the awkward shapes
PAIRS = [(0, 0), (1, 0), (2, 0), (3, 0), (0, 1), (1, 2), (1, 3), (3, 4), (2, 2)]


@pytest.mark.parametrize("case,knob", PAIRS)
def test_conv_matches_onnxruntime(opencl, case, knob):
    xs, ws, bias, attrs = CONVS[case]
    inputs = [rand(*xs), rand(*ws)] + ([rand(ws[0])] if bias else [])
    (ref,) = onnx_run("Conv", inputs, attrs)
    got = _run_with_knobs("Conv", inputs, attrs, KNOBS[knob])
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def _run_with_knobs(op, inputs, attrs, knobs):
    """run_op on OpenCL with the anchor's knobs set (the same path compile(knobs=) takes)."""
    from ember.lowering.build import build_gpu

    opdef = get_op(op)
    full = opdef.complete_attrs(attrs, op)
    values = [Value(f"x{i}", tensor_type(a.shape, a.dtype)) for i, a in enumerate(inputs)]
    types = opdef.infer(full, [v.type for v in values])
    outs = [Value(f"y{i}", t) for i, t in enumerate(types)]
    node = Node(op, "n", tuple(values), tuple(outs), full)
    kernels = lower_group_kernels([node], values, outs[:1], "k", "opencl", knobs=knobs)
    module = build_gpu(lower_gpu(kernels.main), Target("opencl"))
    result = np.zeros(types[0].shape, "float32")
    module(*inputs, result)
    return result


@pytest.mark.parametrize("attrs,mult", [({"pads": [1, 1, 1, 1]}, 1),
                                        ({"strides": [2, 2], "pads": [0, 1, 0, 1]}, 1),
                                        ({"pads": [2, 2, 2, 2]}, 2)])
def test_depthwise_matches_onnxruntime(opencl, attrs, mult):
    channels = 6
    k = 5 if mult == 2 else 3
    inputs = [rand(2, channels, 10, 9), rand(channels * mult, 1, k, k), rand(channels * mult)]
    full = {**attrs, "group": channels}
    (ref,) = onnx_run("Conv", inputs, full)
    got = run_op("Conv", inputs, full, target="opencl")[0]
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def test_conv_kernels_stage_tiles_in_shared_memory():
    _, gemm = lowered("Conv", [(1, 8, 14, 14), (16, 8, 3, 3)], {"pads": [1, 1, 1, 1]},
                      GpuConvKnobs("gemm", 4, 2, 4, 4, 8))
    assert "__local float col_shared[128];" in gemm       # 8 k-rows x 4x4 pixels
    assert "__local float wmat_shared[64];" in gemm       # 8 output channels x 8 k
    assert "float conv[2];" in gemm                       # reg_oc accumulators
    _, direct = lowered("Conv", [(1, 8, 14, 14), (16, 8, 3, 3)], {"pads": [1, 1, 1, 1]},
                        GpuConvKnobs("direct", 4, 2, 4, 4, 2))
    assert "__local float pad_shared[72];" in direct      # 2 channels x 6x6 window
    assert "_shared[144];" in direct                      # 8 x 2 x 3x3 weights
    program, dw = lowered("Conv", [(1, 6, 8, 8), (6, 1, 3, 3)], {"pads": [1, 1, 1, 1],
                                                                  "group": 6})
    assert len(program.kernels) == 1 and "pad_shared" in dw


def test_pool_is_one_kernel_with_rows_in_shared_memory():
    program, src = lowered("MaxPool", [(1, 4, 9, 9)], {"kernel_shape": [3, 3],
                                                        "strides": [2, 2]},
                           GpuPoolKnobs(2, 2, 4))
    assert len(program.kernels) == 1
    assert "__local float maxpool_rows[" in src and src.count("barrier(") >= 1


POOLS = [
    ("MaxPool", (2, 5, 13, 11), {"kernel_shape": [3, 3], "strides": [2, 2],
                                  "pads": [1, 1, 1, 1]}),
    ("AveragePool", (1, 3, 9, 10), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),
    ("AveragePool", (1, 3, 8, 8), {"kernel_shape": [2, 2], "strides": [2, 2]}),
    ("MaxPool", (1, 3, 20), {"kernel_shape": [3], "strides": [2]}),
]


@pytest.mark.parametrize("case,knobs", [(0, None), (1, None), (2, None), (3, None),
                                        (0, GpuPoolKnobs(3, 2, 5))])
def test_pool_matches_onnxruntime(opencl, case, knobs):
    op, shape, attrs = POOLS[case]
    x = rand(*shape)
    (ref,) = onnx_run(op, [x], attrs)[:1]
    got = _run_with_knobs(op, [x], attrs, knobs)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_conv_knobs_errors():
    shapes = [(1, 8, 14, 14), (16, 8, 3, 3)]
    with pytest.raises(ScheduleError, match="knob algo='winograd' must be one of"):
        lowered("Conv", shapes, {}, GpuConvKnobs(algo="winograd"))
    with pytest.raises(ScheduleError, match="2048 threads exceeds the target's 256"):
        lowered("Conv", shapes, {}, GpuConvKnobs(tile_oc=8, tile_h=16, tile_w=16))
    with pytest.raises(ScheduleError, match="bytes in shared memory, more than"):
        lowered("Conv", shapes, {}, GpuConvKnobs(chunk=1000), target="cuda")
    with pytest.raises(ScheduleError, match="expected GpuConvKnobs knobs, got GpuPoolKnobs"):
        lowered("Conv", shapes, {}, GpuPoolKnobs())
    with pytest.raises(ScheduleError, match="knob tile_w=0 is outside"):
        lowered("MaxPool", [(1, 2, 8, 8)], {"kernel_shape": [2, 2]}, GpuPoolKnobs(tile_w=0))


def test_default_knobs_fit_every_target():
    from ember.ops.knobs import Task
    from ember.lowering.kernel import group_compute

    for target in ("opencl", "cuda", "rocm", "metal"):
        opdef = get_op("Conv")
        full = opdef.complete_attrs({"pads": [1, 1, 1, 1]}, "Conv")
        x = Value("x", tensor_type((1, 64, 56, 56), "float32"))
        w = Value("w", tensor_type((64, 64, 3, 3), "float32"))
        y = Value("y", opdef.infer(full, [x.type, w.type])[0])
        _, env = group_compute([Node("Conv", "c", (x, w), (y,), full)], [x, w], Target(target))
        task = Task((env[y],), Target(target), "Conv")
        GpuConvKnobs.default(task).check(task)  # raises if the default does not fit


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc (CUDA toolkit) not installed")
def test_conv_and_pool_cuda_compile_with_nvcc(tmp_path):
    for i, (op, shapes, attrs) in enumerate([
            ("Conv", [(1, 8, 14, 14), (16, 8, 3, 3)], {"pads": [1, 1, 1, 1]}),
            ("Conv", [(1, 8, 56, 56), (16, 8, 3, 3)], {"pads": [1, 1, 1, 1]}),
            ("Conv", [(1, 6, 8, 8), (6, 1, 3, 3)], {"pads": [1, 1, 1, 1], "group": 6}),
            ("MaxPool", [(1, 4, 9, 9)], {"kernel_shape": [3, 3], "strides": [2, 2]})]):
        _, src = lowered(op, shapes, attrs, target="cuda")
        path = tmp_path / f"k{i}.cu"
        path.write_text(src)
        subprocess.run(["nvcc", "-ptx", "-arch=sm_90", str(path), "-o",
                        str(tmp_path / f"k{i}.ptx")], check=True, capture_output=True)
