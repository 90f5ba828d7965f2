"""Vector loads and stores (OpenCL vloadN / vstoreN, CUDA float4) where lanes are contiguous
(and, for CUDA, proved aligned), and float16 storage on OpenCL, CUDA and Metal."""

import shutil
import subprocess

import numpy as np
import pytest

from ember import te
from ember.errors import CodegenError
from ember.lowering.build import gpu_source
from ember.lowering.kernel import run_op
from ember.ops.gpu import schedule_gpu
from ember.ops.gpu.knobs import GpuInjectiveKnobs
from ember.ops.knobs import Task
from ember.ops.registry import get_op
from ember.target import Target

rng = np.random.default_rng(0)


def _add_source(kind, shape=(4, 256), vector=4, dtype="float32"):
    A = te.placeholder(shape, dtype, name="A")
    B = te.placeholder(shape, dtype, name="B")
    op = get_op("Add")
    outs = op.compute(op.complete_attrs({}), [A, B])
    s = schedule_gpu(op, outs, Target(kind), GpuInjectiveKnobs(64, vector))
    return gpu_source(s, [A, B, *outs], kind)


def _vector_stage(fcompute, kind):
    """A (257,) input, a (256,) output computed by `fcompute`, 4 lanes per thread."""
    A = te.placeholder((257,), "float32", name="A")
    out = te.compute((256,), lambda j: fcompute(A, j), name="out")
    s = te.create_schedule(out.op)
    outer, lanes = s[out].split(out.op.axis[0], 4)
    s[out].vectorize(lanes)
    s[out].bind(outer, "threadIdx.x")
    return gpu_source(s, [A, out], kind)


def test_contiguous_lanes_load_and_store_as_vectors():
    opencl = _add_source("opencl")
    assert opencl.count("vload4(0, ") == 2 and opencl.count("vstore4(") == 1
    cuda = _add_source("cuda")
    assert cuda.count("*(const float4*)(") == 2 and cuda.count("*(float4*)(") == 1
    scalar = _add_source("opencl", vector=1)
    assert "vload" not in scalar.replace("vload_half", "")


def test_unaligned_lanes_are_vectors_on_opencl_only():
    # A[j + 1]: contiguous, but its start is no multiple of 4 (float4 needs 16 bytes)
    def shifted(A, j):
        return A[j + 1] * 2.0
    assert "vload4(0, " in _vector_stage(shifted, "opencl")
    cuda = _vector_stage(shifted, "cuda")
    assert "const float4" not in cuda and "*(float4*)(" in cuda  # the store is aligned


def test_loads_under_a_condition_stay_scalar():
    def either(A, j):
        return te.if_then_else(j < 32, A[j], A[j + 1])
    source = _vector_stage(either, "opencl")
    assert "vload4" not in source and "vstore4(" in source


@pytest.mark.parametrize("shape,vector", [((4, 70), 4), ((3, 7), 4), ((2, 64), 2)])
def test_vectorized_elementwise_matches_numpy(opencl, shape, vector):
    a = rng.standard_normal(shape).astype("float32")
    b = rng.standard_normal(shape).astype("float32")
    (got,) = run_op("Add", [a, b], {}, target="opencl", knobs=GpuInjectiveKnobs(64, vector))
    np.testing.assert_array_equal(got, a + b)


def test_injective_knobs_offer_vector_lanes_to_the_tuner():
    A = te.placeholder((8, 8), "float32", name="A")
    task = Task((A,), Target("opencl"))
    assert GpuInjectiveKnobs.default(task).vector == 1
    assert GpuInjectiveKnobs.space(task).choices["vector"] == (1, 2, 4)


def test_float16_on_opencl_matches_numpy(opencl):
    a = rng.standard_normal((4, 70)).astype("float16")
    b = rng.standard_normal((4, 70)).astype("float16")
    (got,) = run_op("Add", [a, b], {}, target="opencl")
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, a + b)  # exact in float, rounded once to half
    x = rng.standard_normal((3, 9)).astype("float32") * 100
    (cast,) = run_op("Cast", [x], {"to": 10}, target="opencl")
    np.testing.assert_array_equal(cast, x.astype(np.float16))
    (sig,) = run_op("Sigmoid", [a], {}, target="opencl")
    want = 1 / (1 + np.exp(-a.astype(np.float32)))
    np.testing.assert_allclose(sig.astype(np.float32), want, rtol=2e-3, atol=1e-3)


def test_float16_on_metal_is_stored_as_half_bits():
    source = _add_source("metal", dtype="float16", vector=1)
    assert "device uint16_t* A [[buffer(0)]]" in source
    assert "float(as_type<half>(A[" in source and "= as_type<ushort>(half(" in source


def test_float16_without_half_storage_is_refused_by_name():
    from dataclasses import replace

    from ember.codegen.gpu_kernels import split_kernels
    from ember.codegen.gpu_source import codegen_source
    from ember.codegen.metal import METAL
    from ember.lowering.build import lower_gpu

    A = te.placeholder((64,), "float16", name="A")
    B = te.compute((64,), lambda i: A[i] + A[i], name="add")
    s = te.create_schedule(B.op)
    s[B].bind(B.op.axis[0], "threadIdx.x")
    program = split_kernels(lower_gpu(s, [A, B]))
    with pytest.raises(CodegenError, match="float16 buffer 'add'.*Metal back end has no "
                                           "float16 storage"):
        codegen_source(program, replace(METAL, half=None))


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc (CUDA toolkit) not installed")
def test_cuda_float4_and_half_compile_with_nvcc(tmp_path):
    for name, source in [("vec", _add_source("cuda")),
                         ("half", _add_source("cuda", dtype="float16"))]:
        path = tmp_path / f"{name}.cu"
        path.write_text(source)
        subprocess.run(["nvcc", "-ptx", "-arch=sm_80", str(path), "-o",
                        str(tmp_path / f"{name}.ptx")], check=True, capture_output=True)
    assert "ld.global.v4.f32" in (tmp_path / "vec.ptx").read_text().replace(".nc", "")
    assert "__half" in _add_source("cuda", dtype="float16")
