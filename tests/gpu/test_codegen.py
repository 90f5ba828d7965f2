"""GPU code generators: OpenCL C, CUDA C (compiled by nvcc when present), Metal."""

import shutil
import subprocess

import pytest

from ember import te
from ember.lowering.build import gpu_source, lower_gpu
from ember.codegen.gpu_kernels import split_kernels
from ember.errors import CodegenError
from ember.ops.gpu import schedule_gpu
from ember.ops.registry import get_op
from ember.target import Target

from tests.gpu.test_schedule import tiled_matmul


def softmax_schedule():
    X = te.placeholder((4, 300), "float32", name="X")
    op = get_op("Softmax")
    outs = op.compute(op.complete_attrs({"axis": -1}), [X])
    return schedule_gpu(op, outs, Target("opencl")), [X, *outs]


def test_split_kernels_launch_shapes():
    s, A, B, C = tiled_matmul()
    program = split_kernels(lower_gpu(s, [A, B, C], "mm"))
    (kernel,) = program.kernels
    assert kernel.grid == (4, 4, 1) and kernel.block == (8, 8, 1)
    assert [b.name for b in kernel.buffers] == ["A", "B", "C"]


def test_softmax_is_three_kernels_with_block_reductions():
    s, args = softmax_schedule()
    program = split_kernels(lower_gpu(s, args, "softmax"))
    # row max, row sum (one block per row, 64 threads), then the elementwise quotient
    assert len(program.kernels) == 3
    assert program.kernels[0].grid == (4, 1, 1) and program.kernels[0].block == (64, 1, 1)
    assert len(program.temporaries) == 2


def test_opencl_source_shape():
    s, args = softmax_schedule()
    text = gpu_source(s, args, "opencl", "softmax")
    assert text.count("__kernel ") == 3
    assert "reqd_work_group_size(64, 1, 1)" in text
    assert "exp(" in text and "expf(" not in text  # OpenCL's overloaded built-ins
    assert "__local float" in text and "barrier(CLK_LOCAL_MEM_FENCE);" in text
    # thread 0 alone combines the partial results
    assert "if ((int32_t)get_local_id(0) < 1)" in text


def test_metal_source_shape():
    s, A, B, C = tiled_matmul()
    text = gpu_source(s, [A, B, C], "metal", "mm")
    assert "kernel void mm_kernel0(device float* A [[buffer(0)]]" in text
    assert "threadgroup float A_shared[64];" in text
    assert "threadgroup_barrier(mem_flags::mem_threadgroup);" in text
    assert "uint3 ember_thread [[thread_position_in_threadgroup]]" in text


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc (CUDA toolkit) not installed")
@pytest.mark.parametrize("which", ["matmul", "softmax"])
def test_cuda_source_compiles_with_nvcc(which, tmp_path):
    if which == "matmul":
        s, A, B, C = tiled_matmul()
        text = gpu_source(s, [A, B, C], "cuda", "mm")
    else:
        s, args = softmax_schedule()
        text = gpu_source(s, args, "cuda", "softmax")
    assert "__syncthreads();" in text and "__shared__ float" in text
    source = tmp_path / "k.cu"
    source.write_text(text)
    subprocess.run(["nvcc", "-ptx", "-arch=sm_90", str(source), "-o", str(tmp_path / "k.ptx")],
                   check=True, capture_output=True)
    ptx = (tmp_path / "k.ptx").read_text()
    assert ".entry" in ptx and "bar.sync" in ptx
    if shutil.which("ptxas"):
        subprocess.run(["ptxas", "-arch=sm_90", str(tmp_path / "k.ptx"), "-o",
                        str(tmp_path / "k.cubin")], check=True, capture_output=True)


def test_too_many_threads_per_block():
    A = te.placeholder((4096,), "float32", name="A")
    B = te.compute((4096,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    bo, bi = s[B].split(B.op.axis[0], 2048)
    s[B].bind(bo, "blockIdx.x")
    s[B].bind(bi, "threadIdx.x")
    with pytest.raises(CodegenError, match="2048 threads per block .* exceed the target's 256"):
        gpu_source(s, [A, B], "opencl")
    with pytest.raises(CodegenError, match="exceed the target's 1024"):
        gpu_source(s, [A, B], "cuda")


def test_float16_is_stored_as_half_on_every_source_dialect():
    A = te.placeholder((64,), "float16", name="A")
    B = te.compute((64,), lambda i: A[i] + A[i], name="B")
    s = te.create_schedule(B.op)
    s[B].bind(B.op.axis[0], "threadIdx.x")
    assert "vstore_half(" in gpu_source(s, [A, B], "opencl")
    assert "__float2half(" in gpu_source(s, [A, B], "cuda")
    assert "as_type<ushort>(half(" in gpu_source(s, [A, B], "metal")


def test_float64_is_rejected_on_metal():
    A = te.placeholder((64,), "float64", name="A")
    B = te.compute((64,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    s[B].bind(B.op.axis[0], "threadIdx.x")
    with pytest.raises(CodegenError, match="Metal has no 64-bit floats"):
        gpu_source(s, [A, B], "metal")


def test_cpu_target_is_not_a_gpu():
    from ember.codegen.gpu import gpu_code
    from ember.errors import TargetError

    s, A, B, C = tiled_matmul()
    with pytest.raises(TargetError, match="target kind 'llvm' is not a GPU"):
        gpu_code(lower_gpu(s, [A, B, C]), Target("llvm"))
