"""LLVM GPU modules -> PTX text (NVPTX) or an amdgcn code object (AMDGPU), with llvmlite.

    ptx = emit_ptx(program, Target("cuda -arch=sm_90"))          # for the CUDA driver / ptxas
    obj = emit_amdgpu(program, Target("rocm -mcpu=gfx90a"))      # ELF relocatable object
    hsaco = emit_code_object(program, Target("rocm -mcpu=gfx90a"))  # what HIP loads

AMDGPU: the relocatable object is linked by ld.lld into a shared object (an HSA code object,
the file hipModuleLoadData takes), as ROCm's own compilers do. `-code-object` picks the
code object version, 4 by default: ROCm 5 and 6 load it, and so does every ld.lld (14 and
later); 5 needs ld.lld 16 or newer.

PTX: `-arch` picks the SM (default sm_70) and `-ptx` the PTX ISA version (default ptx78,
which every CUDA 11.8+ ptxas accepts); libdevice is linked when the module calls its
functions (found under the CUDA toolkit; CodegenError names what is missing otherwise).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile

import llvmlite.binding as llvm

from llvmlite import ir

from ember.codegen.gpu_kernels import DeviceProgram
from ember.codegen.jit import _initialize_all, optimize, parse_verified
from ember.codegen.llvm_gpu import codegen_llvm_gpu, find_libdevice
from ember.errors import CodegenError
from ember.target import Target

DEFAULT_SM = "sm_70"
DEFAULT_PTX = "ptx78"
DEFAULT_GFX = "gfx90a"
DEFAULT_CODE_OBJECT = "4"


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
    if target.kind == "rocm":
        version = code_object_version(target)
        flag = ir_module.add_metadata([ir.IntType(32)(1), "amdhsa_code_object_version",
                                       ir.IntType(32)(version * 100)])
        ir_module.add_named_metadata("llvm.module.flags", flag)
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


def emit_amdgpu_assembly(program: DeviceProgram, target: Target) -> str:
    """AMDGPU assembly (GCN/RDNA ISA text) of every kernel of `program` (a rocm target)."""
    module, machine = llvm_gpu_module(program, target)
    return machine.emit_assembly(module)


def code_object_version(target: Target) -> int:
    """The HSA code object version of a rocm target (-code-object, 4 by default)."""
    text = target.option("code-object", DEFAULT_CODE_OBJECT)
    if text not in ("4", "5"):
        raise CodegenError(f"target '{target}': -code-object={text} is not supported; "
                           "use 4 or 5")
    return int(text)


def find_lld() -> str | None:
    """ld.lld on PATH (or the newest ld.lld-N), else None."""
    found = shutil.which("ld.lld")
    if found:
        return found
    versions = []
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        if os.path.isdir(directory):
            versions += [(int(m.group(1)), os.path.join(directory, m.group(0)))
                         for m in map(re.compile(r"ld\.lld-(\d+)$").match, os.listdir(directory))
                         if m]
    return max(versions)[1] if versions else None


def link_code_object(obj: bytes) -> bytes:
    """The HSA code object (an ELF shared object) of an amdgcn relocatable object."""
    lld = find_lld()
    if lld is None:
        raise CodegenError("linking an AMDGPU code object needs ld.lld (Debian package lld), "
                           "which is not installed")
    with tempfile.TemporaryDirectory(prefix="ember-amdgpu-") as tmp:
        source, out = os.path.join(tmp, "kernels.o"), os.path.join(tmp, "kernels.hsaco")
        with open(source, "wb") as f:
            f.write(obj)
        result = subprocess.run([lld, "-shared", "--no-undefined", source, "-o", out],
                                capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise CodegenError(f"ld.lld could not link the AMDGPU code object:\n"
                               f"{result.stderr.strip()[:2000]}")
        with open(out, "rb") as f:
            return f.read()


def emit_code_object(program: DeviceProgram, target: Target) -> bytes:
    """The loadable HSA code object of every kernel of `program` (a rocm target)."""
    return link_code_object(emit_amdgpu(program, target))
