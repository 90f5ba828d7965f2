"""Kernels of a DeviceProgram as GPU source text; one printer, a Dialect per language.

OpenCL C, CUDA C and Metal differ in how a kernel is declared, how it finds its thread and
block index, how shared memory and barriers are spelled and what the math functions are
called; the expressions are C in all three and print through the C back end's ExprPrinter.
A loop bound to a thread axis becomes that axis' index (guarded when the loop is shorter
than the launch); shared buffers are declared once at the top of the kernel.

A vector Store whose lanes are contiguous in global memory prints as one vector store of a
vector built lane by lane, and each contiguous vector Load in its value as one vector load
(ember.codegen.gpu_vector decides when); loads under a condition (select, && / ||) stay
scalar, as they may be out of bounds where the condition is false. float16 buffers are
stored as halves and computed in float where the dialect has half loads and stores.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from collections.abc import Iterable, Sequence
from typing import Callable

from ember.codegen.c_expr import COND, EQUAL, PRIMARY, ExprPrinter, always_true
from ember.codegen.c_helpers import helper_source
from ember.codegen.c_names import Scopes, compute_ctype, storage_ctype
from ember.codegen.gpu_kernels import DeviceProgram, Kernel
from ember.codegen.gpu_vector import (
    HALF_ROUND,
    VECTOR_STEMS,
    HalfSpec,
    VectorSpec,
    vector_access,
)
from ember.dtype import DType
from ember.errors import CodegenError
from ember.tir import expr as E
from ember.tir import stmt as S
from ember.tir.function import Buffer
from ember.tir.functor import post_order_visit, used_vars


# the C99 fixed-width names and literal macros the printers use, for the OpenCL C and Metal
# dialects (whose own integer types are char/short/int/long and their u- forms)
FIXED_WIDTH_TYPES = """\
typedef char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long int64_t;
typedef uchar uint8_t;
typedef ushort uint16_t;
typedef uint uint32_t;
typedef ulong uint64_t;
#define INT64_C(x) ((long)(x##L))
#define UINT64_C(x) ((ulong)(x##UL))"""

INDENT = "    "
# private (per-thread) arrays larger than this would spill to slow local memory anyway
PRIVATE_LIMIT_BYTES = 16384


@dataclass(frozen=True)
class Dialect:
    """How one GPU language spells what the printer needs."""

    name: str
    prelude: str                              # text before the helpers (types, extensions)
    helper_prefix: str                        # replaces "static inline" of the C helpers
    global_space: str                         # qualifier of a pointer to global memory
    shared_space: str                         # declaration qualifier of a shared array
    barrier: str
    index: Callable[[str, str], str]          # ("blockIdx", "x") -> expression text
    signature: Callable[[Kernel, list[str]], str]
    param: Callable[[Buffer, str, int], list[str]]   # buffer, C name, position -> params
    bind_param: Callable[[Buffer, str, str], str]    # buffer, C name, ctype -> a local or ""
    scalar_param: Callable[[E.Var, str, int], str]
    functions: dict[str, str] = field(default_factory=dict)  # C name -> dialect name
    reserved: tuple[str, ...] = ()
    vectors: VectorSpec | None = None         # vector loads / stores (None: scalar only)
    half: HalfSpec | None = None              # float16 storage (None: refused)


class _GpuExprPrinter(ExprPrinter):
    """The C expression printer with the dialect's math names and address spaces."""

    def __init__(self, scopes: Scopes, buffer_types: dict[E.Var, DType],
                 dialect: Dialect, spaces: dict[E.Var, str]) -> None:
        super().__init__(scopes, buffer_types)
        self.dialect = dialect
        self.spaces = spaces
        self.vector_loads: dict[int, str] | None = None  # while printing a vector store
        self._conditional = 0

    def print(self, e: E.Expr, lane: str | None) -> tuple[str, int]:
        if isinstance(e, (E.Select, E.And, E.Or)):
            self._conditional += 1
            try:
                return super().print(e, lane)
            finally:
                self._conditional -= 1
        return super().print(e, lane)

    def _load(self, e: E.Load, lane: str | None) -> tuple[str, int]:
        half = self.dialect.half
        if e.buffer.dtype.is_float and e.buffer.dtype.bits == 16 and half is not None:
            return self._half_load(e, lane, half)
        loads = self.vector_loads
        spec = self.dialect.vectors
        if (loads is None or spec is None or self._conditional or lane is None
                or (e.predicate is not None and not always_true(e.predicate))
                or len(e.indices) != 1):
            return super()._load(e, lane)
        storage = storage_ctype(e.buffer.dtype)
        lanes = vector_access(spec, e.buffer, e.indices[0], storage)
        if not lanes:
            return super()._load(e, lane)
        if id(e) not in loads:
            vtype = spec.type_name(VECTOR_STEMS[storage], lanes)
            base = self.expr(e.indices[0].base, None, bare=True)  # type: ignore[attr-defined]
            name = self.scopes.fresh("vload")
            text = spec.load(vtype, self.pointer(e.buffer, "load"), base)
            self.prelude.append(f"const {vtype} {name} = {text};")
            loads[id(e)] = name
        return f"{loads[id(e)]}{spec.field(int(lane))}", PRIMARY

    def helper(self, name: str) -> str:
        if name == "ember_f16_round" and self.dialect.half is not None:
            return HALF_ROUND  # the dialect's own, in its prelude
        return super().helper(name)

    def _half_load(self, e: E.Load, lane: str | None, half: HalfSpec) -> tuple[str, int]:
        text = half.load(self.pointer(e.buffer, "load"), self.index(e.indices, e.buffer, lane))
        if e.predicate is not None and not always_true(e.predicate):
            cond = self.sub(e.predicate, lane, EQUAL)
            return f"{cond} ? {text} : 0.0f", COND
        return text, PRIMARY

    def function_name(self, intrinsic: str, bits: int) -> str:
        name = super().function_name(intrinsic, bits)
        return self.dialect.functions.get(name, name)

    def pointer(self, buffer: Buffer, what: str) -> str:
        name = super().pointer(buffer, what)
        if name.startswith("(("):  # reinterpreted: keep the buffer's address space
            space = self.spaces.get(buffer.data, "")
            if space:
                name = name.replace("((", f"(({space} ", 1)
        return name


class KernelPrinter:
    """Prints one Kernel in a Dialect."""

    def __init__(self, kernel: Kernel, dialect: Dialect) -> None:
        self.kernel = kernel
        self.dialect = dialect
        self.scopes = Scopes()
        for word in dialect.reserved:
            self.scopes.fresh(word)
        self.buffer_types: dict[E.Var, DType] = {}
        self.spaces: dict[E.Var, str] = {}
        self.exprs = _GpuExprPrinter(self.scopes, self.buffer_types, dialect, self.spaces)
        self.lines: list[str] = []
        self.depth = 1
        self.launched = dict(kernel.thread_extents)

    def run(self) -> str:
        kernel, dialect = self.kernel, self.dialect
        params: list[str] = []
        position = 0
        for buf in kernel.buffers:
            name = self.scopes.fresh(buf.name)
            params += dialect.param(buf, name, position)
            position += 1
            local = dialect.bind_param(buf, name, storage_ctype(buf.dtype))
            if local:
                self.emit(local)
            self._bind(buf, name, dialect.global_space)
        for var in kernel.scalars:
            if var.dtype.lanes != 1 or var.dtype.is_handle:
                raise CodegenError(f"kernel '{kernel.name}': scalar parameter '{var.name}' of "
                                   f"type {var.dtype} cannot be passed to a GPU kernel")
            name = self.scopes.fresh(var.name)
            params.append(dialect.scalar_param(var, name, position))
            position += 1
            self.scopes.bind(var, name)
        self._declare_shared(kernel.body)
        self.stmt(kernel.body)
        return "\n".join([dialect.signature(kernel, params) + " {"] + self.lines + ["}"])

    # ------------------------------------------------------------------------------------
    def emit(self, line: str) -> None:
        self.lines.append(INDENT * self.depth + line)

    def flush(self) -> None:
        for line in self.exprs.prelude:
            self.emit(line)
        self.exprs.prelude.clear()

    def block(self, body: S.Stmt) -> None:
        self.scopes.push()
        self.depth += 1
        self.stmt(body)
        self.depth -= 1
        self.scopes.pop()

    def _bind(self, buf: Buffer, name: str, space: str) -> None:
        self.scopes.bind(buf.data, name, "buffer")
        self.buffer_types[buf.data] = buf.dtype
        self.spaces[buf.data] = space

    def _declare_shared(self, body: S.Stmt) -> None:
        """Shared arrays at kernel scope (OpenCL allows __local declarations only there)."""
        shared: list[Buffer] = []
        post_order_visit(body, lambda n: shared.append(n.buffer)
                         if isinstance(n, S.Allocate) and n.buffer.scope == "shared" else None)
        seen: set[int] = set()
        for buf in shared:
            if id(buf.data) in seen:  # loop partitioning copies an Allocate, not its buffer
                continue
            seen.add(id(buf.data))
            count = self._count(buf)
            name = self.scopes.fresh(buf.name)
            self.emit(f"{self.dialect.shared_space} {storage_ctype(buf.dtype)} {name}[{count}];")
            self._bind(buf, name, self.dialect.shared_space)

    def _count(self, buf: Buffer) -> int:
        count = 1
        for extent in buf.shape:
            value = E.as_const_int(extent)
            if value is None:
                raise CodegenError(f"kernel '{self.kernel.name}': buffer '{buf.name}' "
                                   f"({buf.scope}) has a non-constant size")
            count *= value
        if buf.dtype.lanes != 1:
            raise CodegenError(f"buffer '{buf.name}' has vector elements {buf.dtype}")
        return max(count, 1)

    def stmt(self, s: S.Stmt) -> None:
        match s:
            case S.Seq(stmts):
                for item in stmts:
                    self.stmt(item)
            case S.For():
                self._for(s)
            case S.Store():
                self._store(s)
            case S.Allocate(buffer, body):
                if buffer.scope != "shared":
                    self._private(buffer)
                self.stmt(body)
            case S.IfThenElse(condition, then_case, else_case):
                text = self.exprs.expr(condition)
                self.flush()
                self.emit(f"if ({text}) {{")
                self.block(then_case)
                if else_case is not None:
                    self.emit("} else {")
                    self.block(else_case)
                self.emit("}")
            case S.LetStmt():
                self._let(s)
            case S.AttrStmt(_, _, body):
                self.stmt(body)
            case S.Barrier():
                self.emit(self.dialect.barrier)
            case S.Evaluate(E.IntImm()):
                pass
            case _:
                raise CodegenError(f"the {self.dialect.name} back end cannot print "
                                   f"{type(s).__name__} statements")

    def _private(self, buf: Buffer) -> None:
        """A per-thread array (scope local, or a global stage computed inside a thread)."""
        count = self._count(buf)
        if count * buf.dtype.storage_bytes > PRIVATE_LIMIT_BYTES:
            raise CodegenError(f"kernel '{self.kernel.name}': buffer '{buf.name}' "
                               f"({count} elements) is allocated per thread and is too big; "
                               "compute it at root or in a smaller loop")
        name = self.scopes.fresh(buf.name)
        self.emit(f"{storage_ctype(buf.dtype)} {name}[{count}];")
        self._bind(buf, name, "")

    def _for(self, s: S.For) -> None:
        if s.kind == S.ForKind.PARALLEL:
            raise CodegenError(f"loop '{s.var.name}' is parallel; a GPU kernel binds its loops "
                               "to thread axes instead")
        begin = self.exprs.expr(s.begin, bare=True)
        self.flush()
        self.scopes.push()
        name = self.scopes.fresh(s.var.name)
        self.scopes.bind(s.var, name)
        ctype = compute_ctype(s.var.dtype)
        if s.kind == S.ForKind.THREAD_BINDING:
            kind, _, axis = s.thread_tag.partition(".")
            index = f"({ctype}){self.dialect.index(kind, axis)}"
            start = "" if begin == "0" else f"{begin} + "
            self.emit("{")  # a C block: the next loop bound to this axis reuses the name
            self.depth += 1
            self.emit(f"const {ctype} {name} = {start}{index};")
            extent = E.as_const_int(s.extent)
            if extent is not None and extent < self.launched.get(s.thread_tag, 1):
                self.emit(f"if ({index} < {extent}) {{")
                self.block(s.body)
                self.emit("}")
            else:
                self.stmt(s.body)
            self.depth -= 1
            self.emit("}")
            self.scopes.pop()
            return
        end_expr = s.extent if E.is_const_int(s.begin, 0) else E.Add(s.begin, s.extent)
        end = self.exprs.expr(end_expr, bare=True)
        self.flush()
        if s.kind == S.ForKind.UNROLLED and isinstance(s.extent, E.IntImm):
            self.emit(f"#pragma unroll {s.extent.value}")
        self.emit(f"for ({ctype} {name} = {begin}; {name} < {end}; ++{name}) {{")
        self.block(s.body)
        self.scopes.pop()
        self.emit("}")

    def _store(self, s: S.Store) -> None:
        if s.value.dtype.element != s.buffer.dtype.element:
            raise CodegenError(f"store of a {s.value.dtype} value into '{s.buffer.name}' of "
                               f"type {s.buffer.dtype}; cast the value first")
        lanes = s.value.dtype.lanes
        if lanes == 1:
            self._store_lane(s, None)
            return
        if self._vector_store(s):
            return
        self.scopes.push()
        lane = self.scopes.fresh("lane")
        self.emit(f"for (int32_t {lane} = 0; {lane} < {lanes}; ++{lane}) {{")
        self.depth += 1
        self._store_lane(s, lane)
        self.depth -= 1
        self.emit("}")
        self.scopes.pop()

    def _vector_store(self, s: S.Store) -> bool:
        """Print `s` as one vector store (and its contiguous loads as vector loads) when the
        dialect and the access allow; False when it must go lane by lane."""
        spec = self.dialect.vectors
        if (spec is None or len(s.indices) != 1
                or (s.predicate is not None and not always_true(s.predicate))):
            return False
        storage = storage_ctype(s.buffer.dtype)
        lanes = vector_access(spec, s.buffer, s.indices[0], storage)
        if not lanes:
            return False
        vtype = spec.type_name(VECTOR_STEMS[storage], lanes)
        self.scopes.push()
        self.emit("{")
        self.depth += 1
        name = self.scopes.fresh("vstore")
        self.emit(f"{vtype} {name};")
        self.exprs.vector_loads = {}
        try:
            for lane in range(lanes):
                value = self.exprs.expr(s.value, str(lane))
                self.flush()
                self.emit(f"{name}{spec.field(lane)} = {value};")
        finally:
            self.exprs.vector_loads = None
        base = self.exprs.expr(s.indices[0].base, None, bare=True)  # type: ignore[attr-defined]
        self.flush()
        self.emit(spec.store(vtype, name, self.exprs.pointer(s.buffer, "store"), base) + ";")
        self.depth -= 1
        self.emit("}")
        self.scopes.pop()
        return True

    def _store_lane(self, s: S.Store, lane: str | None) -> None:
        half = s.buffer.dtype.is_float and s.buffer.dtype.bits == 16
        if half and self.dialect.half is None:
            raise CodegenError(f"store into float16 buffer '{s.buffer.name}': the "
                               f"{self.dialect.name} back end has no float16 storage "
                               "(compute in float32, or target OpenCL or CUDA)")
        pointer = self.exprs.pointer(s.buffer, "store")
        index = self.exprs.index(s.indices, s.buffer, lane)
        value = self.exprs.expr(s.value, lane)
        predicate = None
        if s.predicate is not None and not always_true(s.predicate):
            predicate = self.exprs.expr(s.predicate, lane)
        self.flush()
        if half:
            assert self.dialect.half is not None
            line = self.dialect.half.store(pointer, index, value) + ";"
        else:
            line = f"{pointer}[{index}] = {value};"
        self.emit(line if predicate is None else f"if ({predicate}) {{ {line} }}")

    def _let(self, s: S.LetStmt) -> None:
        if s.var not in set(used_vars(s.body)):
            self.stmt(s.body)
            return
        if s.value.dtype.lanes != 1 or s.value.dtype.is_handle:
            raise CodegenError(f"let '{s.var.name}' of type {s.value.dtype}: GPU kernels bind "
                               "only scalar numbers")
        text = self.exprs.expr(s.value)
        self.flush()
        name = self.scopes.fresh(s.var.name)
        self.emit(f"const {compute_ctype(s.value.dtype)} {name} = {text};")
        self.scopes.bind(s.var, name)
        self.stmt(s.body)


def print_kernels(program: DeviceProgram, dialect: Dialect) -> tuple[list[str], set[str]]:
    """The source text of each kernel of `program` and the helper functions they call (the
    pieces `assemble` joins; a kernel cache keeps them per fused group)."""
    bodies = []
    helpers: set[str] = set()
    for kernel in program.kernels:
        printer = KernelPrinter(kernel, dialect)
        bodies.append(printer.run())
        helpers |= printer.exprs.helpers
    if any(h.startswith(("ember_f16", "ember_f32_to_f16", "ember_alloc")) for h in helpers):
        raise CodegenError(f"program '{program.name}' needs float16 or heap helpers, which the "
                           f"{dialect.name} back end does not provide")
    return bodies, helpers


def assemble(bodies: Sequence[str], helpers: Iterable[str], dialect: Dialect) -> str:
    """One source file: the dialect's prelude, each helper once, then the kernels."""
    parts = [dialect.prelude]
    helpers = set(helpers)
    if helpers:
        parts.append(helper_source(helpers).replace("static inline", dialect.helper_prefix))
    return "\n\n".join(parts + list(bodies)) + "\n"


def codegen_source(program: DeviceProgram, dialect: Dialect) -> str:
    """The source text of every kernel of `program`, with the helpers they need."""
    bodies, helpers = print_kernels(program, dialect)
    return assemble(bodies, helpers, dialect)
