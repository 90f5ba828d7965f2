"""The rocm target: AMDGPU assembly, HSA code objects linked by ld.lld, and the float32 math
formulas that stand in for a device math library (checked on the host against numpy)."""

import ctypes
import math

import numpy as np
import pytest
from llvmlite import ir

from ember.codegen.gpu_llvm_build import emit_amdgpu, emit_code_object
from ember.errors import CodegenError, TargetError
from ember.lowering.build import gpu_source
from ember.runtime.elf import ET_DYN, STT_FUNC, STT_OBJECT, read_elf
from ember.target import Target

from tests.gpu.test_llvm_gpu import program
from tests.gpu.test_schedule import tiled_matmul

EM_AMDGPU = 224
ELFOSABI_AMDGPU_HSA = 64


def host_function(stem, arity):
    """ember.amdgpu.<stem> compiled for this CPU, callable from Python."""
    import llvmlite.binding as llvm

    from ember.codegen.jit import _initialize_all
    from ember.codegen.llvm_gpu import amdgpu_formula

    _initialize_all()
    module = ir.Module(name=stem)
    module.triple = llvm.get_process_triple()
    f32 = ir.FloatType()
    inner = amdgpu_formula(module, stem, f32)
    outer = ir.Function(module, ir.FunctionType(f32, [f32] * arity), name="entry")
    builder = ir.IRBuilder(outer.append_basic_block())
    builder.ret(builder.call(inner, list(outer.args)))
    machine = llvm.Target.from_default_triple().create_target_machine()
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(str(module)), machine)
    engine.finalize_object()
    host_function.engines.append(engine)  # keep the code alive
    return ctypes.CFUNCTYPE(ctypes.c_float, *[ctypes.c_float] * arity)(
        engine.get_function_address("entry"))


host_function.engines = []


def test_erf_formula_matches_math_erf():
    erf = host_function("erf", 1)
    xs = np.concatenate([np.linspace(-6, 6, 2001), [0.0, 1e-6, -1e-30, 0.4999, 0.5, 0.5001]])
    got = np.array([erf(float(x)) for x in xs])
    ref = np.array([math.erf(float(np.float32(x))) for x in xs])
    np.testing.assert_allclose(got, ref, rtol=2e-6, atol=2e-7)
    assert math.isnan(erf(math.nan)) and erf(math.inf) == 1.0 and erf(-math.inf) == -1.0


def test_pow_formula_matches_numpy_on_signs_and_integers():
    pow_ = host_function("pow", 2)
    rng = np.random.default_rng(0)
    xs = rng.uniform(0.01, 10, 300).astype(np.float32)
    ys = rng.uniform(-4, 4, 300).astype(np.float32)
    got = np.array([pow_(float(x), float(y)) for x, y in zip(xs, ys)])
    np.testing.assert_allclose(got, np.power(xs, ys), rtol=1e-5)
    cases = [(-2.0, 3.0), (-2.0, 2.0), (-8.0, -1.0), (2.0, 0.0), (0.0, 0.0), (0.0, 2.0),
             (0.0, -1.0), (-1.5, 0.0)]
    for x, y in cases:
        assert pow_(x, y) == pytest.approx(float(np.power(np.float32(x), np.float32(y))))
    assert math.isnan(pow_(-2.0, 0.5))


@pytest.mark.parametrize("stem,reference", [("tanh", np.tanh), ("log10", np.log10),
                                            ("exp10", lambda x: np.power(10.0, x)),
                                            ("tan", np.tan)])
def test_other_formulas_match_numpy(stem, reference):
    f = host_function(stem, 1)
    xs = np.linspace(0.05, 3.0, 200) if stem == "log10" else np.linspace(-1.4, 1.4, 200)
    got = np.array([f(float(x)) for x in xs])
    np.testing.assert_allclose(got, reference(xs.astype(np.float32)), rtol=2e-6, atol=1e-7)
    if stem == "tanh":
        assert f(math.inf) == 1.0 and f(-100.0) == -1.0


def test_float64_math_is_refused_by_name():
    target = Target("rocm")
    with pytest.raises(CodegenError, match=r"erf \(float64\) has no AMDGPU lowering"):
        emit_amdgpu(program("Erf", [(4, 30)], {}, target, "float64"), target)


@pytest.mark.parametrize("gfx,mach", [("gfx90a", 0x3F), ("gfx1100", 0x41)])
def test_code_object_is_a_loadable_hsa_shared_object(gfx, mach):
    target = Target(f"rocm -mcpu={gfx}")
    prog = program("Conv", [(1, 8, 14, 14), (16, 8, 3, 3)], {"pads": [1, 1, 1, 1]}, target)
    data = emit_code_object(prog, target)
    elf = read_elf(data, "code object")
    assert elf.type == ET_DYN and elf.machine == EM_AMDGPU
    assert data[7] == ELFOSABI_AMDGPU_HSA and data[8] == 2  # code object v4
    e_flags = int.from_bytes(data[48:52], "little")
    assert e_flags & 0xFF == mach
    for kernel in prog.kernels:  # the function and its kernel descriptor, which HIP reads
        assert elf.defines(kernel.name, STT_FUNC)
        assert elf.defines(kernel.name + ".kd", STT_OBJECT)
    assert b"amdhsa.kernels" in data and gfx.encode() in data


def test_code_object_version_5_and_a_bad_one():
    target = Target("rocm -code-object=5")
    prog = program("Tanh", [(4, 30)], {}, target)
    from ember.codegen.gpu_llvm_build import find_lld

    import subprocess

    version = subprocess.run([find_lld(), "--version"], capture_output=True, text=True).stdout
    major = int(version.split("LLD ")[1].split(".")[0])
    if major >= 16:
        assert emit_code_object(prog, target)[8] == 3
    else:  # ld.lld 14 and 15 know code objects up to v4, and say so
        with pytest.raises(CodegenError, match="ld.lld could not link the AMDGPU code object"):
            emit_code_object(prog, target)
    with pytest.raises(CodegenError, match="-code-object=7 is not supported; use 4 or 5"):
        emit_code_object(prog, Target("rocm -code-object=7"))


def test_missing_linker_is_a_clear_error(monkeypatch):
    import ember.codegen.gpu_llvm_build as build

    monkeypatch.setattr(build, "find_lld", lambda: None)
    target = Target("rocm")
    with pytest.raises(CodegenError, match="needs ld.lld"):
        emit_code_object(program("Tanh", [(4, 30)], {}, target), target)


def test_gpu_source_for_rocm_is_amdgpu_assembly():
    s, A, B, C = tiled_matmul()
    text = gpu_source(s, [A, B, C], "rocm -mcpu=gfx90a", "mm")
    assert ".amdhsa_kernel mm_kernel0" in text and ".amdgcn_target" in text
    assert "s_barrier" in text and "ds_read" in text  # shared tiles and their barrier


def test_shared_memory_over_the_limit_is_refused():
    s, A, B, C = tiled_matmul()  # two 8x8 float tiles: 512 bytes
    for kind in ("rocm", "opencl", "cuda", "metal"):
        with pytest.raises(CodegenError, match="declares 512 bytes of shared memory .* more "
                                               "than the target's 256 per block"):
            gpu_source(s, [A, B, C], f"{kind} -max-shared-memory-per-block=256", "mm")


def test_rocm_has_no_runtime_here():
    import ember
    from ember.zoo import build_model

    with pytest.raises(ember.errors.EmberError, match="target kind 'rocm' generates code only"):
        ember.compile(build_model("bert-tiny", layers=1), target="rocm")
    with pytest.raises(TargetError, match="unknown option"):
        Target("rocm -arch=sm_90")
