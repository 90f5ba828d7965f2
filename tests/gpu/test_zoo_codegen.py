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


def kernel_names(model, target):
    from ember.driver_gpu import _groups
    from ember.lowering.gpu_program import lower_group_program
    from ember.target import Target

    _, _, groups = _groups(model, Target(target), 3, None, None)
    names, seen = set(), set()
    for g in groups:
        if g.symbol not in seen:
            seen.add(g.symbol)
            names |= {k.name for k in lower_group_program(g, Target(target))[0].kernels}
    return names


@pytest.mark.parametrize("name", DISTINCT)
def test_cuda_ptx_assembles_for_every_zoo_model(name, ptxas_tool):
    from ember.codegen.nvptx import assemble_ptx
    from ember.driver_gpu import model_llvm_code
    from ember.runtime.elf import read_elf

    model = build_model(name, **SMALL[name])
    ptx = model_llvm_code(model, "cuda -arch=sm_90")
    cubin = read_elf(assemble_ptx(ptx, "sm_90"), f"{name} cubin")
    assert cubin.machine == EM_CUDA
    assert ptx.count(".entry") == len(kernel_names(model, "cuda")) > 0


@pytest.mark.parametrize("name", DISTINCT)
def test_rocm_code_object_for_every_zoo_model(name):
    from ember.driver_gpu import model_llvm_code
    from ember.runtime.elf import ET_DYN, STT_OBJECT, read_elf

    model = build_model(name, **SMALL[name])
    elf = read_elf(model_llvm_code(model, "rocm -mcpu=gfx90a"), f"{name} code object")
    assert elf.type == ET_DYN and elf.machine == EM_AMDGPU
    names = kernel_names(model, "rocm")
    assert names and all(elf.defines(k + ".kd", STT_OBJECT) for k in names)


@pytest.mark.parametrize("name", DISTINCT)
def test_metal_and_cuda_source_for_every_zoo_model(name):
    from ember.driver_gpu import model_source

    model = build_model(name, **SMALL[name])
    metal = model_source(model, "metal")
    assert metal_problems(metal) == []
    assert metal.count("kernel void ") == len(kernel_names(model, "metal"))
    cuda = model_source(model, "cuda")
    assert cuda.count('extern "C" __global__') == len(kernel_names(model, "cuda"))


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
