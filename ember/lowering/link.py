"""The AOT entry point: one native `model_main` calling every kernel with workspace pointers.

    i32 model_main(ptr in0, ..., ptr out0, ..., ptr workspace, ptr constants)

is a PrimFunc of `Evaluate(Call(int32, kernel, [address_of(buf[offset]), ...]))` statements
(one per fused group, in order) compiled with the LLVM back end; the kernels themselves come
as object files (from the compile step or the disk cache) and are linked into the same JIT
engine, so one ctypes call runs the whole model whatever its number of layers.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from ember import dtype as dt
from ember.errors import CodegenError, CorruptFileError
from ember.runtime.elf import ET_REL, SHN_UNDEF, STB_WEAK, host_machine, read_elf
from ember.runtime.library import MAIN_SYMBOL
from ember.runtime.plan import ExecPlan, Slot
from ember.target import Target
from ember.tir.expr import Call, IntImm, Load
from ember.tir.function import Buffer, PrimFunc
from ember.tir.stmt import Evaluate, Seq, Stmt



def _flat_buffer(name: str, size: int, dtype: str) -> Buffer:
    return Buffer(name, (IntImm(max(1, size), dt.int64),), dt.parse(dtype))


def main_function(plan: ExecPlan) -> PrimFunc:
    """The PrimFunc of model_main: parameters inputs, outputs, workspace, constants."""
    ins = [_flat_buffer(f"in{i}", s.size, s.dtype) for i, s in enumerate(plan.inputs)]
    outs = [_flat_buffer(f"out{i}", s.size, s.dtype) for i, s in enumerate(plan.outputs)]
    workspace = _flat_buffer("workspace", plan.workspace_bytes, "uint8")
    constants = _flat_buffer("constants", plan.constant_bytes, "uint8")

    def pointer(slot: Slot) -> Call:
        if slot.kind == "input":
            buf, offset = ins[slot.index], 0
        elif slot.kind == "output":
            buf, offset = outs[slot.index], 0
        elif slot.kind == "workspace":
            buf, offset = workspace, slot.index
        else:
            buf, offset = constants, slot.index
        return Call(dt.handle, "address_of", (Load(buf, (IntImm(offset, dt.int64),)),))

    body: list[Stmt] = [Evaluate(Call(dt.int32, call.symbol, tuple(pointer(a) for a in call.args)))
                        for call in plan.calls]
    return PrimFunc(MAIN_SYMBOL, (*ins, *outs, workspace, constants), Seq(tuple(body)))


def emit_kernel_object(funcs: list[PrimFunc], target: Target | str = "llvm",
                       pic: bool = False) -> bytes:
    """An object file for linking into this process's JIT (see `link`), or with `pic` into
    a shared library (see ember.lowering.export).

    The JIT's objects use its code model and relocation model (absolute addresses):
    position-independent objects use GOT-relative addressing that the JIT linker resolves
    wrongly once several objects share one engine.
    """
    from ember.codegen import jit

    tgt = Target(target)
    machine = jit.target_machine(tgt, jit=not pic)
    module = jit.parse_module(funcs, tgt, machine)
    jit.optimize(module, machine)
    return bytes(machine.emit_object(module))


def check_kernel_object(data: bytes, symbols: Sequence[str], what: str) -> None:
    """CorruptFileError unless `data` is a well-formed object file of this machine defining
    every function in `symbols`: what the JIT linker is handed must not make it (or the first
    call into a missing kernel) crash the process."""
    if not sys.platform.startswith("linux"):
        return  # Mach-O / COFF objects: not checked here
    elf = read_elf(data, what)
    machine = host_machine()
    if elf.type != ET_REL or (machine is not None and elf.machine != machine):
        raise CorruptFileError(f"{what}: not a relocatable object for this machine "
                               f"(type {elf.type}, machine {elf.machine})")
    missing = [s for s in symbols if not elf.defines(s)]
    if missing:
        raise CorruptFileError(f"{what}: defines no function {', '.join(missing)}")


def object_symbols(data: bytes, what: str) -> tuple[set[str], set[str]]:
    """(names an object file defines, names it uses without defining); weak references are
    left out (the linker may leave those null). Both empty where objects are not ELF."""
    if not sys.platform.startswith("linux"):
        return set(), set()
    symbols = read_elf(data, what).symbols
    defined = {name for name, s in symbols.items() if s.section != SHN_UNDEF}
    used = {name for name, s in symbols.items()
            if s.section == SHN_UNDEF and s.binding != STB_WEAK}
    return defined, used


def check_resolved(objects: dict[str, bytes], defined: Sequence[str] = ()) -> None:
    """CodegenError unless every symbol the kernel objects call is defined by one of them,
    named in `defined`, or found in this process (libm, libgomp, the thread pool): the JIT
    linker leaves an unresolved call jumping to address 0, a crash on the first run."""
    import llvmlite.binding as llvm

    from ember.codegen import jit

    jit._runtime_symbols()  # libgomp, the pool and (once an engine exists) the process's own
    known = set(defined)
    uses: dict[str, set[str]] = {}
    for kernel, data in objects.items():
        defines, used = object_symbols(data, f"object code of kernel '{kernel}'")
        known |= defines
        for name in used:
            uses.setdefault(name, set()).add(kernel)
    missing = sorted(name for name in uses
                     if name not in known and not llvm.address_of_symbol(name))
    if missing:
        details = "; ".join(f"{name} (called by {', '.join(sorted(uses[name]))})"
                            for name in missing[:5])
        raise CodegenError(f"the kernels call functions this process does not have: {details}"
                           "; code for this target needs a runtime ember does not link "
                           "(compile for target='llvm')")


class LinkedModel:
    """The JIT engine holding model_main and every kernel; addresses by symbol."""

    def __init__(self, engine: Any, keepalive: tuple[Any, ...]) -> None:
        self._engine = engine
        self._keepalive = keepalive

    def address(self, symbol: str) -> int:
        address = int(self._engine.get_function_address(symbol))
        if not address:
            raise CodegenError(f"linked model has no function '{symbol}'")
        return address


def link(plan: ExecPlan, objects: dict[str, bytes], target: Target | str = "llvm"
         ) -> LinkedModel:
    """JIT-link model_main (generated here) with the kernel objects into this process."""
    import llvmlite.binding as llvm

    from ember.codegen import jit
    from ember.codegen.llvm import codegen_llvm

    tgt = Target(target)
    if not tgt.is_host:
        raise CodegenError(f"cannot run code for '{tgt}' in this process; export it instead")
    missing = [s for s in plan.symbols if s not in objects]
    if missing:
        raise CodegenError(f"no object code for kernel(s) {', '.join(missing)}")
    machine = jit.target_machine(tgt, jit=True)
    ir_module = codegen_llvm([main_function(plan)], tgt)
    ir_module.data_layout = str(machine.target_data)
    module = llvm.parse_assembly(str(ir_module))
    module.verify()
    jit._runtime_symbols()
    engine = llvm.create_mcjit_compiler(module, machine)
    refs = []
    for symbol in plan.symbols:
        check_kernel_object(objects[symbol], [symbol], f"object code of kernel '{symbol}'")
    check_resolved({symbol: objects[symbol] for symbol in plan.symbols}, [MAIN_SYMBOL])
    for symbol in plan.symbols:
        ref = llvm.ObjectFileRef.from_data(objects[symbol])
        engine.add_object_file(ref)
        refs.append(ref)
    engine.finalize_object()
    return LinkedModel(engine, (module, machine, refs))
