"""LLVM IR for TIR expressions: arithmetic, casts, vectors, loads and intrinsic calls."""

from __future__ import annotations

from typing import Callable

import numpy as np
from llvmlite import ir

from ember.codegen import intrinsics
from ember.dtype import DType
from ember.errors import CodegenError
from ember.tir.expr import (
    BitwiseAnd, BitwiseOr, BitwiseXor,
    EQ, GE, GT, LE, LT, NE, Add, And, Broadcast, Call, Cast, CompareOp, Div, Expr, FloatImm,
    FloorDiv, FloorMod, IntImm, Let, Load, Max, Min, Mul, Not, Or, Ramp, Select, Sub, Var,
)

PTR = ir.PointerType()
I1 = ir.IntType(1)
I8 = ir.IntType(8)
I32 = ir.IntType(32)
I64 = ir.IntType(64)

_CMP_OPS = {EQ: "==", NE: "!=", LT: "<", LE: "<=", GT: ">", GE: ">="}
# integer operations without side effects or traps (division by zero is made safe)
_PURE_SCALAR_OPS = frozenset({Add, Sub, Mul, Div, FloorDiv, FloorMod, Min, Max})


def llvm_type(dtype: DType) -> ir.Type:
    """The register type of `dtype`: float32x16 -> <16 x float>, bool -> i1."""
    if dtype.is_handle:
        return PTR
    if dtype.is_storage_only:  # bfloat16, float8, int4...: their bits (see ember.ops.lowp)
        dtype = dtype.storage
    if dtype.is_float:
        scalar: ir.Type = {16: ir.HalfType(), 32: ir.FloatType(), 64: ir.DoubleType()}[dtype.bits]
    elif dtype.is_bool:
        scalar = I1
    else:
        scalar = ir.IntType(dtype.bits)
    return scalar if dtype.lanes == 1 else ir.VectorType(scalar, dtype.lanes)


def memory_type(dtype: DType) -> ir.Type:
    """The in-memory type: like llvm_type but bool is one byte."""
    if dtype.is_bool:
        return I8 if dtype.lanes == 1 else ir.VectorType(I8, dtype.lanes)
    return llvm_type(dtype)


def type_suffix(ty: ir.Type) -> str:
    """Overloaded-intrinsic mangling: <16 x float> -> v16f32, half -> f16, ptr -> p0."""
    if isinstance(ty, ir.VectorType):
        return f"v{ty.count}{type_suffix(ty.element)}"
    if isinstance(ty, ir.HalfType):
        return "f16"
    if isinstance(ty, ir.FloatType):
        return "f32"
    if isinstance(ty, ir.DoubleType):
        return "f64"
    if isinstance(ty, ir.IntType):
        return f"i{ty.width}"
    if isinstance(ty, ir.PointerType):
        return "p0"
    raise CodegenError(f"no intrinsic mangling for LLVM type {ty}")


def constant(dtype: DType, value: int | float) -> ir.Constant:
    """An LLVM constant of `dtype` (a splat for vectors)."""
    scalar_dtype = dtype.element
    if dtype.is_float:
        value = float(np.array(value, dtype=scalar_dtype.numpy))  # round to the type
    elif dtype.is_bool:
        value = int(bool(value))
    else:
        bits = dtype.bits
        value = int(value) & ((1 << bits) - 1)
        if value >= 1 << (bits - 1):  # two's complement for uint64 and friends
            value -= 1 << bits
    scalar = ir.Constant(llvm_type(scalar_dtype), value)
    if dtype.lanes == 1:
        return scalar
    return ir.Constant(llvm_type(dtype), [scalar] * dtype.lanes)


def _const_int(e: Expr) -> int | None:
    """The value of an integer constant or of a broadcast integer constant."""
    if isinstance(e, IntImm):
        return e.value
    if isinstance(e, Broadcast) and isinstance(e.value, IntImm):
        return e.value.value
    return None


class ExprEmitter:
    """Translates expressions at the current position of `builder`."""

    def __init__(self, module: ir.Module, builder: ir.IRBuilder, fast_math: bool) -> None:
        self.module = module
        self.builder = builder
        self.vars: dict[Var, ir.Value] = {}
        self.buffers: dict[Var, ir.Value] = {}  # Buffer.data -> pointer
        # stack buffers of this function (private to the thread running it): element count
        self.private: dict[Var, int] = {}
        self.fmf: tuple[str, ...] = ("fast",) if fast_math else ("contract",)
        # compare float16 vectors lane by lane: LLVM's WebAssembly back end (no half
        # arithmetic) loops forever legalizing a float16 vector compare
        self.scalar_half_compares = False

    def expr(self, e: Expr) -> ir.Value:
        method: Callable[[Expr], ir.Value] | None = getattr(self, "emit_" + type(e).__name__,
                                                             None)
        if method is None:
            raise CodegenError(f"the LLVM back end cannot translate {type(e).__name__}: {e}")
        if type(e) in _PURE_SCALAR_OPS and e.dtype.lanes == 1 and not e.dtype.is_float:
            return self._reused(e, method)
        return method(e)

    # index arithmetic emitted once per basic block ----------------------------------------
    # An unrolled register tile repeats the same address arithmetic in every copy of its
    # body (`icb * 53824 + h % 56 * 928 + ...` in each of hundreds of loads), as separate but
    # equal expressions. Emitting each once per block, instead of once per use, cuts the
    # module such a kernel hands LLVM to a fraction: fewer instructions to build, print,
    # parse and clean up again with LLVM's own CSE.
    _cse: dict[tuple[object, ...], ir.Value]
    _cse_block: object = None
    _cse_keys: dict[int, tuple[Expr, tuple[object, ...] | None]] | None = None

    def _reused(self, e: Expr, method: Callable[[Expr], ir.Value]) -> ir.Value:
        """`method(e)`, or the value an equal pure integer expression already has in the
        current block."""
        outermost = self._cse_keys is None
        if outermost:
            # keys by node identity hold only while one expression tree is emitted: no
            # variable is bound in between (the pure operations bind none)
            self._cse_keys = {}
        try:
            key = self._cse_key(e)
            if key is None:  # something impure inside (a load, a let): fresh keys below it
                saved, self._cse_keys = self._cse_keys, None
                try:
                    return method(e)
                finally:
                    self._cse_keys = saved
            if self.builder.block is not self._cse_block:
                self._cse_block, self._cse = self.builder.block, {}
            found = self._cse.get(key)
            if found is not None:
                return found
            value = method(e)
            if self.builder.block is not self._cse_block:  # the emission opened a block
                self._cse_block, self._cse = self.builder.block, {}
            self._cse[key] = value
            return value
        finally:
            if outermost:
                self._cse_keys = None

    def _cse_key(self, e: Expr) -> tuple[object, ...] | None:
        """A key equal for equal pure integer expressions under the current bindings (the
        variables' values, not their names); None when `e` is not one."""
        kind = type(e)
        if kind is IntImm:
            return (e.dtype, e.value)  # type: ignore[attr-defined]
        if kind is Var:
            value = self.vars.get(e)  # type: ignore[call-overload]
            return None if value is None else ("var", value)
        if kind not in _PURE_SCALAR_OPS or e.dtype.lanes != 1 or e.dtype.is_float:
            return None
        keys = self._cse_keys
        assert keys is not None
        memo = keys.get(id(e))
        if memo is not None and memo[0] is e:
            return memo[1]
        a = self._cse_key(e.a)  # type: ignore[attr-defined]
        b = self._cse_key(e.b) if a is not None else None  # type: ignore[attr-defined]
        key = None if b is None else (kind, e.dtype, a, b)
        keys[id(e)] = (e, key)  # holding `e` keeps its id from being reused meanwhile
        return key

    # helpers ------------------------------------------------------------------------------
    def declare(self, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
        """The function `name` of this module, declared on first use."""
        existing = self.module.globals.get(name)
        if existing is not None:
            return existing
        return ir.Function(self.module, ir.FunctionType(ret, args), name=name)

    def native_lanes(self, dtype: DType) -> int:
        """Elements of `dtype` in one vector register of the target (4 when unknown)."""
        target = getattr(getattr(self, "ctx", None), "target", None)
        return target.vector_lanes(dtype) if target is not None else 4

    def call_intrinsic(self, base: str, ty: ir.Type, args: list[ir.Value],
                       fastmath: bool = False) -> ir.Value:
        fn = self.declare(f"{base}.{type_suffix(ty)}", ty, [a.type for a in args])
        return self.builder.call(fn, args, fastmath=self.fmf if fastmath else ())

    def broadcast(self, value: ir.Value, lanes: int) -> ir.Value:
        vec_type = ir.VectorType(value.type, lanes)
        if isinstance(value, ir.Constant):
            return ir.Constant(vec_type, [value] * lanes)
        first = self.builder.insert_element(ir.Constant(vec_type, ir.Undefined), value,
                                            ir.Constant(I32, 0))
        mask = ir.Constant(ir.VectorType(I32, lanes), [0] * lanes)
        return self.builder.shuffle_vector(first, ir.Constant(vec_type, ir.Undefined), mask)

    # leaves -------------------------------------------------------------------------------
    def emit_Var(self, e: Var) -> ir.Value:
        try:
            return self.vars[e]
        except KeyError:
            raise CodegenError(f"variable '{e.name}' is used but not bound (not a parameter, "
                               "loop variable or let)") from None

    def emit_IntImm(self, e: IntImm) -> ir.Value:
        return constant(e.dtype, e.value)

    def emit_FloatImm(self, e: FloatImm) -> ir.Value:
        return constant(e.dtype, e.value)

    # arithmetic ---------------------------------------------------------------------------
    def _int_flags(self, dtype: DType) -> tuple[str, ...]:
        # index-sized signed arithmetic does not wrap (lets LLVM widen indices); 8/16-bit
        # integers are quantized data, where numpy-style wrapping is expected
        return ("nsw",) if dtype.kind == "int" and dtype.bits >= 32 else ()

    def emit_Add(self, e: Add) -> ir.Value:
        a, b = self.expr(e.a), self.expr(e.b)
        if e.dtype.is_float:
            return self.builder.fadd(a, b, flags=self.fmf)
        return self.builder.add(a, b, flags=self._int_flags(e.dtype))

    def emit_Sub(self, e: Sub) -> ir.Value:
        a, b = self.expr(e.a), self.expr(e.b)
        if e.dtype.is_float:
            return self.builder.fsub(a, b, flags=self.fmf)
        return self.builder.sub(a, b, flags=self._int_flags(e.dtype))

    def emit_Mul(self, e: Mul) -> ir.Value:
        a, b = self.expr(e.a), self.expr(e.b)
        if e.dtype.is_float:
            return self.builder.fmul(a, b, flags=self.fmf)
        return self.builder.mul(a, b, flags=self._int_flags(e.dtype))

    def emit_Div(self, e: Div) -> ir.Value:
        a, b = self.expr(e.a), self.expr(e.b)
        if e.dtype.is_float:
            return self.builder.fdiv(a, b, flags=self.fmf)
        safe, zero_divisor = self._safe_divisor(a, b, e)
        q = self.builder.sdiv(a, safe) if e.dtype.kind == "int" else self.builder.udiv(a, safe)
        return self._zero_where(zero_divisor, q, e.dtype)

    def _safe_divisor(self, a: ir.Value, b: ir.Value, e: Div | FloorDiv | FloorMod
                      ) -> tuple[ir.Value, ir.Value | None]:
        """A divisor that cannot trap, and where the real one was zero (None: never).

        Integer division by zero, and INT_MIN / -1, raise SIGFPE on x86; the masked-off lanes
        of a vector tail can hold zeros too. Like numpy, x / 0 gives 0 and INT_MIN / -1 wraps
        (dividing by 1 instead gives exactly that).
        """
        divisor = _const_int(e.b)
        if divisor is not None and divisor != 0 and divisor != -1:
            return b, None
        b_ = self.builder
        one = constant(e.dtype, 1)
        zero_divisor = b_.icmp_unsigned("==", b, constant(e.dtype, 0))
        bad = zero_divisor
        if e.dtype.kind == "int":
            lowest = constant(e.dtype, e.dtype.element.min_value())
            overflow = b_.and_(b_.icmp_signed("==", a, lowest),
                               b_.icmp_signed("==", b, constant(e.dtype, -1)))
            bad = b_.or_(bad, overflow)
        return b_.select(bad, one, b), zero_divisor

    def _zero_where(self, condition: ir.Value | None, value: ir.Value, dtype: DType
                    ) -> ir.Value:
        if condition is None:
            return value
        return self.builder.select(condition, constant(dtype, 0), value)

    def emit_FloorDiv(self, e: FloorDiv) -> ir.Value:
        return self._floor_div_mod(e, want_div=True)

    def emit_FloorMod(self, e: FloorMod) -> ir.Value:
        return self._floor_div_mod(e, want_div=False)

    def _floor_div_mod(self, e: FloorDiv | FloorMod, want_div: bool) -> ir.Value:
        b_ = self.builder
        a, b = self.expr(e.a), self.expr(e.b)
        dtype = e.dtype
        if dtype.is_float:  # floor(a / b), a - floor(a / b) * b
            q = self.call_intrinsic("llvm.floor", a.type, [b_.fdiv(a, b, flags=self.fmf)])
            return q if want_div else b_.fsub(a, b_.fmul(q, b, flags=self.fmf), flags=self.fmf)
        b, zero_divisor = self._safe_divisor(a, b, e)
        if dtype.kind != "int":  # unsigned: truncation is flooring
            result = b_.udiv(a, b) if want_div else b_.urem(a, b)
            return self._zero_where(zero_divisor, result, dtype)
        divisor = _const_int(e.b)
        zero = constant(dtype, 0)
        if divisor is not None and divisor > 0 and divisor & (divisor - 1) == 0:
            shift = divisor.bit_length() - 1  # a // 2^k == a >> k, a % 2^k == a & (2^k - 1)
            return (b_.ashr(a, constant(dtype, shift)) if want_div
                    else b_.and_(a, constant(dtype, divisor - 1)))
        q, r = b_.sdiv(a, b), b_.srem(a, b)
        if divisor is not None and divisor > 0:
            # a positive divisor: the truncated remainder is off when negative
            fix = b_.icmp_signed("<", r, zero)
        else:
            # off when the remainder is nonzero and its sign differs from the divisor's
            signs_differ = b_.xor(b_.icmp_signed("<", r, zero), b_.icmp_signed("<", b, zero))
            fix = b_.and_(b_.icmp_signed("!=", r, zero), signs_differ)
        if want_div:
            return self._zero_where(zero_divisor, b_.sub(q, b_.zext(fix, q.type)), dtype)
        return self._zero_where(zero_divisor, b_.add(r, b_.select(fix, b, zero)), dtype)

    def emit_Min(self, e: Min) -> ir.Value:
        return self._min_max(e, "<", "llvm.smin", "llvm.umin")

    def emit_Max(self, e: Max) -> ir.Value:
        return self._min_max(e, ">", "llvm.smax", "llvm.umax")

    def _min_max(self, e: Min | Max, op: str, smin: str, umin: str) -> ir.Value:
        a, b = self.expr(e.a), self.expr(e.b)
        if e.dtype.is_float:
            return self.builder.select(self._fcmp(op, a, b, ordered=True), a, b)
        if e.dtype.is_bool:
            return self.builder.and_(a, b) if op == "<" else self.builder.or_(a, b)
        return self.call_intrinsic(smin if e.dtype.kind == "int" else umin, a.type, [a, b])

    def _compare(self, e: CompareOp) -> ir.Value:
        a, b = self.expr(e.a), self.expr(e.b)
        op = _CMP_OPS[type(e)]
        if e.a.dtype.is_float:  # "!=" is true for NaN operands, like numpy
            return self._fcmp(op, a, b, ordered=op != "!=")
        if e.a.dtype.kind == "int":
            return self.builder.icmp_signed(op, a, b)
        return self.builder.icmp_unsigned(op, a, b)

    emit_EQ = emit_NE = emit_LT = emit_LE = emit_GT = emit_GE = _compare

    def _fcmp(self, op: str, a: ir.Value, b: ir.Value, ordered: bool) -> ir.Value:
        b_ = self.builder
        compare = b_.fcmp_ordered if ordered else b_.fcmp_unordered
        ty = a.type
        if not (self.scalar_half_compares and isinstance(ty, ir.VectorType)
                and isinstance(ty.element, ir.HalfType)):
            return compare(op, a, b)
        result: ir.Value = ir.Constant(ir.VectorType(I1, ty.count), None)
        for lane in range(ty.count):
            index = ir.Constant(I32, lane)
            bit = compare(op, b_.extract_element(a, index), b_.extract_element(b, index))
            result = b_.insert_element(result, bit, index)
        return result

    def emit_And(self, e: And) -> ir.Value:
        return self.builder.and_(self.expr(e.a), self.expr(e.b))

    def emit_Or(self, e: Or) -> ir.Value:
        return self.builder.or_(self.expr(e.a), self.expr(e.b))

    def emit_BitwiseAnd(self, e: BitwiseAnd) -> ir.Value:
        return self.builder.and_(self.expr(e.a), self.expr(e.b))

    def emit_BitwiseOr(self, e: BitwiseOr) -> ir.Value:
        return self.builder.or_(self.expr(e.a), self.expr(e.b))

    def emit_BitwiseXor(self, e: BitwiseXor) -> ir.Value:
        return self.builder.xor(self.expr(e.a), self.expr(e.b))

    def emit_Not(self, e: Not) -> ir.Value:
        return self.builder.not_(self.expr(e.a))

    def emit_Select(self, e: Select) -> ir.Value:
        cond = self.expr(e.condition)
        return self.builder.select(cond, self.expr(e.true_value), self.expr(e.false_value))

    def emit_Let(self, e: Let) -> ir.Value:
        self.vars[e.var] = self.expr(e.value)
        try:
            return self.expr(e.body)
        finally:
            del self.vars[e.var]

    # casts --------------------------------------------------------------------------------
    def emit_Cast(self, e: Cast) -> ir.Value:
        return self.cast(self.expr(e.value), e.value.dtype, e.dtype)

    def cast(self, value: ir.Value, src: DType, dst: DType) -> ir.Value:
        b_ = self.builder
        to = llvm_type(dst)
        if src.element == dst.element:
            return value
        if dst.is_bool:  # x != 0
            if src.is_float:
                return b_.fcmp_unordered("!=", value, ir.Constant(value.type, None))
            return b_.icmp_unsigned("!=", value, ir.Constant(value.type, None))
        if src.is_bool:
            return b_.uitofp(value, to) if dst.is_float else b_.zext(value, to)
        if src.is_float and dst.is_float:
            return b_.fpext(value, to) if dst.bits > src.bits else b_.fptrunc(value, to)
        if src.is_float:
            return b_.fptosi(value, to) if dst.kind == "int" else b_.fptoui(value, to)
        if dst.is_float:
            return b_.sitofp(value, to) if src.kind == "int" else b_.uitofp(value, to)
        if dst.bits < src.bits:
            return b_.trunc(value, to)
        if dst.bits == src.bits:
            return value  # int32 <-> uint32: same bits
        return b_.sext(value, to) if src.kind == "int" else b_.zext(value, to)

    # vectors ------------------------------------------------------------------------------
    def emit_Broadcast(self, e: Broadcast) -> ir.Value:
        return self.broadcast(self.expr(e.value), e.lanes)

    def emit_Ramp(self, e: Ramp) -> ir.Value:
        base = self.broadcast(self.expr(e.base), e.lanes)
        step = _const_int(e.stride)
        if step is not None:
            offsets = ir.Constant(llvm_type(e.dtype),
                                  [constant(e.dtype.element, i * step) for i in range(e.lanes)])
            return self.builder.add(base, offsets, flags=self._int_flags(e.dtype))
        iota = ir.Constant(llvm_type(e.dtype),
                           [constant(e.dtype.element, i) for i in range(e.lanes)])
        stride = self.broadcast(self.expr(e.stride), e.lanes)
        if e.dtype.is_float:
            return self.builder.fadd(base, self.builder.fmul(stride, iota), flags=self.fmf)
        flags = self._int_flags(e.dtype)
        return self.builder.add(base, self.builder.mul(stride, iota, flags=flags), flags=flags)

    # memory -------------------------------------------------------------------------------
    def buffer_pointer(self, data: Var) -> ir.Value:
        try:
            return self.buffers[data]
        except KeyError:
            raise CodegenError(f"buffer '{data.name}' is used but neither a parameter nor "
                               "allocated") from None

    def element_pointer(self, base: ir.Value, dtype: DType, index: ir.Value) -> ir.Value:
        """&base[index]; a vector index gives a vector of pointers."""
        ptr = self.builder.gep(base, [index], inbounds=True, source_etype=memory_type(dtype))
        # llvmlite infers typed pointers, and scalar ones for vector indices; fix the type
        if isinstance(index.type, ir.VectorType):
            ptr.type = ir.VectorType(PTR, index.type.count)
        else:
            ptr.type = PTR
        return ptr

    def emit_Load(self, e: Load) -> ir.Value:
        from ember.codegen.llvm_memory import emit_load

        return emit_load(self, e)

    # calls --------------------------------------------------------------------------------
    def emit_Call(self, e: Call) -> ir.Value:
        if e.name == "likely" and len(e.args) == 1:
            return self.expr(e.args[0])
        if e.name == "address_of":
            return self._address_of(e)
        if e.name == "prefetch":
            return self._prefetch(e)
        if e.name == "reinterpret" and len(e.args) == 1:
            return self._reinterpret(e)
        info = intrinsics.lookup(e.name, len(e.args))
        if info is None:
            return self._extern_call(e)
        if not e.dtype.is_float:
            raise CodegenError(f"intrinsic '{e.name}' needs float arguments, got {e.dtype}")
        args = [self.expr(a) for a in e.args]
        if e.dtype.bits == 16:  # compute in float32: libm has no half functions
            wide = DType("float", 32, e.dtype.lanes)
            args = [self.cast(a, e.dtype, wide) for a in args]
            return self.cast(self._float_intrinsic(e.name, wide, args), wide, e.dtype)
        return self._float_intrinsic(e.name, e.dtype, args)

    def _address_of(self, e: Call) -> ir.Value:
        """address_of(buf[i]) -> &buf[i], a pointer (dtype handle) to pass to another kernel."""
        match e.args:
            case (Load(buffer=buffer, indices=(index,), predicate=None),) if e.dtype.is_handle:
                base = self.buffer_pointer(buffer.data)
                return self.element_pointer(base, buffer.dtype, self.expr(index))
        raise CodegenError(f"address_of takes one scalar load with a flat index and has dtype "
                           f"handle, got {e}")

    def _prefetch(self, e: Call) -> ir.Value:
        """prefetch(buf[i]): a hint to bring buf[i]'s cache line into the caches (te's
        Stage.prefetch). Into L2, not L1: lines fetched a whole tile ahead would push out
        the L1 lines the current tile reuses (BERT's 768x3072 product, weights not cached:
        4.58 ms unhinted, 4.41 with L1 hints, 4.26 with L2 hints; 1 thread, Intel Xeon).
        Never dereferenced."""
        match e.args:
            case (Load(buffer=buffer, indices=(index,), predicate=None),) \
                    if index.dtype.lanes == 1:
                base = self.buffer_pointer(buffer.data)
                ptr = self.element_pointer(base, buffer.dtype, self.expr(index))
                fn = self.declare("llvm.prefetch.p0", ir.VoidType(), [PTR, I32, I32, I32])
                # read (0), moderate temporal locality (2: outer caches), data cache (1)
                self.builder.call(fn, [ptr, ir.Constant(I32, 0), ir.Constant(I32, 2),
                                       ir.Constant(I32, 1)])
                return ir.Constant(I32, 0)
        raise CodegenError(f"prefetch takes one scalar load with a flat index, got {e}")

    def _reinterpret(self, e: Call) -> ir.Value:
        """reinterpret(x): the same bits as another type of the same width (a bitcast)."""
        (arg,) = e.args
        src, dst = arg.dtype.storage, e.dtype.storage
        if src.bits * src.lanes != dst.bits * dst.lanes or src.is_bool or dst.is_bool:
            raise CodegenError(f"reinterpret from {arg.dtype} to {e.dtype}: the widths differ")
        value = self.expr(arg)
        to = llvm_type(e.dtype)
        return value if value.type == to else self.builder.bitcast(value, to)

    def _float_intrinsic(self, name: str, dtype: DType, args: list[ir.Value]) -> ir.Value:
        from ember.codegen.llvm_math import emit_math

        return emit_math(self, name, dtype, args)

    def _extern_call(self, e: Call) -> ir.Value:
        args = [self.expr(a) for a in e.args]
        fn = self.declare(e.name, llvm_type(e.dtype), [a.type for a in args])
        if list(fn.function_type.args) != [a.type for a in args]:
            raise CodegenError(f"external function '{e.name}' called with argument types "
                               f"{[str(a.type) for a in args]}, declared as "
                               f"{[str(t) for t in fn.function_type.args]}")
        return self.builder.call(fn, args)
