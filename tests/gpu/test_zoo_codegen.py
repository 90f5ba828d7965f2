"""Every zoo model's code for the GPU kinds without a device here: CUDA (PTX from LLVM,
assembled by ptxas for sm_90, and CUDA C), ROCm (HSA code objects linked by ld.lld) and
Metal (source checked structurally). Small inputs: the kernels are the same ones."""

import pytest

from ember.zoo import MODELS, build_model

from tests.gpu.metal_lint import metal_problems

EM_CUDA, EM_AMDGPU = 190, 224
# the smallest configuration of each zoo model that keeps its architecture
SMALL = {
    "resnet18": {"image_size": 32}, "resnet50": {"image_size": 32},
    "mobilenet_v2": {"image_size": 32}, "squeezenet": {"image_size": 32},
    "bert": {"layers": 1, "seq_len": 16}, "bert-base": {"layers": 1, "seq_len": 16},
    "bert-tiny": {"layers": 1},
    "lstm_lm": {"layers": 2, "hidden": 32, "embed": 16, "seq_len": 8, "vocab": 50},
}
# bert and bert-base are one builder: one of them is enough
DISTINCT = [n for i, n in enumerate(MODELS) if MODELS[n] not in list(MODELS.values())[:i]]


def test_every_zoo_model_has_a_small_configuration():
    assert set(MODELS) <= set(SMALL), sorted(set(MODELS) - set(SMALL))


def groups_of(model, target):
    from ember.driver_gpu import _groups
    from ember.target import Target

    return _groups(model, Target(target), 3, None, None)[2]


def llvm_code(model, target):
    """(PTX text or code object, the names of the kernels the launches run)."""
    from ember.lowering.gpu_program import llvm_code as build
    from ember.target import Target

    code, launches, _ = build(groups_of(model, target), Target(target))
    return code, {a.kernel for per_group in launches.values() for a in per_group}


def source(model, target):
    """(the model's source, the names of the kernels the launches run)."""
    from ember.driver_gpu import _codes
    from ember.lowering.gpu_program import model_source
    from ember.target import Target

    codes = _codes(groups_of(model, target), Target(target), None)
    names = {a.kernel for c in codes.values() for a in c.launches}
    return model_source(list(codes.values()), Target(target)), names


@pytest.mark.parametrize("name", DISTINCT)
def test_cuda_ptx_assembles_for_every_zoo_model(name, ptxas_tool):
    from ember.codegen.nvptx import assemble_ptx
    from ember.runtime.elf import read_elf

    ptx, names = llvm_code(build_model(name, **SMALL[name]), "cuda -arch=sm_90")
    cubin = read_elf(assemble_ptx(ptx, "sm_90"), f"{name} cubin")
    assert cubin.machine == EM_CUDA
    assert ptx.count(".entry") == len(names) > 0
    assert all(f".entry {k}(" in ptx for k in names)


@pytest.mark.parametrize("name", DISTINCT)
def test_rocm_code_object_for_every_zoo_model(name):
    from ember.runtime.elf import ET_DYN, STT_OBJECT, read_elf

    code, names = llvm_code(build_model(name, **SMALL[name]), "rocm -mcpu=gfx90a")
    elf = read_elf(code, f"{name} code object")
    assert elf.type == ET_DYN and elf.machine == EM_AMDGPU
    assert names and all(elf.defines(k + ".kd", STT_OBJECT) for k in names)


@pytest.mark.parametrize("name", DISTINCT)
def test_metal_and_cuda_source_for_every_zoo_model(name):
    model = build_model(name, **SMALL[name])
    metal, names = source(model, "metal")
    assert metal_problems(metal) == []
    assert metal.count("kernel void ") == len(names) > 0
    assert all(f"kernel void {k}(" in metal for k in names)
    cuda, names = source(model, "cuda")
    assert cuda.count('extern "C" __global__') == len(names) > 0


def test_metal_lint_finds_what_a_compiler_would_reject():
    good = """#include <metal_stdlib>
using namespace metal;
kernel void k(device float* A [[buffer(0)]], constant int32_t& n [[buffer(1)]], \
uint3 ember_block [[threadgroup_position_in_grid]], \
uint3 ember_thread [[thread_position_in_threadgroup]]) {
    A[ember_thread.x] = exp(A[0]);
}"""
    assert metal_problems(good) == []
    assert "call of undefined function 'erf'" in metal_problems(good.replace("exp(", "erf("))
    assert "unbalanced {}" in metal_problems(good + "}")
    assert "foreign token '__global'" in metal_problems(good.replace("device", "__global"))
    assert any("buffer indices [0, 2]" in p
               for p in metal_problems(good.replace("buffer(1)", "buffer(2)")))


class PtxCheckingDevice:
    """A stand-in for ember.runtime.cuda.CudaDevice (no GPU here) that checks what the CUDA
    executor sends: every launch names a PTX entry, with as many arguments as it declares."""

    kind = "cuda"

    def __init__(self):
        self.entries = {}
        self.launches = 0
        self.next = 256

    def build(self, ptx):
        import re

        for name, params in re.findall(r"\.entry (\w+)\((.*?)\)", ptx, flags=re.S):
            self.entries[name] = params.count(".param")
        return ptx

    def alloc(self, nbytes):
        self.next += (max(nbytes, 4) + 255) // 256 * 256
        return self.next

    def copy_in(self, buffer, array, offset=0):
        pass

    def copy_out(self, array, buffer, offset=0):
        pass

    def launch(self, program, name, args, grid, block):
        assert len(args) == self.entries[name], name
        assert all(g >= 1 for g in grid) and 1 <= block[0] * block[1] * block[2] <= 1024
        self.launches += 1

    def synchronize(self):
        pass

    @staticmethod
    def buffer_args(buffer, offset):
        from ember.runtime.cuda import CudaDevice

        return CudaDevice.buffer_args(buffer, offset)

    @staticmethod
    def scalar_arg(value, dtype):
        from ember.runtime.cuda import CudaDevice

        return CudaDevice.scalar_arg(value, dtype)


@pytest.mark.parametrize("name", ["resnet18", "lstm_lm"])
def test_cuda_executor_launches_match_the_ptx(name):
    from ember.driver_gpu import compile_gpu
    from ember.target import Target
    from ember.zoo import random_inputs

    model = build_model(name, **SMALL[name])
    device = PtxCheckingDevice()
    compiled = compile_gpu(model, Target("cuda -codegen=llvm -arch=sm_90"), device=device,
                           cache=False)
    compiled.run(random_inputs(model, seed=0))
    assert device.launches >= len(device.entries) > 0
