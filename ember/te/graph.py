"""The dataflow between operations: topological order, consumers, scan bodies."""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from ember.te.tensor import Operation, PlaceholderOp, ScanOp

if TYPE_CHECKING:
    from ember.te.schedule import Schedule


def post_order(outputs: Sequence[Operation]) -> list[Operation]:
    """Every operation reachable from `outputs`, producers before consumers."""
    order: list[Operation] = []
    seen: set[int] = set()

    def visit(op: Operation) -> None:
        # iterative would avoid recursion limits; graphs here are small
        if id(op) in seen:
            return
        seen.add(id(op))
        for t in op.input_tensors():
            visit(t.op)
        if isinstance(op, ScanOp):
            for s in op.state_placeholder:
                visit(s.op)
        order.append(op)

    for op in outputs:
        visit(op)
    return order


def _depends_on(op: Operation, targets: set[int], memo: dict[int, bool]) -> bool:
    if id(op) in targets:
        return True
    if id(op) not in memo:
        memo[id(op)] = False
        memo[id(op)] = any(_depends_on(t.op, targets, memo) for t in op.input_tensors())
    return memo[id(op)]


def attach_scan_bodies(schedule: Schedule) -> None:
    """Compute each scan's update (and what it needs from the state) inside its time loop."""
    from ember.te.schedule import Attach

    for stage in schedule.stages:
        op = stage.op
        if not isinstance(op, ScanOp):
            continue
        states = {id(s.op) for s in op.state_placeholder}
        memo: dict[int, bool] = {}
        for other in schedule.stages:
            if other is stage or isinstance(other.op, (PlaceholderOp, ScanOp)):
                continue
            is_update = any(other.op is u.op for u in op.update)
            if is_update or (_depends_on(other.op, states, memo)
                             and _feeds(other.op, op.update)):
                other.attach = Attach.SCOPE
                other.attach_stage = stage
                other.attach_ivar = op.scan_axis


def _feeds(op: Operation, updates: Sequence[object]) -> bool:
    memo: dict[int, bool] = {}
    return any(_depends_on(u.op, {id(op)}, memo) for u in updates)  # type: ignore[attr-defined]
