"""unroll_loops: replace UNROLLED loops of constant extent by copies of their body."""

from __future__ import annotations

from dataclasses import replace

from ember.tir import expr as E
from ember.tir import stmt as S
from ember.tir.function import PrimFunc
from ember.arith.simplify import simplify
from ember.tir.functor import Mutator, Substitute


def unroll_loops(func: PrimFunc, max_extent: int = 64) -> PrimFunc:
    """Replace UNROLLED loops of constant extent <= max_extent by copies of the body.

        for j in range(3):  # unrolled        A[0] = 0.0
          A[j] = 0.0                    ->    A[1] = 0.0
                                              A[2] = 0.0

    Longer or non-constant UNROLLED loops become SERIAL loops. A Select whose condition
    becomes a constant in a copy is replaced by its branch before the branch not taken is
    copied (a Winograd transform's select over its 36 elements unrolls into 36 single
    cases, not 36 copies of all 36).
    """
    return replace(func, body=_Unroll(max_extent).visit(func.body))


class _Unroll(Mutator):
    def __init__(self, max_extent: int) -> None:
        self.max_extent = max_extent

    def visit_For(self, loop: S.For) -> S.Stmt:
        body = self.visit(loop.body)
        if loop.kind != S.ForKind.UNROLLED:
            return loop if body is loop.body else replace(loop, body=body)
        extent = E.as_const_int(loop.extent)
        if extent is None or extent > self.max_extent:
            return replace(loop, body=body, kind=S.ForKind.SERIAL)
        begin = E.as_const_int(loop.begin)
        copies = []
        for k in range(extent):
            value = (E.IntImm(begin + k, loop.var.dtype) if begin is not None
                     else loop.begin + E.IntImm(k, loop.begin.dtype))
            copies.append(_FoldingSubstitute({loop.var: value}).visit(body))
        if not copies:
            return S.Evaluate(E.IntImm(0))
        return S.seq(*copies)


class _FoldingSubstitute(Substitute):
    """Substitution of the loop variable that takes a Select's branch once its condition
    folds to a constant."""

    def visit_Select(self, node: E.Select) -> E.Expr:
        cond = self.visit(node.condition)
        if cond is not node.condition:
            known = E.as_const_int(simplify(cond))
            if known is not None:
                return self.visit(node.true_value if known else node.false_value)
        return self.generic_visit(node) if cond is node.condition else E.Select(
            cond, self.visit(node.true_value), self.visit(node.false_value))
