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
from ember.runtime.elf import ET_REL, host_machine, read_elf
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
        ref = llvm.ObjectFileRef.from_data(objects[symbol])
        engine.add_object_file(ref)
        refs.append(ref)
    engine.finalize_object()
    return LinkedModel(engine, (module, machine, refs))
