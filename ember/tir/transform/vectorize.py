"""vectorize_loops: turn VECTORIZED loops into vector code (Ramp/Broadcast, vector load/store).

    for i in range(8):  # vectorized          B[ramp(0, 1, 8)] = A[ramp(0, 1, 8)] * x8(2.0)
      B[i] = A[i] * 2.0                 ->

A loop whose body cannot be vectorized soundly (a value reduced into one location, a
loop-carried access pattern, an allocation, nested vector code, ...) becomes a SERIAL loop.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ember.arith.modular import modular_set
from ember.tir import expr as E
from ember.tir import stmt as S
from ember.tir.function import PrimFunc
from ember.tir.functor import Mutator, Visitor, substitute
from ember.tir.structural import structural_equal


def vectorize_loops(func: PrimFunc) -> PrimFunc:
    """Replace every VECTORIZED loop by vector expressions (or a serial loop when unsound)."""
    return replace(func, body=_LoopVectorizer().visit(func.body))


# ------------------------------------------------------------------------------------------
# lane-aware builders: keep Ramp / Broadcast forms and fold constants as they go
def broadcast(e: E.Expr, lanes: int) -> E.Expr:
    """`e` widened to `lanes` lanes (unchanged when it already has them)."""
    if e.dtype.lanes == lanes:
        return e
    assert e.dtype.lanes == 1, (e, lanes)
    return E.Broadcast(e, lanes)


def _lanes(*values: E.Expr) -> int:
    return max(v.dtype.lanes for v in values)


def vadd(a: E.Expr, b: E.Expr) -> E.Expr:
    """a + b, with Ramp(x, s) + y -> Ramp(x + y, s) and constants folded."""
    match a, b:
        case E.IntImm(x), E.IntImm(y):
            return E.IntImm(x + y, a.dtype)
        case E.IntImm(0), _:
            return b
        case _, E.IntImm(0):
            return a
        case E.Ramp(x, s, n), E.Ramp(y, t, m) if n == m:
            return E.Ramp(vadd(x, y), vadd(s, t), n)
        case E.Ramp(x, s, n), E.Broadcast(y, m) if n == m:
            return E.Ramp(vadd(x, y), s, n)
        case E.Broadcast(x, n), E.Ramp(y, s, m) if n == m:
            return E.Ramp(vadd(x, y), s, n)
        case E.Broadcast(x, n), E.Broadcast(y, m) if n == m:
            return E.Broadcast(vadd(x, y), n)
    lanes = _lanes(a, b)
    if lanes > 1 and (a.dtype.lanes == 1 or b.dtype.lanes == 1):
        return vadd(broadcast(a, lanes), broadcast(b, lanes))
    return E.Add(a, b)


def vsub(a: E.Expr, b: E.Expr) -> E.Expr:
    """a - b, with Ramp(x, s) - y -> Ramp(x - y, s) and constants folded."""
    match a, b:
        case E.IntImm(x), E.IntImm(y):
            return E.IntImm(x - y, a.dtype)
        case _, E.IntImm(0):
            return a
        case E.Ramp(x, s, n), E.Ramp(y, t, m) if n == m:
            return E.Ramp(vsub(x, y), vsub(s, t), n)
        case E.Ramp(x, s, n), E.Broadcast(y, m) if n == m:
            return E.Ramp(vsub(x, y), s, n)
        case E.Broadcast(x, n), E.Ramp(y, s, m) if n == m:
            return E.Ramp(vsub(x, y), vsub(E.IntImm(0, s.dtype), s), n)
        case E.Broadcast(x, n), E.Broadcast(y, m) if n == m:
            return E.Broadcast(vsub(x, y), n)
    lanes = _lanes(a, b)
    if lanes > 1 and (a.dtype.lanes == 1 or b.dtype.lanes == 1):
        return vsub(broadcast(a, lanes), broadcast(b, lanes))
    return E.Sub(a, b)


def vmul(a: E.Expr, b: E.Expr) -> E.Expr:
    """a * b, with Ramp(x, s) * y -> Ramp(x * y, s * y) and constants folded."""
    match a, b:
        case E.IntImm(x), E.IntImm(y):
            return E.IntImm(x * y, a.dtype)
        case E.IntImm(1), _:
            return b
        case _, E.IntImm(1):
            return a
        case E.IntImm(0), _ if b.dtype.lanes == 1:
            return a
        case _, E.IntImm(0) if a.dtype.lanes == 1:
            return b
        case E.Ramp(x, s, n), E.Broadcast(y, m) if n == m:
            return E.Ramp(vmul(x, y), vmul(s, y), n)
        case E.Broadcast(x, n), E.Ramp(y, s, m) if n == m:
            return E.Ramp(vmul(x, y), vmul(x, s), n)
        case E.Broadcast(x, n), E.Broadcast(y, m) if n == m:
            return E.Broadcast(vmul(x, y), n)
    lanes = _lanes(a, b)
    if lanes > 1 and (a.dtype.lanes == 1 or b.dtype.lanes == 1):
        return vmul(broadcast(a, lanes), broadcast(b, lanes))
    return E.Mul(a, b)


# ------------------------------------------------------------------------------------------
class _CannotVectorize(Exception):
    """Raised inside the body vectorizer; the loop falls back to a serial loop."""


class _HasVectors(Visitor):
    def __init__(self) -> None:
        self.found = False

    def visit(self, node: Any) -> None:
        if isinstance(node, E.Expr) and node.dtype.lanes > 1:
            self.found = True
        elif not self.found:
            super().visit(node)


class _LoopVectorizer(Mutator):
    def visit_For(self, loop: S.For) -> S.Stmt:
        body = self.visit(loop.body)  # inner loops first
        if loop.kind != S.ForKind.VECTORIZED:
            return loop if body is loop.body else replace(loop, body=body)
        serial = replace(loop, body=body, kind=S.ForKind.SERIAL)
        lanes = E.as_const_int(loop.extent)
        if lanes is None or lanes < 1:
            return serial
        if lanes == 1:
            return substitute(body, {loop.var: loop.begin})  # type: ignore[no-any-return]
        has_vectors = _HasVectors()
        has_vectors.visit(body)
        if has_vectors.found:
            return serial
        ramp = E.Ramp(loop.begin, E.IntImm(1, loop.begin.dtype), lanes)
        try:
            out = _BodyVectorizer(loop.var, ramp).visit(body)
        except _CannotVectorize:
            return serial
        if not _independent_lanes(out):
            return serial
        return out  # type: ignore[no-any-return]


class _BodyVectorizer(Mutator):
    """Rewrite a loop body with the loop variable replaced by a Ramp of `lanes` lanes."""

    def __init__(self, var: E.Var, ramp: E.Ramp) -> None:
        self.lanes = ramp.lanes
        self.vars: dict[E.Var, E.Expr] = {var: ramp}
        self.mask: E.Expr | None = None  # lanes that execute the current statement

    # expressions --------------------------------------------------------------------------
    def visit_Var(self, var: E.Var) -> E.Expr:
        return self.vars.get(var, var)

    def _pair(self, e: E.BinaryOp) -> tuple[E.Expr, E.Expr, bool]:
        a, b = self.visit(e.a), self.visit(e.b)
        vector = a.dtype.lanes > 1 or b.dtype.lanes > 1
        if vector:
            a, b = broadcast(a, self.lanes), broadcast(b, self.lanes)
        return a, b, vector

    def visit_Add(self, e: E.Add) -> E.Expr:
        a, b, vector = self._pair(e)
        return vadd(a, b) if vector else _rebuild(e, a, b)

    def visit_Sub(self, e: E.Sub) -> E.Expr:
        a, b, vector = self._pair(e)
        return vsub(a, b) if vector else _rebuild(e, a, b)

    def visit_Mul(self, e: E.Mul) -> E.Expr:
        a, b, vector = self._pair(e)
        return vmul(a, b) if vector else _rebuild(e, a, b)

    def visit_FloorDiv(self, e: E.FloorDiv) -> E.Expr:
        a, b, vector = self._pair(e)
        if vector:
            split = _ramp_divmod(a, b)
            if split is not None:
                return split[0]
        return _rebuild(e, a, b)

    def visit_FloorMod(self, e: E.FloorMod) -> E.Expr:
        a, b, vector = self._pair(e)
        if vector:
            split = _ramp_divmod(a, b)
            if split is not None:
                return split[1]
        return _rebuild(e, a, b)

    def generic_visit(self, node: Any) -> Any:
        if isinstance(node, E.BinaryOp):
            a, b, _ = self._pair(node)
            return _rebuild(node, a, b)
        if isinstance(node, (E.Ramp, E.Broadcast, E.Reduce)):
            raise _CannotVectorize
        return super().generic_visit(node)

    def visit_Not(self, e: E.Not) -> E.Expr:
        a = self.visit(e.a)
        return e if a is e.a else E.Not(a)

    def visit_Cast(self, e: E.Cast) -> E.Expr:
        value = self.visit(e.value)
        if value is e.value:
            return e
        return E.Cast(e.dtype.with_lanes(value.dtype.lanes), value)

    def visit_Select(self, e: E.Select) -> E.Expr:
        parts = [self.visit(x) for x in (e.condition, e.true_value, e.false_value)]
        if all(p is q for p, q in zip(parts, (e.condition, e.true_value, e.false_value))):
            return e
        if max(p.dtype.lanes for p in parts) > 1:
            parts = [broadcast(p, self.lanes) for p in parts]
        return E.Select(*parts)

    def visit_Call(self, e: E.Call) -> E.Expr:
        args = tuple(self.visit(a) for a in e.args)
        if all(a is b for a, b in zip(args, e.args)):
            return e
        if max((a.dtype.lanes for a in args), default=1) > 1:
            args = tuple(broadcast(a, self.lanes) for a in args)
            return E.Call(e.dtype.with_lanes(self.lanes), e.name, args)
        return E.Call(e.dtype, e.name, args)

    def visit_Let(self, e: E.Let) -> E.Expr:
        value = self.visit(e.value)
        var = self._bind(e.var, value)
        body = self.visit(e.body)
        return E.Let(var, value, body)

    def _bind(self, var: E.Var, value: E.Expr) -> E.Var:
        if value.dtype.lanes == var.dtype.lanes:
            self.vars.pop(var, None)
            return var
        wide = E.Var(var.name, var.dtype.with_lanes(value.dtype.lanes))
        self.vars[var] = wide
        return wide

    def visit_Load(self, e: E.Load) -> E.Expr:
        indices = tuple(self.visit(i) for i in e.indices)
        predicate = None if e.predicate is None else self.visit(e.predicate)
        vector = max([i.dtype.lanes for i in indices]
                     + [1 if predicate is None else predicate.dtype.lanes]) > 1
        if self.mask is not None:  # guarded by a lane condition: never read disabled lanes
            vector = True
        if not vector:
            if predicate is e.predicate and all(a is b for a, b in zip(indices, e.indices)):
                return e
            return E.Load(e.buffer, indices, predicate)
        indices = tuple(broadcast(i, self.lanes) for i in indices)
        predicate = _and(predicate, self.mask, self.lanes)
        return E.Load(e.buffer, indices, predicate)

    # statements ------------------------------------------------------------------------
    def visit_Store(self, s: S.Store) -> S.Stmt:
        value = self.visit(s.value)
        indices = tuple(self.visit(i) for i in s.indices)
        predicate = None if s.predicate is None else self.visit(s.predicate)
        index_lanes = max(i.dtype.lanes for i in indices) if indices else 1
        if index_lanes == 1:
            # the same location in every lane: only an invariant store not reading itself
            if (value.dtype.lanes > 1 or self.mask is not None
                    or (predicate is not None and predicate.dtype.lanes > 1)
                    or _reads(value, s.buffer.data)):
                raise _CannotVectorize
            return S.Store(s.buffer, value, indices, predicate)
        indices = tuple(broadcast(i, self.lanes) for i in indices)
        value = broadcast(value, self.lanes)
        predicate = _and(predicate, self.mask, self.lanes)
        return S.Store(s.buffer, value, indices, predicate)

    def visit_IfThenElse(self, s: S.IfThenElse) -> S.Stmt:
        condition = self.visit(s.condition)
        if condition.dtype.lanes == 1 and self.mask is None:
            then_case = self.visit(s.then_case)
            else_case = None if s.else_case is None else self.visit(s.else_case)
            return S.IfThenElse(condition, then_case, else_case)
        outer = self.mask
        condition = broadcast(condition, self.lanes)
        self.mask = _and(condition, outer, self.lanes)
        then_case = self.visit(s.then_case)
        stmts = [then_case]
        if s.else_case is not None:
            self.mask = _and(E.Not(condition), outer, self.lanes)
            stmts.append(self.visit(s.else_case))
        self.mask = outer
        return S.seq(*stmts)

    def visit_For(self, s: S.For) -> S.Stmt:
        begin, extent = self.visit(s.begin), self.visit(s.extent)
        if begin.dtype.lanes > 1 or extent.dtype.lanes > 1:
            raise _CannotVectorize  # the trip count differs between lanes
        return S.For(s.var, begin, extent, s.kind, self.visit(s.body), s.thread_tag,
                     s.annotations)

    def visit_LetStmt(self, s: S.LetStmt) -> S.Stmt:
        value = self.visit(s.value)
        var = self._bind(s.var, value)
        return S.LetStmt(var, value, self.visit(s.body))

    def visit_Evaluate(self, s: S.Evaluate) -> S.Stmt:
        value = self.visit(s.value)
        if value.dtype.lanes > 1 or self.mask is not None:
            raise _CannotVectorize
        return s if value is s.value else S.Evaluate(value)

    def visit_Allocate(self, s: S.Allocate) -> S.Stmt:
        raise _CannotVectorize

    def visit_Barrier(self, s: S.Barrier) -> S.Stmt:
        raise _CannotVectorize


def _rebuild(e: E.BinaryOp, a: E.Expr, b: E.Expr) -> E.Expr:
    return e if a is e.a and b is e.b else type(e)(a, b)


def _and(a: E.Expr | None, b: E.Expr | None, lanes: int) -> E.Expr | None:
    if a is None or b is None:
        return a if b is None else broadcast(b, lanes)
    return E.And(broadcast(a, lanes), broadcast(b, lanes))


def _reads(e: E.Expr, data: E.Var) -> bool:
    found = []

    class _Find(Visitor):
        def visit_Load(self, load: E.Load) -> None:
            if load.buffer.data is data:
                found.append(load)
            self.generic_visit(load)

    _Find().visit(e)
    return bool(found)


def _modular(e: E.Expr) -> tuple[int, int]:
    """(coeff, base) with e == coeff * k + base for some integer k."""
    ms = modular_set(e)
    return int(ms.coeff), int(ms.base)


def _ramp_divmod(a: E.Expr, b: E.Expr) -> tuple[E.Expr, E.Expr] | None:
    """Ramp(x, s, n) // c and % c when no lane crosses a multiple of c."""
    if not (isinstance(a, E.Ramp) and isinstance(b, E.Broadcast)):
        return None
    divisor, stride = E.as_const_int(b.value), E.as_const_int(a.stride)
    if divisor is None or stride is None or divisor <= 0 or stride < 0:
        return None
    coeff, base = _modular(a.base)
    if coeff % divisor != 0:
        return None
    offset = base % divisor
    if offset + stride * (a.lanes - 1) >= divisor:
        return None
    quotient = E.Broadcast(E.FloorDiv(a.base, b.value), a.lanes)
    return quotient, E.Ramp(E.FloorMod(a.base, b.value), a.stride, a.lanes)


def _independent_lanes(body: S.Stmt) -> bool:
    """True if no lane can see another lane's writes: each written buffer is accessed at one
    and the same index everywhere, and that index is a Ramp with a nonzero constant stride
    when the buffer is accessed more than once."""
    accesses: dict[E.Var, list[tuple[E.Expr, ...]]] = {}
    written: set[E.Var] = set()

    class _Collect(Visitor):
        def visit_Load(self, e: E.Load) -> None:
            accesses.setdefault(e.buffer.data, []).append(e.indices)
            self.generic_visit(e)

        def visit_Store(self, s: S.Store) -> None:
            accesses.setdefault(s.buffer.data, []).append(s.indices)
            written.add(s.buffer.data)
            self.generic_visit(s)

    _Collect().visit(body)
    for data in written:
        found = accesses[data]
        first = found[0]
        if any(not structural_equal(first, other) for other in found[1:]):
            return False
        if len(found) > 1 and not any(_injective(i) for i in first):
            return False
    return True


def _injective(index: E.Expr) -> bool:
    if not isinstance(index, E.Ramp):
        return False
    stride = E.as_const_int(index.stride)
    return stride is not None and stride != 0
