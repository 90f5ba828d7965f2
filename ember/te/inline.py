"""Substitute compute_inline'd stages into their consumers' bodies (before bound inference)."""

from __future__ import annotations

from typing import Any

from ember.te.schedule import Attach, Schedule, Stage
from ember.te.tensor import ComputeOp, Operation, TensorLoad
from ember.tir.expr import Expr
from ember.tir.functor import Mutator, substitute


class _Inline(Mutator):
    def __init__(self, inlined: dict[int, tuple[ComputeOp, tuple[Expr, ...]]]) -> None:
        self.inlined = inlined

    def visit_TensorLoad(self, node: TensorLoad) -> Expr:
        indices = tuple(self.visit(i) for i in node.indices)
        entry = self.inlined.get(id(node.tensor.op))
        if entry is None:
            unchanged = all(a is b for a, b in zip(indices, node.indices))
            return node if unchanged else TensorLoad(node.tensor, indices)
        op, body = entry
        # an index computed from loaded data (a Gather's int64 indices) takes the dtype of the
        # axis variable it replaces, so the producer's index arithmetic stays one width
        mapping = {iv.var: idx if idx.dtype == iv.var.dtype else idx.astype(iv.var.dtype)
                   for iv, idx in zip(op.axis, indices)}
        return substitute(body[node.tensor.value_index], mapping)  # type: ignore[no-any-return]


def inline_bodies(schedule: Schedule) -> dict[Stage, tuple[Expr, ...]]:
    """The body of every compute stage with inlined producers substituted, by stage."""
    inlined: dict[int, tuple[ComputeOp, tuple[Expr, ...]]] = {}
    bodies: dict[Stage, tuple[Expr, ...]] = {}
    mutator = _Inline(inlined)
    for stage in schedule.stages:
        op: Operation = stage.op
        if not isinstance(op, ComputeOp):
            continue
        body: tuple[Any, ...] = tuple(mutator.visit(b) for b in op.body)
        bodies[stage] = body
        if stage.attach == Attach.INLINE:
            for known in (op, *stage.previous_ops):
                inlined[id(known)] = (op, body)
    return bodies
