"""Statement simplification: every expression simplified under the ranges of enclosing loops."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ember.arith.canonical import ExprKeys
from ember.arith.const_fold import scalar_const
from ember.arith.interval import Interval
from ember.arith.simplifier import Simplifier
from ember.tir.expr import (
    GE, GT, LE, LT, And, Expr, IntImm, Max, Min, Not, Sub, Var, const,
)
from ember.tir.functor import Mutator, substitute
from ember.tir.stmt import Evaluate, For, ForKind, IfThenElse, LetStmt, Seq, Stmt


def no_op() -> Stmt:
    """The statement that does nothing."""
    return Evaluate(const(0))


def is_no_op(s: Stmt) -> bool:
    return (isinstance(s, Evaluate) and scalar_const(s.value) is not None) or (
        isinstance(s, Seq) and not s.stmts)


class StmtSimplifier(Mutator):
    """Walks statements; a new expression Simplifier (with its own memo) per scope."""

    def __init__(self, ranges: dict[Var, Interval] | None = None) -> None:
        self.keys = ExprKeys()
        self.simplifier = Simplifier(ranges, self.keys)

    def visit(self, node: Any) -> Any:
        if isinstance(node, Expr):
            return self.simplifier.visit(node)
        return super().visit(node)

    def _scoped(self, var: Var, interval: Interval, body: Stmt) -> Stmt:
        outer = self.simplifier
        self.simplifier = Simplifier({**outer.ranges, var: interval}, self.keys)
        try:
            return self.visit(body)  # type: ignore[no-any-return]
        finally:
            self.simplifier = outer

    def visit_For(self, s: For) -> Stmt:
        begin, extent = self.visit(s.begin), self.visit(s.extent)
        count = scalar_const(extent)
        if isinstance(count, int) and count <= 0:  # for i in range(0): ... -> nothing
            return no_op()
        if count == 1 and s.kind != ForKind.THREAD_BINDING:  # one trip: body[i := begin]
            return self.visit(substitute(s.body, {s.var: begin}))  # type: ignore[no-any-return]
        last = self.simplifier.visit(Sub(begin + extent, IntImm(1, extent.dtype)))
        body = self._scoped(s.var, Interval(begin, last), s.body)
        if is_no_op(body):  # for i in ...: nothing -> nothing
            return no_op()
        annotations = tuple((k, self.visit(v)) for k, v in s.annotations)
        if (begin is s.begin and extent is s.extent and body is s.body
                and all(a[1] is b[1] for a, b in zip(annotations, s.annotations))):
            return s
        return replace(s, begin=begin, extent=extent, body=body, annotations=annotations)

    def visit_IfThenElse(self, s: IfThenElse) -> Stmt:
        condition = self.visit(s.condition)
        value = scalar_const(condition)
        if value is not None:  # if true: a else: b -> a
            chosen = s.then_case if value else s.else_case
            return no_op() if chosen is None else self.visit(chosen)  # type: ignore[no-any-return]
        then_case = self._assuming(condition, s.then_case)
        else_case = None
        if s.else_case is not None:
            else_case = self._assuming(Not(condition), s.else_case)
            if is_no_op(else_case):
                else_case = None
        if is_no_op(then_case) and else_case is None:
            return no_op()
        if condition is s.condition and then_case is s.then_case and else_case is s.else_case:
            return s
        return IfThenElse(condition, then_case, else_case)

    def _assuming(self, condition: Expr, body: Stmt) -> Stmt:
        """Simplify `body` knowing `condition`, using what it says about single loop variables."""
        ranges = dict(self.simplifier.ranges)
        changed = False
        for var, lo, hi in _var_facts(condition):
            old = ranges.get(var, Interval(None, None))
            new_lo = old.lo if lo is None else lo if old.lo is None else Max(old.lo, lo)
            new_hi = old.hi if hi is None else hi if old.hi is None else Min(old.hi, hi)
            ranges[var] = Interval(new_lo, new_hi)
            changed = True
        if not changed:
            return self.visit(body)  # type: ignore[no-any-return]
        outer = self.simplifier
        self.simplifier = Simplifier(ranges, self.keys)
        try:
            return self.visit(body)  # type: ignore[no-any-return]
        finally:
            self.simplifier = outer

    def visit_LetStmt(self, s: LetStmt) -> Stmt:
        value = self.visit(s.value)
        body = self._scoped(s.var, Interval.point(value), s.body)
        if value is s.value and body is s.body:
            return s
        return LetStmt(s.var, value, body)

    def visit_Seq(self, s: Seq) -> Stmt:
        items = [self.visit(x) for x in s.stmts]
        kept = tuple(x for x in items if not is_no_op(x))
        if not kept:
            return no_op()
        if len(kept) == 1:
            return kept[0]
        if len(kept) == len(s.stmts) and all(a is b for a, b in zip(kept, s.stmts)):
            return s
        return Seq(kept)


def _var_facts(cond: Expr) -> list[tuple[Var, Expr | None, Expr | None]]:
    """(var, lo, hi) bounds implied by `cond` for comparisons of a variable with anything."""
    facts: list[tuple[Var, Expr | None, Expr | None]] = []
    match cond:
        case And(a, b):
            return _var_facts(a) + _var_facts(b)
        case Not(LT(x, y)):
            return _var_facts(GE(x, y))
        case Not(LE(x, y)):
            return _var_facts(GT(x, y))
        case Not(GT(x, y)):
            return _var_facts(LE(x, y))
        case Not(GE(x, y)):
            return _var_facts(LT(x, y))
        case LT(Var() as v, y) if v.dtype.kind == "int":  # v < y -> v <= y - 1
            facts.append((v, None, y - 1))
        case LE(Var() as v, y) if v.dtype.kind == "int":
            facts.append((v, None, y))
        case GT(Var() as v, y) if v.dtype.kind == "int":  # v > y -> v >= y + 1
            facts.append((v, y + 1, None))
        case GE(Var() as v, y) if v.dtype.kind == "int":
            facts.append((v, y, None))
    return facts
