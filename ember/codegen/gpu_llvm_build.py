"""LLVM GPU modules -> PTX text (NVPTX) or an amdgcn code object (AMDGPU), with llvmlite.

    ptx = emit_ptx(program, Target("cuda -arch=sm_90"))        # for the CUDA driver / ptxas
    hsaco = emit_amdgpu(program, Target("rocm -mcpu=gfx90a"))  # ELF relocatable object

PTX: `-arch` picks the SM (default sm_70) and `-ptx` the PTX ISA version (default ptx78,
which every CUDA 11.8+ ptxas accepts); libdevice is linked when the module calls its
functions (found under the CUDA toolkit; CodegenError names what is missing otherwise).
"""

from __future__ import annotations

import llvmlite.binding as llvm

from ember.codegen.gpu_kernels import DeviceProgram
from ember.codegen.jit import _initialize_all, optimize, parse_verified
from ember.codegen.llvm_gpu import codegen_llvm_gpu, find_libdevice
from ember.errors import CodegenError
from ember.target import Target

DEFAULT_SM = "sm_70"
DEFAULT_PTX = "ptx78"
DEFAULT_GFX = "gfx90a"


def _machine(target: Target) -> llvm.TargetMachine:
    _initialize_all()
    if target.kind == "cuda":
        cpu = target.option("arch", DEFAULT_SM)
        features = f"+{target.option('ptx', DEFAULT_PTX)}"
    else:
        cpu = target.mcpu or DEFAULT_GFX
        features = ",".join(target.mattr)
    try:
        llvm_target = llvm.Target.from_triple(target.triple)
    except RuntimeError as error:
        raise CodegenError(f"target '{target}': this LLVM has no backend for "
                           f"'{target.triple}': {error}") from None
    return llvm_target.create_target_machine(cpu=cpu, features=features, opt=3, reloc="pic",
                                             codemodel="default")


def _link_libdevice(module: llvm.ModuleRef) -> None:
    calls = [f.name for f in module.functions if f.is_declaration and f.name.startswith("__nv_")]
    if not calls:
        return
    path = find_libdevice()
    if path is None:
        raise CodegenError(f"the kernels call {', '.join(sorted(calls)[:4])} from libdevice, "
                           "and no libdevice.10.bc was found (set CUDA_HOME to a CUDA toolkit)")
    with open(path, "rb") as f:
        library = llvm.parse_bitcode(f.read())
    library.triple = module.triple
    library.data_layout = module.data_layout
    module.link_in(library)
    for fn in module.functions:  # libdevice's definitions: internal, so -O3 drops unused
        if not fn.is_declaration and fn.name.startswith("__nv_"):
            fn.linkage = llvm.Linkage.internal
    for gv in module.global_variables:
        if not gv.is_declaration and gv.name.startswith("__nv"):
            gv.linkage = llvm.Linkage.internal


def llvm_gpu_module(program: DeviceProgram, target: Target) -> tuple[llvm.ModuleRef,
                                                                     llvm.TargetMachine]:
    """The program's LLVM module, verified, linked (libdevice) and optimized at -O3."""
    machine = _machine(target)
    ir_module = codegen_llvm_gpu(program, target)
    ir_module.data_layout = str(machine.target_data)
    module = parse_verified(str(ir_module), "GPU LLVM IR")
    if target.kind == "cuda":
        _link_libdevice(module)
    optimize(module, machine)
    return module, machine


def emit_ptx(program: DeviceProgram, target: Target) -> str:
    """PTX assembly of every kernel of `program` (a cuda target)."""
    module, machine = llvm_gpu_module(program, target)
    return machine.emit_assembly(module)


def emit_amdgpu(program: DeviceProgram, target: Target) -> bytes:
    """An amdgcn ELF object with every kernel of `program` (a rocm target)."""
    module, machine = llvm_gpu_module(program, target)
    return machine.emit_object(module)
