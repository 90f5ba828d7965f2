"""remove_no_ops: drop statements that do nothing (empty loops, constant ifs, dead lets)."""

from __future__ import annotations

from dataclasses import replace

from ember.tir import expr as E
from ember.tir import stmt as S
from ember.tir.function import PrimFunc
from ember.tir.functor import Mutator, Visitor, substitute, used_vars
from ember.tir.structural import structural_equal


def remove_no_ops(func: PrimFunc) -> PrimFunc:
    """Remove loops with empty bodies or zero trip count, `Evaluate(constant)`, empty
    sequences, ifs with constant conditions, lets of unused variables, unused allocations and
    stores of a location's own value; substitute loops of extent one.

        for i in range(4):           ->    (nothing)
          if False: A[i] = 0.0
    """
    body = _RemoveNoOps().visit(func.body)
    if is_no_op(body):
        body = NO_OP
    return func if body is func.body else replace(func, body=body)


NO_OP = S.Evaluate(E.IntImm(0))


def is_no_op(s: S.Stmt) -> bool:
    """True for a statement with no effect: an empty Seq or Evaluate of a constant."""
    match s:
        case S.Seq(stmts):
            return all(is_no_op(item) for item in stmts)
        case S.Evaluate(E.IntImm() | E.FloatImm() | E.StringImm() | E.Var()):
            return True
    return False


def _empty() -> S.Stmt:
    return S.Seq(())


class _RemoveNoOps(Mutator):
    def visit_Seq(self, s: S.Seq) -> S.Stmt:
        items = [self.visit(item) for item in s.stmts]
        kept = [item for item in items if not is_no_op(item)]
        if len(kept) == len(s.stmts) and all(a is b for a, b in zip(kept, s.stmts)):
            return s
        return S.seq(*kept) if kept else _empty()

    def visit_For(self, loop: S.For) -> S.Stmt:
        body = self.visit(loop.body)
        extent = E.as_const_int(loop.extent)
        if is_no_op(body) or (extent is not None and extent <= 0):
            return _empty()
        if extent == 1 and loop.kind != S.ForKind.THREAD_BINDING:
            return substitute(body, {loop.var: loop.begin})  # type: ignore[no-any-return]
        return loop if body is loop.body else replace(loop, body=body)

    def visit_IfThenElse(self, s: S.IfThenElse) -> S.Stmt:
        then_case = self.visit(s.then_case)
        else_case = None if s.else_case is None else self.visit(s.else_case)
        if else_case is not None and is_no_op(else_case):
            else_case = None
        if isinstance(s.condition, E.IntImm):
            chosen = then_case if s.condition.value else else_case
            return _empty() if chosen is None else chosen
        if is_no_op(then_case):
            if else_case is None:
                return _empty()
            return S.IfThenElse(E.Not(s.condition), else_case)
        if then_case is s.then_case and else_case is s.else_case:
            return s
        return S.IfThenElse(s.condition, then_case, else_case)

    def visit_LetStmt(self, s: S.LetStmt) -> S.Stmt:
        body = self.visit(s.body)
        if is_no_op(body):
            return _empty()
        if not any(v is s.var for v in used_vars(body)):
            return body
        return s if body is s.body else S.LetStmt(s.var, s.value, body)

    def visit_Allocate(self, s: S.Allocate) -> S.Stmt:
        body = self.visit(s.body)
        if is_no_op(body):
            return _empty()
        if not _uses_buffer(body, s.buffer.data):
            return body
        return s if body is s.body else S.Allocate(s.buffer, body)

    def visit_AttrStmt(self, s: S.AttrStmt) -> S.Stmt:
        body = self.visit(s.body)
        if is_no_op(body):
            return _empty()
        return s if body is s.body else S.AttrStmt(s.key, s.value, body)

    def visit_Store(self, s: S.Store) -> S.Stmt:
        value = s.value
        if (isinstance(value, E.Load) and value.buffer.data is s.buffer.data
                and value.predicate is None and s.predicate is None
                and structural_equal(value.indices, s.indices)):
            return _empty()  # A[i] = A[i]
        return s


def _uses_buffer(s: S.Stmt, data: E.Var) -> bool:
    found: list[bool] = []

    class _Find(Visitor):
        def visit_Load(self, e: E.Load) -> None:
            if e.buffer.data is data:
                found.append(True)
            self.generic_visit(e)

        def visit_Store(self, st: S.Store) -> None:
            if st.buffer.data is data:
                found.append(True)
            self.generic_visit(st)

        def visit_Var(self, var: E.Var) -> None:
            if var is data:
                found.append(True)

    _Find().visit(s)
    return bool(found)
