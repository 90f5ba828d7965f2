"""flatten_buffers: rewrite multi-dimensional buffer accesses as one flat element index.

    A[i, j]   with A: float32[16, 8]    ->    A[i * 8 + j]   with A: float32[128]

Every Load/Store/Allocate then refers to a 1-D buffer with the same `data` variable, name,
dtype and scope whose single extent counts all elements including stride padding (explicit
strides from storage_align are respected). The PrimFunc's parameters keep their original
multi-dimensional Buffers, so that params_of(func) still sees the static shapes the caller
must pass; the flat buffers share each parameter's `data` variable, which is what the code
generators bind to the argument pointer.
"""

from __future__ import annotations

from dataclasses import replace

from ember.tir import expr as E
from ember.tir import stmt as S
from ember.tir.function import Buffer, PrimFunc
from ember.tir.functor import Mutator
from ember.tir.transform.vectorize import broadcast, vadd, vmul


def flatten_buffers(func: PrimFunc) -> PrimFunc:
    """Turn every multi-dimensional Load/Store index into one flat index on a 1-D buffer."""
    body = _Flatten().visit(func.body)
    return func if body is func.body else replace(func, body=body)


def flat_extent(buf: Buffer) -> E.Expr:
    """Elements spanned by `buf`, padding included: max over dims of shape[k] * stride[k]."""
    strides = _strides(buf)
    if not buf.shape:
        return E.IntImm(1)
    dims = [E.as_const_int(d) for d in buf.shape]
    steps = [E.as_const_int(s) for s in strides]
    if all(d is not None for d in dims) and all(s is not None for s in steps):
        size = max(d * s for d, s in zip(dims, steps))  # type: ignore[operator]
        return E.IntImm(size, buf.shape[0].dtype)
    if not buf.strides:
        total: E.Expr = buf.shape[0]
        for d in buf.shape[1:]:
            total = vmul(total, _as(d, total.dtype))
        return total
    return vmul(buf.shape[0], _as(strides[0], buf.shape[0].dtype))


def flat_index(buf: Buffer, indices: tuple[E.Expr, ...]) -> E.Expr:
    """sum(indices[k] * stride[k]), keeping Ramp forms for vector indices."""
    lanes = max((i.dtype.lanes for i in indices), default=1)
    dtype = _index_dtype(indices)
    total: E.Expr | None = None
    for index, stride in zip(indices, _strides(buf)):
        term = vmul(broadcast(_as(index, dtype), lanes) if lanes > 1 else _as(index, dtype),
                    broadcast(_as(stride, dtype), lanes) if lanes > 1 else _as(stride, dtype))
        total = term if total is None else vadd(total, term)
    return E.IntImm(0, dtype) if total is None else total


def _strides(buf: Buffer) -> tuple[E.Expr, ...]:
    return tuple(_fold(s) for s in buf.element_strides())


def _fold(e: E.Expr) -> E.Expr:
    """Fold integer constant products and sums (element_strides builds `1 * 8`)."""
    match e:
        case E.Mul(a, b):
            return vmul(_fold(a), _fold(b))
        case E.Add(a, b):
            return vadd(_fold(a), _fold(b))
    return e


def _index_dtype(indices: tuple[E.Expr, ...]) -> E.dt.DType:
    widest = max((i.dtype.element for i in indices), key=lambda d: d.bits, default=E.dt.int32)
    return widest if widest.bits >= 32 else E.dt.int32


def _as(e: E.Expr, dtype: E.dt.DType) -> E.Expr:
    """`e` in integer type `dtype` (lanes kept), constants rebuilt rather than cast."""
    target = dtype.with_lanes(e.dtype.lanes)
    if e.dtype == target:
        return e
    match e:
        case E.IntImm(value):
            return E.IntImm(value, target)
        case E.Ramp(base, stride, lanes):
            return E.Ramp(_as(base, dtype), _as(stride, dtype), lanes)
        case E.Broadcast(value, lanes):
            return E.Broadcast(_as(value, dtype), lanes)
    return E.Cast(target, e)


class _Flatten(Mutator):
    def __init__(self) -> None:
        self.flat: dict[Buffer, Buffer] = {}

    def flatten(self, buf: Buffer) -> Buffer:
        if buf.ndim == 1 and not buf.strides:
            return buf
        if buf not in self.flat:
            self.flat[buf] = Buffer(buf.name, (flat_extent(buf),), buf.dtype, buf.data,
                                    scope=buf.scope)
        return self.flat[buf]

    def visit_Load(self, e: E.Load) -> E.Expr:
        indices = tuple(self.visit(i) for i in e.indices)
        predicate = None if e.predicate is None else self.visit(e.predicate)
        buf = self.flatten(e.buffer)
        if buf is e.buffer:
            if predicate is e.predicate and all(a is b for a, b in zip(indices, e.indices)):
                return e
            return E.Load(buf, indices, predicate)
        return E.Load(buf, (flat_index(e.buffer, indices),), predicate)

    def visit_Store(self, s: S.Store) -> S.Stmt:
        value = self.visit(s.value)
        indices = tuple(self.visit(i) for i in s.indices)
        predicate = None if s.predicate is None else self.visit(s.predicate)
        buf = self.flatten(s.buffer)
        if buf is not s.buffer:
            indices = (flat_index(s.buffer, indices),)
        return S.Store(buf, value, indices, predicate)

    def visit_Allocate(self, s: S.Allocate) -> S.Stmt:
        body = self.visit(s.body)
        buf = self.flatten(s.buffer)
        if buf is s.buffer and body is s.body:
            return s
        return S.Allocate(buf, body)
