"""Vector accesses at constant lane offsets as contiguous loads and shuffles, not gathers.

An index such as `ramp(b, 2, 16)` (or `ramp(b, 3, 8) + x8(c)`) is `b + (0, 2, 4, ..., 30)`: a
scalar base plus constant lane offsets. Such a load reads the elements between the smallest
and the largest offset as a few contiguous vectors ("chunks") and picks the lanes with one
shufflevector, which LLVM turns into permutes (vpermt2ps) instead of a gather.

Every chunk lies inside [base + min offset, base + max offset]: the last chunk is moved back
so that it ends at the last element read, so no byte outside what the gather would read is
touched (no bounds proof needed). With a predicate each chunk is a masked load whose mask
holds the predicate's lane at that lane's element, false between elements.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir

from ember.codegen.llvm_expr import I1, I32, memory_type, type_suffix
from ember.dtype import DType
from ember.tir.expr import Add, Broadcast, Expr, IntImm, Mul, Ramp, Sub

if TYPE_CHECKING:
    from ember.codegen.llvm_expr import ExprEmitter

# at most this many chunks (contiguous vectors) per access, else a gather is cheaper
MAX_CHUNKS = 8


def lane_offsets(index: Expr) -> tuple[Expr, tuple[int, ...]] | None:
    """(scalar base, constant offset per lane) when `index` is base + constants, else None."""
    match index:
        case Ramp(base=base, stride=IntImm(value=stride), lanes=lanes):
            return base, tuple(i * stride for i in range(lanes))
        case Broadcast(value=value, lanes=lanes):
            return value, (0,) * lanes
        case Add(a=a, b=b) | Sub(a=a, b=b):
            left, right = lane_offsets(a), lane_offsets(b)
            if left is None or right is None or len(left[1]) != len(right[1]):
                return None
            if isinstance(index, Add):
                return left[0] + right[0], tuple(x + y for x, y in zip(left[1], right[1]))
            return left[0] - right[0], tuple(x - y for x, y in zip(left[1], right[1]))
        case Mul(a=a, b=Broadcast(value=IntImm(value=factor))) | \
                Mul(a=Broadcast(value=IntImm(value=factor)), b=a):
            inner = lane_offsets(a)
            if inner is None:
                return None
            return inner[0] * factor, tuple(x * factor for x in inner[1])
    return None


def _locate(offset: int, width: int, starts: list[int]) -> int:
    """The lane of the concatenated chunks that holds element `offset` (relative to lo)."""
    count = len(starts)
    chunk = min(offset // width, count - 1)
    return chunk * width + offset - starts[chunk]


def concat_vectors(em: ExprEmitter, parts: list[ir.Value]) -> ir.Value:
    """One vector holding `parts` (equal vector types) one after another, padded to 2^k."""
    b_ = em.builder
    while len(parts) > 1:
        if len(parts) % 2:
            parts = parts + [ir.Constant(parts[0].type, None)]
        width = parts[0].type.count
        mask = ir.Constant(ir.VectorType(I32, 2 * width), list(range(2 * width)))
        parts = [b_.shuffle_vector(parts[i], parts[i + 1], mask)
                 for i in range(0, len(parts), 2)]
    return parts[0]


class OffsetPlan:
    """How to read lane offsets `offsets` (from scalar `base`) as chunks of `width`."""

    def __init__(self, base: Expr, offsets: tuple[int, ...], width: int, starts: list[int]
                 ) -> None:
        self.base, self.offsets, self.width, self.starts = base, offsets, width, starts


def offset_plan(index: Expr, native: int, predicated: bool) -> OffsetPlan | None:
    """The chunk plan of a vector index at constant lane offsets, or None (gather instead)."""
    found = lane_offsets(index)
    if found is None:
        return None
    base, offsets = found
    lo, hi = min(offsets), max(offsets)
    span = hi - lo + 1
    lanes = len(offsets)
    if span == 1 or span > MAX_CHUNKS * max(native, lanes):
        return None  # one element (a broadcast), or far apart
    if offsets == tuple(range(lo, lo + lanes)):
        return None  # contiguous: an ordinary vector load
    if predicated and len(set(offsets)) != lanes:
        return None  # a masked element read by two lanes would need the OR of their lanes
    width = min(span, max(native, 4))
    count = -(-span // width)
    if count > MAX_CHUNKS:
        return None
    starts = [j * width for j in range(count - 1)] + [span - width]
    if lo:
        base = base + lo
        offsets = tuple(o - lo for o in offsets)
    return OffsetPlan(base, offsets, width, starts)


def emit_offset_load(em: ExprEmitter, base_ptr: ir.Value, elem: DType, plan: OffsetPlan,
                     predicate: ir.Value | None) -> ir.Value:
    """buffer[plan.base + plan.offsets] as chunk loads (masked by `predicate`) + a shuffle."""
    b_ = em.builder
    width, starts, offsets = plan.width, plan.starts, plan.offsets
    lanes = len(offsets)
    chunk_type = memory_type(elem.with_lanes(width))
    align = elem.storage_bytes
    first = em.expr(plan.base)
    lane_of = {o: i for i, o in enumerate(offsets)}
    chunks = []
    for start in starts:
        position = b_.add(first, ir.Constant(first.type, start)) if start else first
        if predicate is None:
            ptr = em.element_pointer(base_ptr, elem, position)
            chunks.append(b_.load(ptr, typ=chunk_type, align=align))
            continue
        # masked-off lanes may point outside the buffer: no inbounds here
        ptr = b_.gep(base_ptr, [position], source_etype=memory_type(elem))
        ptr.type = base_ptr.type
        picks = [lane_of.get(start + j, lanes) for j in range(width)]
        false = ir.Constant(predicate.type, [ir.Constant(I1, 0)] * lanes)
        mask = b_.shuffle_vector(predicate, false,
                                 ir.Constant(ir.VectorType(I32, width), picks))
        fn = em.declare(f"llvm.masked.load.{type_suffix(chunk_type)}.p0", chunk_type,
                        [ptr.type, I32, mask.type, chunk_type])
        chunks.append(b_.call(fn, [ptr, ir.Constant(I32, align), mask,
                                   ir.Constant(chunk_type, None)]))
    whole = concat_vectors(em, chunks)
    picks = [_locate(o, width, starts) for o in offsets]
    return b_.shuffle_vector(whole, ir.Constant(whole.type, None),
                             ir.Constant(ir.VectorType(I32, lanes), picks))
