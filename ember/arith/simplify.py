"""Public entry points of the integer simplifier: simplify(expr) and simplify_stmt(stmt)."""

from __future__ import annotations

from ember.arith.interval import Interval
from ember.arith.simplifier import Simplifier
from ember.tir.expr import Expr, Var
from ember.tir.stmt import Stmt


def simplify(e: Expr, ranges: dict[Var, Interval] | None = None) -> Expr:
    """Simplify `e`, knowing each variable in `ranges` lies in its (inclusive) interval.

    >>> simplify((i * 32 + j) - i * 32)                        # j
    >>> simplify((i * 4 + 2) // 4)                             # i
    >>> simplify(i < 64, {i: Interval.from_range(0, 32)})      # True

    The value never changes (floor semantics for // and %, truncation for integer Div);
    integer arithmetic is assumed not to overflow, as for any index expression.
    """
    return Simplifier(ranges).visit(e)


def simplify_stmt(s: Stmt, ranges: dict[Var, Interval] | None = None) -> Stmt:
    """Simplify every expression in `s`, using the ranges of the enclosing For loops.

    Also removes IfThenElse whose condition becomes constant, loops of extent 0, and
    loops of extent 1 (their variable is replaced by the loop's begin).
    """
    from ember.arith.statement import StmtSimplifier

    return StmtSimplifier(ranges).visit(s)
