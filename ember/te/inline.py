"""Substitute compute_inline'd stages into their consumers' bodies (before bound inference).

A read of an inlined stage becomes the stage's expression at the read's indices. A value
read more than once at the same indices (`Mul(y, y)`; `Add(Relu(y), Relu(y))`, which reads
`y` through two inlined stages; a diamond `a + a * y`) is computed once: it is bound by a
`Let` and read through its variable, so a chain of n such ops is an expression of O(n)
nodes rather than a tree of 2^n, and the kernel still makes one pass over memory. A value
read once is substituted in place, as it always was.

Where a binding goes (its *region*): the top of a compute body (each output), of each source
and of the condition of a Reduce, of each branch of an `if_then_else`, and of the body of a
Let already in the expression. A region may read a binding of a region around it (that one
is evaluated whenever the inner one is), never one of a region inside it, so a branch never
evaluates a read that only the branch not taken makes (padding reads stay guarded), and a
read whose indices use a Let's variable stays inside that Let. Reads inside indices (a
Gather's computed index) are substituted, never bound: bound inference reads the index
expressions, and a variable there would hide them.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Hashable

from ember.te.schedule import Attach, Schedule, Stage
from ember.te.tensor import ComputeOp, Operation, TensorLoad
from ember.tir.expr import Call, Expr, FloatImm, IntImm, Let, Reduce, Var
from ember.tir.functor import Mutator, substitute


def expr_key(e: Any) -> Hashable:
    """A hashable key equal for structurally equal expressions; free variables by identity."""
    if isinstance(e, Var):
        return ("var", id(e))
    if isinstance(e, (IntImm, FloatImm)):
        return (type(e).__name__, e.value, str(e.dtype))
    if isinstance(e, TensorLoad):
        return ("load", id(e.tensor.op), e.tensor.value_index,
                tuple(expr_key(i) for i in e.indices))
    if isinstance(e, tuple):
        return tuple(expr_key(i) for i in e)
    if isinstance(e, Expr) and dataclasses.is_dataclass(e):
        return (type(e).__name__, str(e.dtype),
                tuple(expr_key(getattr(e, f.name)) for f in dataclasses.fields(e)
                      if f.name != "dtype"))
    if isinstance(e, (int, float, str, bool)) or e is None:
        return e
    return ("obj", id(e))


class _Region:
    """A place where bindings go: memoized reads and their bindings, in dependency order."""

    def __init__(self, parent: _Region | None) -> None:
        self.parent = parent
        self.memo: dict[Hashable, Var] = {}
        self.bindings: list[tuple[Var, Expr]] = []

    def lookup(self, key: Hashable) -> Var | None:
        region: _Region | None = self
        while region is not None:
            var = region.memo.get(key)
            if var is not None:
                return var
            region = region.parent
        return None


class _Inline(Mutator):
    def __init__(self, inlined: dict[int, ComputeOp]) -> None:
        self.inlined = inlined
        self.region = _Region(None)
        self.in_index = 0
        self.uses: dict[Var, int] = {}

    # -- regions ---------------------------------------------------------------------------
    def region_expr(self, expr: Expr) -> Expr:
        """`expr` expanded in a new region nested in the current one, with its bindings."""
        outer = self.region
        self.region = _Region(outer)
        try:
            body = self.visit(expr)
            return self._close(self.region, body)
        finally:
            self.region = outer

    def _close(self, region: _Region, body: Expr) -> Expr:
        """Substitute the bindings read once, wrap the others around `body` as Lets."""
        single: dict[Var, Expr] = {}
        lets: list[tuple[Var, Expr]] = []
        for var, value in region.bindings:
            value = substitute(value, single)
            if self.uses[var] == 1:
                single[var] = value
            else:
                lets.append((var, value))
        body = substitute(body, single)
        for var, value in reversed(lets):
            body = Let(var, value, body)
        return body  # type: ignore[no-any-return]

    # -- nodes -----------------------------------------------------------------------------
    def visit_TensorLoad(self, node: TensorLoad) -> Expr:
        self.in_index += 1
        try:
            indices = tuple(self.visit(i) for i in node.indices)
        finally:
            self.in_index -= 1
        op = self.inlined.get(id(node.tensor.op))
        if op is None:
            unchanged = all(a is b for a, b in zip(indices, node.indices))
            return node if unchanged else TensorLoad(node.tensor, indices)
        # an index computed from loaded data (a Gather's int64 indices) takes the dtype of the
        # axis variable it replaces, so the producer's index arithmetic stays one width
        mapping = {iv.var: idx if idx.dtype == iv.var.dtype else idx.astype(iv.var.dtype)
                   for iv, idx in zip(op.axis, indices)}
        value = substitute(op.body[node.tensor.value_index], mapping)
        if self.in_index:
            return self.visit(value)  # type: ignore[no-any-return]
        key = (id(op), node.tensor.value_index, expr_key(indices))
        var = self.region.lookup(key)
        if var is not None:
            self.uses[var] += 1
            return var
        expanded = self.visit(value)
        var = Var(_name(node.tensor.name), expanded.dtype)
        self.region.memo[key] = var
        self.region.bindings.append((var, expanded))
        self.uses[var] = 1
        return var

    def visit_Let(self, node: Let) -> Expr:
        value = self.visit(node.value)
        body = self.region_expr(node.body)
        if value is node.value and body is node.body:
            return node
        return Let(node.var, value, body)

    def visit_Call(self, node: Call) -> Expr:
        if node.name != "if_then_else":
            return self.generic_visit(node)  # type: ignore[no-any-return]
        cond, then, other = node.args
        args = (self.visit(cond), self.region_expr(then), self.region_expr(other))
        if all(a is b for a, b in zip(args, node.args)):
            return node
        return Call(node.dtype, node.name, args)

    def visit_Reduce(self, node: Reduce) -> Expr:
        source = tuple(self.region_expr(s) for s in node.source)
        condition = self.region_expr(node.condition)
        return dataclasses.replace(node, source=source, condition=condition)


def _name(tensor_name: str) -> str:
    return re.sub(r"[^0-9a-zA-Z_]", "_", tensor_name) or "v"


def inline_bodies(schedule: Schedule) -> dict[Stage, tuple[Expr, ...]]:
    """The body of every compute stage with inlined producers substituted, by stage."""
    inlined: dict[int, ComputeOp] = {}
    bodies: dict[Stage, tuple[Expr, ...]] = {}
    for stage in schedule.stages:
        op: Operation = stage.op
        if not isinstance(op, ComputeOp):
            continue
        body: list[Any] = []
        for b in op.body:
            mutator = _Inline(inlined)
            if isinstance(b, Reduce):
                body.append(mutator.visit_Reduce(b))
            else:
                body.append(mutator.region_expr(b))
        bodies[stage] = tuple(body)
        if stage.attach == Attach.INLINE:
            for known in (op, *stage.previous_ops):
                inlined[id(known)] = op
    return bodies
