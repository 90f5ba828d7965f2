"""LLVM IR for loads and stores: scalar, contiguous vector, gather/scatter, predicated."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir

from ember.codegen.llvm_expr import I1, I32, memory_type, type_suffix
from ember.codegen.llvm_shuffle import emit_offset_load, offset_plan
from ember.errors import CodegenError
from ember.tir.expr import Broadcast, Expr, IntImm, Load, Ramp
from ember.tir.function import Buffer
from ember.tir.stmt import Store

if TYPE_CHECKING:
    from ember.codegen.llvm_expr import ExprEmitter


def _flat_index(buffer: Buffer, indices: tuple[Expr, ...]) -> Expr:
    if len(indices) != 1:
        raise CodegenError(f"access to buffer '{buffer.name}' has {len(indices)} indices; the "
                           "LLVM back end needs flattened buffers (run the TIR pipeline first)")
    return indices[0]


def _is_contiguous(index: Expr) -> bool:
    return isinstance(index, Ramp) and isinstance(index.stride, IntImm) and index.stride.value == 1


def _private_in_bounds(em: ExprEmitter, buffer: Buffer, index: Ramp) -> bool:
    """Whether all lanes of `index` fall inside a stack buffer of this function (which no
    other thread sees): then a masked access may touch the masked-off lanes too."""
    count = em.private.get(buffer.data)
    return (count is not None and isinstance(index.base, IntImm)
            and 0 <= index.base.value and index.base.value + index.lanes <= count)


def _mask(em: ExprEmitter, predicate: Expr | None, lanes: int) -> ir.Value:
    if predicate is None:
        return ir.Constant(ir.VectorType(I1, lanes), [ir.Constant(I1, 1)] * lanes)
    mask = em.expr(predicate)
    if not isinstance(mask.type, ir.VectorType):
        mask = em.broadcast(mask, lanes)
    return mask


def emit_load(em: ExprEmitter, e: Load) -> ir.Value:
    """Read buffer[index]: scalar, contiguous vector, broadcast, chunks + shuffle or gather."""
    b_ = em.builder
    index = _flat_index(e.buffer, e.indices)
    elem = e.buffer.dtype
    dtype = e.dtype
    ty = memory_type(dtype)
    align = elem.storage_bytes
    base = em.buffer_pointer(e.buffer.data)
    value: ir.Value | None = None
    if dtype.lanes == 1:
        ptr = em.element_pointer(base, elem, em.expr(index))
        if e.predicate is None:
            value = b_.load(ptr, typ=ty, align=align)
        else:  # read only where the predicate holds; zero elsewhere
            cond = em.expr(e.predicate)
            before = b_.block
            then_block = b_.append_basic_block("load.then")
            merge = b_.append_basic_block("load.merge")
            b_.cbranch(cond, then_block, merge)
            b_.position_at_end(then_block)
            loaded = b_.load(ptr, typ=ty, align=align)
            b_.branch(merge)
            b_.position_at_end(merge)
            value = b_.phi(ty)
            value.add_incoming(loaded, then_block)
            value.add_incoming(ir.Constant(ty, None), before)
    elif _is_contiguous(index):
        assert isinstance(index, Ramp)
        ptr = em.element_pointer(base, elem, em.expr(index.base))
        if e.predicate is None:
            value = b_.load(ptr, typ=ty, align=align)
        elif _private_in_bounds(em, e.buffer, index):  # a plain load keeps it in registers
            mask = _mask(em, e.predicate, dtype.lanes)
            value = b_.select(mask, b_.load(ptr, typ=ty, align=align), ir.Constant(ty, None))
        else:
            mask = _mask(em, e.predicate, dtype.lanes)
            fn = em.declare(f"llvm.masked.load.{type_suffix(ty)}.p0", ty,
                            [ptr.type, I32, mask.type, ty])
            value = b_.call(fn, [ptr, ir.Constant(I32, align), mask, ir.Constant(ty, None)])
    elif isinstance(index, Broadcast) and e.predicate is None:
        ptr = em.element_pointer(base, elem, em.expr(index.value))
        value = em.broadcast(b_.load(ptr, typ=memory_type(elem), align=align), dtype.lanes)
    else:
        value = _offset_load(em, base, e)
    if value is None:
        ptrs = em.element_pointer(base, elem, em.expr(index))
        mask = _mask(em, e.predicate, dtype.lanes)
        fn = em.declare(f"llvm.masked.gather.{type_suffix(ty)}.{type_suffix(ptrs.type)}", ty,
                        [ptrs.type, I32, mask.type, ty])
        value = b_.call(fn, [ptrs, ir.Constant(I32, align), mask, ir.Constant(ty, None)])
    if elem.is_bool:  # one byte in memory, i1 in registers
        value = b_.icmp_unsigned("!=", value, ir.Constant(ty, None))
    return value


def _offset_load(em: ExprEmitter, base: ir.Value, e: Load) -> ir.Value | None:
    """A load at constant lane offsets (strided) as contiguous chunks and a shuffle."""
    plan = offset_plan(e.indices[0], em.native_lanes(e.dtype), e.predicate is not None)
    if plan is None:
        return None
    mask = None if e.predicate is None else _mask(em, e.predicate, e.dtype.lanes)
    return emit_offset_load(em, base, e.buffer.dtype, plan, mask)


def emit_store(em: ExprEmitter, s: Store) -> None:
    """Write buffer[index] = value: scalar, contiguous vector or scatter."""
    b_ = em.builder
    index = _flat_index(s.buffer, s.indices)
    elem = s.buffer.dtype
    dtype = s.value.dtype
    if dtype.element != elem:
        raise CodegenError(f"store of a {dtype} value into buffer '{s.buffer.name}' of "
                           f"{elem}; cast the value first")
    ty = memory_type(dtype)
    align = elem.storage_bytes
    base = em.buffer_pointer(s.buffer.data)
    value = em.expr(s.value)
    if elem.is_bool:
        value = b_.zext(value, ty)
    lanes = max(dtype.lanes, index.dtype.lanes)
    if lanes > 1 and dtype.lanes == 1:  # scalar stored to several places
        value = em.broadcast(value, lanes)
        ty = memory_type(dtype.with_lanes(lanes))
    if lanes == 1:
        ptr = em.element_pointer(base, elem, em.expr(index))
        if s.predicate is None:
            b_.store(value, ptr, align=align)
        else:
            with b_.if_then(em.expr(s.predicate)):
                b_.store(value, ptr, align=align)
    elif _is_contiguous(index):
        assert isinstance(index, Ramp)
        ptr = em.element_pointer(base, elem, em.expr(index.base))
        if s.predicate is None:
            b_.store(value, ptr, align=align)
        elif _private_in_bounds(em, s.buffer, index):  # blend: no masked store to reload
            mask = _mask(em, s.predicate, lanes)
            old = b_.load(ptr, typ=ty, align=align)
            b_.store(b_.select(mask, value, old), ptr, align=align)
        else:
            mask = _mask(em, s.predicate, lanes)
            fn = em.declare(f"llvm.masked.store.{type_suffix(ty)}.p0", ir.VoidType(),
                            [ty, ptr.type, I32, mask.type])
            b_.call(fn, [value, ptr, ir.Constant(I32, align), mask])
    else:
        index_value = em.expr(index)
        if not isinstance(index_value.type, ir.VectorType):
            index_value = em.broadcast(index_value, lanes)
        ptrs = em.element_pointer(base, elem, index_value)
        mask = _mask(em, s.predicate, lanes)
        fn = em.declare(f"llvm.masked.scatter.{type_suffix(ty)}.{type_suffix(ptrs.type)}",
                        ir.VoidType(), [ty, ptrs.type, I32, mask.type])
        b_.call(fn, [value, ptrs, ir.Constant(I32, align), mask])

