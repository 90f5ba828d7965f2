"""GPU kernels -> LLVM IR for NVPTX (PTX text) and AMDGPU (amdgcn code objects) via llvmlite.

The same statement and expression emitters as the CPU back end (ember.codegen.llvm), with
what a GPU kernel needs on top:

- a thread-bound loop reads its index from the hardware: `llvm.nvvm.read.ptx.sreg.tid.x`
  / `ctaid.x` (NVPTX), `llvm.amdgcn.workitem.id.x` / `workgroup.id.x` (AMDGPU), guarded
  when the loop is shorter than the launch;
- shared buffers are module globals in address space 3, used through generic pointers (the
  backends' address-space inference turns the accesses back into shared loads/stores);
- barriers are `llvm.nvvm.barrier0` / `llvm.amdgcn.s.barrier` between workgroup fences;
- math that the backend cannot select (exp, log, tanh, erf, pow...) calls libdevice
  (`__nv_expf`...) on NVPTX, linked from libdevice.10.bc when one is found (the CUDA
  toolkit's nvvm/libdevice); AMDGPU expands exp, log and sin/cos itself, and erf, pow,
  tanh... are float32 formulas over those (ember.codegen.amdgpu_math), since no device
  math library (ROCm's OCML) is linked; float64 ones are refused by name.

Kernels keep the CUDA C launch ABI: one pointer per buffer, then the scalars.
"""

from __future__ import annotations

import glob
import os

from llvmlite import ir
from llvmlite.ir import instructions

from ember.codegen import amdgpu_math, intrinsics
from ember.codegen.gpu_kernels import DeviceProgram, Kernel
from ember.codegen.llvm import FunctionEmitter, ModuleContext
from ember.codegen.llvm_expr import I8, I32, PTR, llvm_type
from ember.errors import CodegenError
from ember.target import Target
from ember.tir import expr as E
from ember.tir.function import Buffer
from ember.tir.stmt import Allocate, Barrier, For, ForKind

SHARED_ADDRSPACE = 3
# LLVM math intrinsics the GPU backends cannot select, by base name -> C function stem
_LIBDEVICE_INTRINSICS = {"llvm.exp": "exp", "llvm.exp2": "exp2", "llvm.log": "log",
                         "llvm.log2": "log2", "llvm.log10": "log10", "llvm.pow": "pow",
                         "llvm.sin": "sin", "llvm.cos": "cos", "llvm.tan": "tan",
                         "llvm.tanh": "tanh", "llvm.exp10": "exp10"}


def _libm_stem(name: str, kernel: str) -> str:
    """The intrinsic stem of a float32 libm function (erff -> erf); float64 ones refused."""
    for info in intrinsics.INTRINSICS.values():
        if name == info.c32:
            return info.name
        if name == info.c64:
            raise CodegenError(f"kernel '{kernel}': {name} (float64) has no AMDGPU lowering "
                               "(float32 only; ember links no device math library for rocm)")
    raise CodegenError(f"kernel '{kernel}': {name} has no AMDGPU lowering and ember links no "
                       "device math library for rocm")


def amdgpu_formula(module: ir.Module, stem: str, ty: ir.Type) -> ir.Function:
    """`module`'s internal function `ember.amdgpu.<stem>` (float32), built on first use."""
    name = f"ember.amdgpu.{stem}"
    if name in module.globals:
        return module.globals[name]
    formula = amdgpu_math.FORMULAS[stem]
    arity = 2 if stem == "pow" else 1
    fn = ir.Function(module, ir.FunctionType(ty, [ty] * arity), name=name)
    fn.linkage = "internal"
    fn.attributes.add("alwaysinline")
    builder = ir.IRBuilder(fn.append_basic_block("entry"))

    def call(base: str, t: ir.Type, args: list[ir.Value]) -> ir.Value:
        full = f"{base}.f32"
        callee = module.globals.get(full) or ir.Function(
            module, ir.FunctionType(t, [t] * len(args)), name=full)
        return builder.call(callee, args)

    builder.ret(formula(builder, call, ty, *fn.args))
    return fn


def find_libdevice() -> str | None:
    """libdevice.10.bc of a CUDA toolkit ($CUDA_HOME, /usr/local/cuda*, the
    nvidia-cuda-nvcc wheel), else None."""
    from ember.codegen.nvptx import _toolkit_homes

    roots = [*_toolkit_homes(), *sorted(glob.glob("/usr/local/cuda-*"), reverse=True)]
    for root in roots:
        path = os.path.join(root, "nvvm", "libdevice", "libdevice.10.bc")
        if os.path.isfile(path):
            return path
    return None


PRIVATE_ADDRSPACE_AMDGPU = 5


class _PrivateAlloca(instructions.AllocaInstr):
    """An alloca in AMDGPU's private address space (llvmlite's builder makes only
    address space 0, which the AMDGPU data layout forbids)."""

    def __init__(self, parent: ir.Block, typ: ir.Type, name: str) -> None:
        super().__init__(parent, typ, None, name)
        self.type = ir.PointerType(addrspace=PRIVATE_ADDRSPACE_AMDGPU)

    def descr(self, buf: list[str]) -> None:
        buf.append(f"alloca {self.allocated_type}")
        if self.align is not None:
            buf.append(f", align {self.align}")
        buf.append(f", addrspace({PRIVATE_ADDRSPACE_AMDGPU})")


class _AmdgpuEntry:
    """The entry block's builder, with allocas in the private address space (cast back to
    generic pointers, which the rest of the emitter uses)."""

    def __init__(self, builder: ir.IRBuilder) -> None:
        self.builder = builder

    def alloca(self, typ: ir.Type, size: object = None, name: str = "") -> ir.Value:
        inst = _PrivateAlloca(self.builder.block, typ, f"{name}.private")
        self.builder._insert(inst)
        return _Generic(self.builder.addrspacecast(inst, PTR, name=name))

    def __getattr__(self, name: str) -> object:
        return getattr(self.builder, name)


class _Generic:
    """A cast result whose `align` / `type` writes (done by the CPU emitter on allocas) go to
    the alloca itself or are ignored."""

    def __init__(self, value: ir.Value) -> None:
        self.__dict__["value"] = value

    def __setattr__(self, name: str, value: object) -> None:
        if name == "align":
            self.value.operands[0].align = value

    def __getattr__(self, name: str) -> object:
        return getattr(self.value, name)


class KernelEmitter(FunctionEmitter):
    """Statements of one GPU kernel (see the module docstring)."""

    def __init__(self, ctx: ModuleContext, function: ir.Function, kernel: Kernel) -> None:
        super().__init__(ctx, function, in_parallel=True)
        self.kernel = kernel
        self.launched = dict(kernel.thread_extents)
        self.nvptx = ctx.target.kind == "cuda"
        if not self.nvptx:
            self.entry_builder = _AmdgpuEntry(self.entry_builder)  # type: ignore[assignment]

    # math: libdevice names on NVPTX, ember.codegen.amdgpu_math on AMDGPU ----------------
    def declare(self, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
        if not name.startswith(("llvm.", "__nv_", "ember.")):  # a libm function (erff...)
            if not self.nvptx:
                return self._amdgpu_formula(_libm_stem(name, self.kernel.name), ret)
            name = f"__nv_{name}"  # libdevice's twin
        return super().declare(name, ret, args)

    def call_intrinsic(self, base: str, ty: ir.Type, args: list[ir.Value],
                       fastmath: bool = False) -> ir.Value:
        stem = _LIBDEVICE_INTRINSICS.get(base)
        if stem is None or (not self.nvptx and base in amdgpu_math.NATIVE):
            return super().call_intrinsic(base, ty, args, fastmath)
        if isinstance(ty, ir.VectorType):  # lane by lane: the formulas are scalar
            result: ir.Value = ir.Constant(ty, ir.Undefined)
            for lane in range(ty.count):
                at = ir.Constant(I32, lane)
                value = self.call_intrinsic(base, ty.element,
                                            [self.builder.extract_element(a, at) for a in args])
                result = self.builder.insert_element(result, value, at)
            return result
        if not self.nvptx:
            return self.builder.call(self._amdgpu_formula(stem, ty), args)
        suffix = "f" if ty == ir.FloatType() else ""
        fn = self.declare(f"__nv_{stem}{suffix}", ty, [a.type for a in args])
        return self.builder.call(fn, args)

    def _amdgpu_formula(self, stem: str, ty: ir.Type) -> ir.Function:
        """An internal, always-inlined function computing `stem` on AMDGPU (see
        ember.codegen.amdgpu_math), defined once per module."""
        formula = amdgpu_math.FORMULAS.get(stem)
        if formula is None or ty != ir.FloatType():
            kind = "float32 only" if formula is not None else "no formula"
            raise CodegenError(f"kernel '{self.kernel.name}': {stem} on {ty} has no AMDGPU "
                               f"lowering ({kind}; ember links no device math library for "
                               "rocm)")
        return amdgpu_formula(self.module, stem, ty)

    # threads, shared memory, barriers -----------------------------------------------------
    def _index(self, tag: str) -> ir.Value:
        kind, _, axis = tag.partition(".")
        if self.nvptx:
            which = "tid" if kind == "threadIdx" else "ctaid"
            name = f"llvm.nvvm.read.ptx.sreg.{which}.{axis}"
        else:
            which = "workitem" if kind == "threadIdx" else "workgroup"
            name = f"llvm.amdgcn.{which}.id.{axis}"
        fn = super().declare(name, I32, [])
        return self.builder.call(fn, [])

    def visit_For(self, s: For) -> None:
        if s.kind == ForKind.PARALLEL:
            raise CodegenError(f"loop '{s.var.name}' is parallel; a GPU kernel binds its loops "
                               "to thread axes instead")
        if s.kind != ForKind.THREAD_BINDING:
            super().visit_For(s)
            return
        index = self._index(s.thread_tag)
        value = self.cast(index, E.Var("i", "int32").dtype, s.var.dtype)
        begin = self.expr(s.begin)
        self.vars[s.var] = self.builder.add(begin, value) if not E.is_const_int(s.begin, 0) \
            else value
        extent = E.as_const_int(s.extent)
        if extent is not None and extent < self.launched.get(s.thread_tag, 1):
            inside = self.builder.icmp_signed("<", index, ir.Constant(I32, extent))
            with self.builder.if_then(inside):
                self.stmt(s.body)
        else:
            self.stmt(s.body)
        del self.vars[s.var]

    def visit_Allocate(self, s: Allocate) -> None:
        buf = s.buffer
        if buf.scope != "shared":
            super().visit_Allocate(s)
            return
        data = self.shared_globals.get(id(buf.data))
        if data is None:
            count = 1
            for d in buf.shape:
                size = E.as_const_int(d)
                if size is None:
                    raise CodegenError(f"kernel '{self.kernel.name}': shared buffer "
                                       f"'{buf.name}' has a non-constant size")
                count *= size
            array = ir.ArrayType(I8, max(1, count * buf.dtype.storage_bytes))
            name = self.ctx.fresh_name(f"{self.kernel.name}.{buf.name}.")
            gv = ir.GlobalVariable(self.module, array, name, addrspace=SHARED_ADDRSPACE)
            gv.linkage = "internal"
            gv.align = 16
            gv.initializer = ir.Constant(array, ir.Undefined)
            data = self.entry_builder.addrspacecast(gv, PTR)
            self.shared_globals[id(buf.data)] = data
        self._with_buffer(buf, data, s.body)

    def visit_Barrier(self, s: Barrier) -> None:
        if self.nvptx:
            self.builder.call(super().declare("llvm.nvvm.barrier0", ir.VoidType(), []), [])
            return
        self.builder.fence("release", "workgroup")
        self.builder.call(super().declare("llvm.amdgcn.s.barrier", ir.VoidType(), []), [])
        self.builder.fence("acquire", "workgroup")

    @property
    def shared_globals(self) -> dict[int, ir.Value]:
        found = self.__dict__.get("_shared")
        if found is None:
            found = self.__dict__["_shared"] = {}
        return found


def _emit_kernel(ctx: ModuleContext, kernel: Kernel) -> ir.Function:
    arg_types = [PTR for _ in kernel.buffers] + [llvm_type(v.dtype) for v in kernel.scalars]
    fn = ir.Function(ctx.module, ir.FunctionType(ir.VoidType(), arg_types), name=kernel.name)
    fn.calling_convention = "ptx_kernel" if ctx.target.kind == "cuda" else "amdgpu_kernel"
    fn.attributes.add("nounwind")
    em = KernelEmitter(ctx, fn, kernel)
    for arg, buf in zip(fn.args, kernel.buffers):
        arg.name = buf.name
        arg.add_attribute("noalias")
        em.buffers[buf.data] = arg
    for arg, var in zip(fn.args[len(kernel.buffers):], kernel.scalars):
        arg.name = var.name
        em.vars[var] = arg
    em.stmt(kernel.body)
    em.builder.ret_void()
    return fn


def codegen_llvm_gpu(program: DeviceProgram, target: Target) -> ir.Module:
    """One LLVM module with every kernel of `program` for a cuda (NVPTX) or rocm (AMDGPU)
    target."""
    if target.kind not in ("cuda", "rocm"):
        raise CodegenError(f"the LLVM GPU back end targets cuda and rocm, not '{target.kind}'")
    module = ir.Module(name=program.name)
    module.triple = target.triple
    ctx = ModuleContext(module, target)
    for kernel in program.kernels:
        for buf in kernel.buffers:
            if not isinstance(buf, Buffer):
                raise CodegenError(f"kernel '{kernel.name}': parameter {buf} is no buffer")
        _emit_kernel(ctx, kernel)
    return module
