"""PrimFunc -> LLVM IR (llvmlite.ir): functions, loops, allocations; the LLVM code generator.

Each PrimFunc becomes `i32 name(ptr noalias buf0, ..., scalars)` returning 0 (the calling
convention of ember.runtime.module). Expressions are in llvm_expr.py, memory accesses in
llvm_memory.py, math in llvm_math.py and PARALLEL loops in llvm_parallel.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from llvmlite import ir

from ember.codegen.llvm_expr import I8, I32, I64, PTR, ExprEmitter, constant, llvm_type
from ember.codegen.llvm_memory import emit_store
from ember.dtype import DType
from ember.errors import CodegenError
from ember.runtime.threadpool import ALLOC_SYMBOL, FREE_SYMBOL
from ember.target import Target
from ember.tir.expr import Expr, IntImm, Var
from ember.tir.function import Buffer, PrimFunc
from ember.tir.stmt import (
    Allocate, AttrStmt, Barrier, Evaluate, For, ForKind, IfThenElse, LetStmt, Seq, Stmt, Store,
)

# constant-size allocations up to this many bytes live on the stack, larger ones on the heap
STACK_LIMIT_BYTES = 64 * 1024
ALLOC_ALIGN = 64


@dataclass
class ModuleContext:
    """State shared by all functions of one LLVM module."""

    module: ir.Module
    target: Target
    counters: dict[str, int] = field(default_factory=dict)

    def fresh_name(self, prefix: str) -> str:
        count = self.counters.get(prefix, 0)
        self.counters[prefix] = count + 1
        return f"{prefix}{count}"


def codegen_llvm(funcs: list[PrimFunc], target: Target | str | None = None) -> ir.Module:
    """Translate post-pipeline PrimFuncs into one LLVM module (one function per PrimFunc)."""
    target = Target(target if target is not None else "llvm")
    if target.kind not in ("llvm", "wasm", "cuda", "rocm"):
        raise CodegenError(f"the LLVM back end cannot generate code for target '{target}'")
    names = [f.name for f in funcs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise CodegenError(f"functions in one module need distinct names; repeated: "
                           f"{', '.join(duplicates)}")
    module = ir.Module(name=names[0] if names else "ember")
    module.triple = target.llvm_triple
    ctx = ModuleContext(module, target)
    for func in funcs:
        _emit_function(ctx, func)
    return module


def _emit_function(ctx: ModuleContext, func: PrimFunc) -> ir.Function:
    arg_types = [PTR if isinstance(p, Buffer) else llvm_type(p.dtype) for p in func.params]
    fn = ir.Function(ctx.module, ir.FunctionType(I32, arg_types), name=func.name)
    fn.attributes.add("nounwind")
    em = FunctionEmitter(ctx, fn, in_parallel=False)
    for arg, param in zip(fn.args, func.params):
        arg.name = param.name
        if isinstance(param, Buffer):
            arg.add_attribute("noalias")
            em.buffers[param.data] = arg
        else:
            em.vars[param] = arg
    em.stmt(func.body)
    em.builder.ret(ir.Constant(I32, 0))
    return fn


def _loop_id(module: ir.Module, option: str) -> ir.MDValue:
    """A fresh loop ID `!N = !{!N, !{!"option"}}` (loop IDs refer to themselves)."""
    hint = module.add_metadata([ir.MetaDataString(module, option)])
    node = ir.values.MDValue(module, [hint], name=str(len(module.metadata)))
    node.operands = (node, hint)
    return node


class FunctionEmitter(ExprEmitter):
    """Translates statements into the body of one LLVM function."""

    def __init__(self, ctx: ModuleContext, function: ir.Function, in_parallel: bool) -> None:
        entry = function.append_basic_block("entry")
        body = function.append_basic_block("body")
        self.entry_builder = ir.IRBuilder(entry)
        self.entry_builder.position_before(self.entry_builder.branch(body))
        super().__init__(ctx.module, ir.IRBuilder(body), ctx.target.fast_math)
        self.ctx = ctx
        self.scalar_half_compares = ctx.target.kind == "wasm"
        self.function = function
        self.in_parallel = in_parallel  # inside an outlined parallel body: loops run serially

    def stmt(self, s: Stmt) -> None:
        method: Callable[[Stmt], None] | None = getattr(self, "visit_" + type(s).__name__, None)
        if method is None:
            raise CodegenError(f"the LLVM back end cannot translate {type(s).__name__}:\n{s}")
        method(s)

    def visit_Seq(self, s: Seq) -> None:
        for item in s.stmts:
            self.stmt(item)

    def visit_Store(self, s: Store) -> None:
        emit_store(self, s)

    def visit_Evaluate(self, s: Evaluate) -> None:
        self.expr(s.value)

    def visit_AttrStmt(self, s: AttrStmt) -> None:
        self.stmt(s.body)

    def visit_Barrier(self, s: Barrier) -> None:
        raise CodegenError(f"barrier (scope '{s.scope}') is a GPU construct; a CPU target "
                           "cannot synchronize threads inside a kernel")

    def visit_LetStmt(self, s: LetStmt) -> None:
        self.vars[s.var] = self.expr(s.value)
        self.stmt(s.body)
        del self.vars[s.var]

    def visit_IfThenElse(self, s: IfThenElse) -> None:
        cond = self.expr(s.condition)
        if s.else_case is None:
            with self.builder.if_then(cond):
                self.stmt(s.then_case)
            return
        with self.builder.if_else(cond) as (then, otherwise):
            with then:
                self.stmt(s.then_case)
            with otherwise:
                self.stmt(s.else_case)

    # loops --------------------------------------------------------------------------------
    def visit_For(self, s: For) -> None:
        if s.kind == ForKind.THREAD_BINDING:
            raise CodegenError(f"loop '{s.var.name}' is bound to GPU thread axis "
                               f"'{s.thread_tag}'; a CPU target cannot run it")
        if s.kind == ForKind.PARALLEL and not self.in_parallel:
            if self.ctx.target.kind in ("cuda", "rocm"):
                raise CodegenError(f"parallel loop '{s.var.name}' on a GPU target; bind it "
                                   "to a thread axis instead")
            from ember.codegen.llvm_parallel import emit_parallel_for

            emit_parallel_for(self, s)
            return
        begin = self.expr(s.begin)
        end = self.builder.add(begin, self.expr(s.extent))
        unroll = ""
        if s.kind == ForKind.UNROLLED:  # left over by unroll_loops: let LLVM unroll it
            unroll = "llvm.loop.unroll.full" if isinstance(s.extent, IntImm) else \
                "llvm.loop.unroll.enable"
        self.serial_loop(s.var, begin, end, lambda: self.stmt(s.body), unroll)

    def serial_loop(self, var: Var, begin: ir.Value, end: ir.Value,
                    body: Callable[[], None], unroll: str = "") -> None:
        """for (var = begin; var < end; ++var) body(); `unroll` names an llvm.loop hint."""
        b_ = self.builder
        name = var.name
        preheader = b_.block
        header = self.function.append_basic_block(f"{name}.header")
        loop_body = self.function.append_basic_block(f"{name}.body")
        exit_block = self.function.append_basic_block(f"{name}.exit")
        b_.branch(header)
        b_.position_at_end(header)
        index = b_.phi(begin.type, name=name)
        index.add_incoming(begin, preheader)
        signed = var.dtype.kind == "int"
        more = (b_.icmp_signed if signed else b_.icmp_unsigned)("<", index, end)
        b_.cbranch(more, loop_body, exit_block)
        b_.position_at_end(loop_body)
        self.vars[var] = index
        body()
        del self.vars[var]
        step = b_.add(index, constant(var.dtype, 1), flags=("nsw",) if signed else ())
        index.add_incoming(step, b_.block)
        back_edge = b_.branch(header)
        if unroll:
            back_edge.set_metadata("llvm.loop", _loop_id(self.module, unroll))
        b_.position_at_end(exit_block)

    # allocations --------------------------------------------------------------------------
    def visit_Allocate(self, s: Allocate) -> None:
        buf = s.buffer
        if buf.scope == "shared":
            raise CodegenError(f"buffer '{buf.name}' has scope 'shared' (GPU block memory); "
                               "use 'global' or 'local' on a CPU")
        element_bytes = buf.dtype.storage_bytes
        sizes = [d.value if isinstance(d, IntImm) else None for d in buf.shape]
        if None not in sizes:
            count = 1
            for size in sizes:
                assert size is not None
                count *= size
            total = max(count * element_bytes, 1)
            if total <= STACK_LIMIT_BYTES:
                ptr = self.entry_builder.alloca(ir.ArrayType(I8, total), name=buf.name)
                ptr.align = ALLOC_ALIGN
                ptr.type = PTR  # an opaque pointer, like every other pointer here
                self.private[buf.data] = count
                self._with_buffer(buf, ptr, s.body)
                del self.private[buf.data]
                return
            nbytes: ir.Value = ir.Constant(I64, total)
        else:
            nbytes = self._byte_count(buf.shape, element_bytes)
        self._heap_allocate(buf, nbytes, s.body)

    def _byte_count(self, shape: tuple[Expr, ...], element_bytes: int) -> ir.Value:
        b_ = self.builder
        total: ir.Value = ir.Constant(I64, element_bytes)
        for extent in shape:
            value = self.cast(self.expr(extent), extent.dtype, DType("int", 64))
            total = b_.mul(total, value)
        return total

    def _heap_allocate(self, buf: Buffer, nbytes: ir.Value, body: Stmt) -> None:
        # the runtime's block cache (64-byte aligned; see ember.runtime.threadpool)
        alloc = self.declare(ALLOC_SYMBOL, PTR, [I64])
        ptr = self.builder.call(alloc, [nbytes], name=buf.name)
        self._with_buffer(buf, ptr, body)
        self.builder.call(self.declare(FREE_SYMBOL, ir.VoidType(), [PTR]), [ptr])

    def _with_buffer(self, buf: Buffer, ptr: ir.Value, body: Stmt) -> None:
        self.buffers[buf.data] = ptr
        self.stmt(body)
        del self.buffers[buf.data]
