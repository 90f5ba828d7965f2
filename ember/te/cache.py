"""cache_read and cache_write: stage a tensor through a buffer in another memory scope."""

from __future__ import annotations

from typing import Sequence

from ember.errors import ScheduleError
from ember.te.schedule import Schedule, Stage
from ember.te.tensor import ComputeOp, Operation, Tensor, TensorLoad, compute
from ember.tir.expr import Expr, IterVar, Var
from ember.tir.functor import Mutator, substitute


class _Redirect(Mutator):
    def __init__(self, ops: list[Operation], cache: Tensor) -> None:
        self.ops = ops
        self.cache = cache
        self.changed = False

    def visit_TensorLoad(self, node: TensorLoad) -> Expr:
        indices = tuple(self.visit(i) for i in node.indices)
        if any(node.tensor.op is op for op in self.ops):
            self.changed = True
            return TensorLoad(self.cache, indices)
        return TensorLoad(node.tensor, indices)


def replace_op(stage: Stage, op: Operation) -> None:
    """Give `stage` a new operation; tensors of its earlier operations keep mapping to it."""
    stage.previous_ops.append(stage.op)
    stage.op = op


def cache_read(schedule: Schedule, tensor: Tensor, scope: str,
               readers: Sequence[Tensor | Operation]) -> Tensor:
    """Copy `tensor` into a `scope` buffer that `readers` read instead of the original.

    The copy is a new stage (named "<tensor>.<scope>") that you can compute_at a reader.
    """
    if scope not in ("global", "shared", "local"):
        raise ScheduleError(f"cache_read of '{tensor.name}': unknown scope {scope!r}")
    producer = schedule[tensor]
    if tensor.op.num_outputs > 1:
        raise ScheduleError(f"cache_read of '{tensor.name}': multi-output operations are not "
                            "supported")
    cache = compute(tuple(tensor.shape), lambda *i: tensor[i], name=f"{tensor.name}.{scope}")
    assert isinstance(cache, Tensor)
    reader_stages = [schedule[r] for r in readers]
    if not reader_stages:
        raise ScheduleError(f"cache_read of '{tensor.name}': give at least one reader")
    for stage in reader_stages:
        op = stage.op
        if not isinstance(op, ComputeOp):
            raise ScheduleError(f"cache_read of '{tensor.name}': reader '{stage.name}' is not a "
                                "compute stage")
        redirect = _Redirect([producer.op, *producer.previous_ops], cache)
        body = tuple(redirect.visit(b) for b in op.body)
        if not redirect.changed:
            raise ScheduleError(f"cache_read of '{tensor.name}': stage '{stage.name}' does not "
                                f"read '{tensor.name}'")
        replace_op(stage, ComputeOp(op.name, op.axis, body, op.tag))
    cache_stage = Stage(cache.op, schedule)
    cache_stage.scope = scope
    schedule.stages.insert(schedule.stages.index(producer) + 1, cache_stage)
    return cache


def cache_write(schedule: Schedule, tensor: Tensor, scope: str) -> Tensor:
    """Compute `tensor` into a `scope` buffer first, then copy it to the original.

    The original stage becomes the copy (same axes, which you can keep scheduling); the
    returned tensor's stage does the real work (its reductions included).
    """
    if scope not in ("global", "shared", "local"):
        raise ScheduleError(f"cache_write of '{tensor.name}': unknown scope {scope!r}")
    stage = schedule[tensor]
    op = stage.op
    if not isinstance(op, ComputeOp):
        raise ScheduleError(f"cache_write of '{tensor.name}': only compute stages can be cached")
    if stage.relations or stage.iter_attrs:
        raise ScheduleError(f"cache_write of '{tensor.name}': apply cache_write before "
                            "splitting or annotating the stage's axes")
    if op.num_outputs > 1:
        raise ScheduleError(f"cache_write of '{tensor.name}': multi-output operations are not "
                            "supported")
    fresh = tuple(IterVar(Var(f"{iv.name}.c", iv.var.dtype), iv.dom, iv.kind) for iv in op.axis)
    mapping: dict[Var, Expr] = {old.var: new.var for old, new in zip(op.axis, fresh)}
    cache_op = ComputeOp(f"{op.name}.{scope}", fresh, tuple(substitute(b, mapping)
                                                           for b in op.body))
    cache = cache_op.output(0)
    copy = ComputeOp(op.name, op.axis, (TensorLoad(cache, tuple(iv.var for iv in op.axis)),),
                     op.tag)
    replace_op(stage, copy)
    stage.all_iter_vars = list(op.axis)
    stage.leaf_iter_vars = list(op.axis)
    cache_stage = Stage(cache_op, schedule)
    cache_stage.scope = scope
    schedule.stages.insert(schedule.stages.index(stage), cache_stage)
    return cache
