"""Well-formedness of a PrimFunc; a failure names the fault and prints the IR around it."""

from __future__ import annotations

from typing import Any

from ember.tir import expr as E
from ember.tir import stmt as S
from ember.tir.function import Buffer, PrimFunc
from ember.errors import VerifyError
from ember.tir.functor import Visitor
from ember.tir.printer import stmt_to_str

# math intrinsics whose arguments all have the call's own dtype
_SAME_TYPE_CALLS = ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "tanh", "sigmoid", "erf",
                    "pow", "floor", "ceil", "round", "trunc", "fabs", "sin", "cos", "fma")
_CONTEXT_LINES = 16


def verify(func: PrimFunc) -> None:
    """Raise VerifyError if `func` is malformed.

    Checks: every used variable (buffer data included) is bound by a parameter, loop, let or
    allocation; Load/Store have one index per buffer dimension with integer, lane-consistent
    indices; binary operands agree in dtype; stored values match the buffer's element type
    and the index lanes; loop bounds are scalar integers; no Reduce is left.

        verify(func)   # returns None or raises VerifyError("... in statement: ...")
    """
    checker = _Checker(func)
    for p in func.params:
        checker.define(p.data if isinstance(p, Buffer) else p)
    checker.visit(func.body)


class _Checker(Visitor):
    def __init__(self, func: PrimFunc) -> None:
        self.func = func
        self.bound: dict[E.Var, int] = {}
        self.stack: list[S.Stmt] = []

    # scope ----------------------------------------------------------------------------
    def define(self, var: E.Var) -> None:
        self.bound[var] = self.bound.get(var, 0) + 1

    def undefine(self, var: E.Var) -> None:
        self.bound[var] -= 1
        if not self.bound[var]:
            del self.bound[var]

    def fail(self, message: str) -> None:
        loops = [s for s in self.stack if isinstance(s, S.For)]
        path = " > ".join(f"for {s.var.name}" for s in loops) or "(top level)"
        where = self.stack[-1] if self.stack else self.func.body
        lines = stmt_to_str(where, 2).splitlines()
        if len(lines) > _CONTEXT_LINES:
            lines = lines[:_CONTEXT_LINES] + ["    ..."]
        text = "\n".join(lines)
        raise VerifyError(f"invalid IR in '{self.func.name}': {message}\n  inside {path}, "
                          f"in statement:\n{text}")

    # traversal --------------------------------------------------------------------------
    def visit(self, node: Any) -> None:
        if isinstance(node, S.Stmt):
            self.stack.append(node)
            try:
                super().visit(node)
            finally:
                self.stack.pop()
            return
        if isinstance(node, E.BinaryOp) and node.a.dtype != node.b.dtype:
            self.fail(f"operands of {type(node).__name__} differ in dtype: "
                      f"{node.a.dtype} vs {node.b.dtype} in {node}")
        super().visit(node)

    def visit_Var(self, var: E.Var) -> None:
        if var not in self.bound:
            self.fail(f"variable '{var.name}' is used but not defined")

    def visit_For(self, s: S.For) -> None:
        for name, bound in (("begin", s.begin), ("extent", s.extent)):
            if not bound.dtype.is_int or bound.dtype.lanes != 1:
                self.fail(f"loop '{s.var.name}': {name} must be a scalar integer, "
                          f"got {bound.dtype}")
            self.visit(bound)
        self.define(s.var)
        self.visit(s.body)
        self.undefine(s.var)

    def visit_LetStmt(self, s: S.LetStmt) -> None:
        self._check_let(s.var, s.value)
        self.visit(s.value)
        self.define(s.var)
        self.visit(s.body)
        self.undefine(s.var)

    def visit_Let(self, e: E.Let) -> None:
        self._check_let(e.var, e.value)
        self.visit(e.value)
        self.define(e.var)
        self.visit(e.body)
        self.undefine(e.var)

    def _check_let(self, var: E.Var, value: E.Expr) -> None:
        if var.dtype != value.dtype:
            self.fail(f"let '{var.name}': variable is {var.dtype} but value is {value.dtype}")

    def visit_Allocate(self, s: S.Allocate) -> None:
        for extent in s.buffer.shape:
            self.visit(extent)
        self.define(s.buffer.data)
        self.visit(s.body)
        self.undefine(s.buffer.data)

    def visit_Load(self, e: E.Load) -> None:
        self._check_access(e.buffer, e.indices, e.predicate, e.dtype.lanes)
        self.generic_visit(e)

    def visit_Store(self, s: S.Store) -> None:
        lanes = self._check_access(s.buffer, s.indices, s.predicate, s.value.dtype.lanes)
        if s.value.dtype.lanes != lanes:
            self.fail(f"store to '{s.buffer.name}': value has {s.value.dtype.lanes} lanes "
                      f"but the index has {lanes}")
        if s.value.dtype.element != s.buffer.dtype.element:
            self.fail(f"store to '{s.buffer.name}': value is {s.value.dtype}, buffer holds "
                      f"{s.buffer.dtype}")
        self.generic_visit(s)

    def _check_access(self, buf: Buffer, indices: tuple[E.Expr, ...],
                      predicate: E.Expr | None, lanes: int) -> int:
        if buf.data not in self.bound:
            self.fail(f"buffer '{buf.name}' is used but neither a parameter nor allocated")
        if len(indices) != buf.ndim:
            self.fail(f"access to '{buf.name}' has {len(indices)} indices, the buffer has "
                      f"{buf.ndim} dimensions")
        index_lanes = {i.dtype.lanes for i in indices} - {1}
        for index in indices:
            if not index.dtype.is_int:
                self.fail(f"index {index} of '{buf.name}' must be an integer, "
                          f"got {index.dtype}")
        if len(index_lanes) > 1:
            self.fail(f"indices of '{buf.name}' mix lane counts {sorted(index_lanes)}")
        width = max(index_lanes, default=1)
        if predicate is not None and predicate.dtype != E.dt.bool_.with_lanes(width):
            self.fail(f"predicate of the access to '{buf.name}' is {predicate.dtype}, "
                      f"expected {E.dt.bool_.with_lanes(width)}")
        return width

    def visit_Select(self, e: E.Select) -> None:
        if not e.condition.dtype.is_bool or e.condition.dtype.lanes not in (1, e.dtype.lanes):
            self.fail(f"select condition is {e.condition.dtype} for {e.dtype} values: {e}")
        if e.true_value.dtype != e.false_value.dtype:
            self.fail(f"select branches differ: {e.true_value.dtype} vs "
                      f"{e.false_value.dtype}")
        self.generic_visit(e)

    def visit_Cast(self, e: E.Cast) -> None:
        if e.dtype.lanes != e.value.dtype.lanes:
            self.fail(f"cast changes the lane count: {e.value.dtype} -> {e.dtype}")
        self.generic_visit(e)

    def visit_Ramp(self, e: E.Ramp) -> None:
        if e.lanes < 2 or e.base.dtype.lanes != 1 or not e.base.dtype.is_int:
            self.fail(f"ramp needs a scalar integer base and >= 2 lanes: {e}")
        self.generic_visit(e)

    def visit_Broadcast(self, e: E.Broadcast) -> None:
        if e.lanes < 2 or e.value.dtype.lanes != 1:
            self.fail(f"broadcast needs a scalar value and >= 2 lanes: {e}")
        self.generic_visit(e)

    def visit_Call(self, e: E.Call) -> None:
        if e.name in _SAME_TYPE_CALLS:
            for arg in e.args:
                if arg.dtype != e.dtype:
                    self.fail(f"{e.name}: argument is {arg.dtype}, the call is {e.dtype}")
        self.generic_visit(e)

    def visit_Reduce(self, e: E.Reduce) -> None:
        self.fail(f"a Reduce node is left in the loop program: {e}")

    def visit_IfThenElse(self, s: S.IfThenElse) -> None:
        if s.condition.dtype != E.dt.bool_:
            self.fail(f"if-condition must be a scalar bool, got {s.condition.dtype}")
        self.generic_visit(s)
