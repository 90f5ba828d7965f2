"""LLVM IR for loads and stores: scalar, contiguous vector, gather/scatter, predicated."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir

from ember.codegen.llvm_expr import I1, I32, memory_type, type_suffix
from ember.codegen.llvm_shuffle import concat_vectors, emit_offset_load, offset_plan
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
            value = _masked_load(em, ptr, _mask(em, e.predicate, dtype.lanes), ty, align,
                                 em.native_lanes(elem))
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


def _mask_pieces(em: ExprEmitter, mask: ir.Value, lanes: int, native: int
                 ) -> tuple[list[int], int, list[ir.Value]]:
    """(start lanes, width, mask) of the register-wide pieces a masked access of `lanes` is
    split into (one piece, the whole access, when it fits a register)."""
    if lanes <= native:
        return [0], lanes, [mask]
    starts = list(range(0, lanes, native))
    false = ir.Constant(mask.type, [ir.Constant(I1, 0)] * lanes)
    return starts, native, [_piece(em, mask, start, native, false) for start in starts]


def _piece(em: ExprEmitter, vector: ir.Value, start: int, width: int, fill: ir.Value
           ) -> ir.Value:
    """Lanes start..start+width of `vector`; lanes past its end come from vector `fill`."""
    lanes = vector.type.count
    picks = [start + j if start + j < lanes else lanes for j in range(width)]
    return em.builder.shuffle_vector(vector, fill, ir.Constant(ir.VectorType(I32, width), picks))


def _piece_pointer(em: ExprEmitter, ptr: ir.Value, elem_type: ir.Type, start: int) -> ir.Value:
    # masked-off lanes may lie outside the buffer: no inbounds here
    if not start:
        return ptr
    piece = em.builder.gep(ptr, [ir.Constant(I32, start)], source_etype=elem_type)
    piece.type = ptr.type
    return piece


def _masked_load(em: ExprEmitter, ptr: ir.Value, mask: ir.Value, ty: ir.VectorType,
                 align: int, native: int) -> ir.Value:
    """llvm.masked.load of `ty` (zero where masked off), one register-wide call per piece.

    LLVM's x86 back end miscompiles a masked load wider than a register when it splits it
    and one half's mask is all false (it loads that half unmasked), so wide accesses are
    split here, where every piece is legal as it stands."""
    starts, width, masks = _mask_pieces(em, mask, ty.count, native)
    piece_type = ir.VectorType(ty.element, width)
    fn = em.declare(f"llvm.masked.load.{type_suffix(piece_type)}.p0", piece_type,
                    [ptr.type, I32, ir.VectorType(I1, width), piece_type])
    pieces = [em.builder.call(fn, [_piece_pointer(em, ptr, ty.element, start),
                                   ir.Constant(I32, align), piece_mask,
                                   ir.Constant(piece_type, None)])
              for start, piece_mask in zip(starts, masks)]
    if len(pieces) == 1:
        return pieces[0]
    whole = concat_vectors(em, pieces)
    return _piece(em, whole, 0, ty.count, ir.Constant(whole.type, None))


def _masked_store(em: ExprEmitter, value: ir.Value, ptr: ir.Value, mask: ir.Value, align: int,
                  native: int) -> None:
    """llvm.masked.store of `value`, one register-wide call per piece (see _masked_load)."""
    ty = value.type
    starts, width, masks = _mask_pieces(em, mask, ty.count, native)
    piece_type = ir.VectorType(ty.element, width)
    fn = em.declare(f"llvm.masked.store.{type_suffix(piece_type)}.p0", ir.VoidType(),
                    [piece_type, ptr.type, I32, ir.VectorType(I1, width)])
    for start, piece_mask in zip(starts, masks):
        piece = value if len(starts) == 1 else \
            _piece(em, value, start, width, ir.Constant(ty, None))
        em.builder.call(fn, [piece, _piece_pointer(em, ptr, ty.element, start),
                             ir.Constant(I32, align), piece_mask])


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
            _masked_store(em, value, ptr, _mask(em, s.predicate, lanes), align,
                          em.native_lanes(elem))
    else:
        index_value = em.expr(index)
        if not isinstance(index_value.type, ir.VectorType):
            index_value = em.broadcast(index_value, lanes)
        ptrs = em.element_pointer(base, elem, index_value)
        mask = _mask(em, s.predicate, lanes)
        fn = em.declare(f"llvm.masked.scatter.{type_suffix(ty)}.{type_suffix(ptrs.type)}",
                        ir.VoidType(), [ty, ptrs.type, I32, mask.type])
        b_.call(fn, [value, ptrs, ir.Constant(I32, align), mask])

