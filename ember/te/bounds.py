"""Bound inference: the region of each stage that its consumers need, and its loop extents.

A stage at root computes its whole tensor. A stage computed at loop `x` of stage S
computes, per iteration of `x` (and the loops outside it), the union of what its
consumers read in the loops inside `x`: their loop variables there are relaxed to their
ranges, the ones outside stay symbolic.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ember.arith import simplify
from ember.arith.bounds import Interval, const_bounds, eval_interval
from ember.arith.interval import union
from ember.errors import LoweringError
from ember.te.relations import loop_structure
from ember.te.schedule import Attach, Schedule, Stage
from ember.te.tensor import ComputeOp, ExternOp, ScanOp, Tensor, TensorLoad
from ember.tir.expr import Expr, IntImm, IterVar, Var, const
from ember.tir.functor import Visitor, substitute


@dataclass
class StageBounds:
    """Where a stage iterates and what it stores."""

    offsets: list[Expr]                      # buffer origin per output dimension
    extents: list[int]                       # buffer extent per output dimension
    leaf_extents: dict[IterVar, int] = field(default_factory=dict)
    root_value: dict[Var, Expr] = field(default_factory=dict)  # root var -> f(leaf vars)
    guards: list[Expr] = field(default_factory=list)


def access_list(stage: Stage, bodies: dict[Stage, tuple[Expr, ...]]
                ) -> list[tuple[Tensor, tuple[Expr, ...]]]:
    """(tensor, indices) of every read the stage makes, indices in its root variables."""
    op = stage.op
    if isinstance(op, ScanOp):
        index = (op.scan_axis.var,) + tuple(iv.var for iv in op.spatial_axis)
        return [(u, index) for u in op.update]
    if isinstance(op, ExternOp):
        return [(t, ()) for t in op.inputs]
    if not isinstance(op, ComputeOp):
        return []
    found: list[tuple[Tensor, tuple[Expr, ...]]] = []

    class _Collect(Visitor):
        def visit_TensorLoad(self, node: TensorLoad) -> None:
            found.append((node.tensor, node.indices))
            self.generic_visit(node)

    collector = _Collect()
    for b in bodies.get(stage, op.body):
        collector.visit(b)
    return found


def _root_iter_vars(stage: Stage) -> list[IterVar]:
    op = stage.op
    if isinstance(op, ComputeOp):
        return list(op.axis + op.reduce_axis)
    if isinstance(op, ScanOp):
        return [op.scan_axis, *op.spatial_axis]
    return []


def _leaf_structure(stage: Stage, root_begin: dict[IterVar, Expr],
                    root_extent: dict[IterVar, int]) -> StageBounds:
    """Leaf extents, root values as functions of leaf vars, and split guards."""
    loops = loop_structure(stage, root_extent)
    bounds = StageBounds([], [])
    bounds.leaf_extents = {iv: loops.extents[iv] for iv in stage.leaf_iter_vars}
    for root in _root_iter_vars(stage):
        bounds.root_value[root.var] = simplify(root_begin[root] + loops.values[root])
    bounds.guards = [simplify(g) for g in loops.guards]
    return bounds


def _relaxed(consumer: Stage, attach_stage: Stage, attach_ivar: IterVar, producer: Stage,
             all_bounds: dict[Stage, StageBounds]) -> dict[Var, Interval]:
    """Ranges of the loop variables of `consumer` that run inside the producer's loop."""
    relax: dict[Var, Interval] = {}

    def add(stage: Stage, ivs: list[IterVar]) -> None:
        for iv in ivs:
            extent = all_bounds[stage].leaf_extents[iv]
            relax[iv.var] = Interval.from_range(const(0), const(extent))

    leaves = attach_stage.leaf_iter_vars
    x = leaves.index(attach_ivar)
    if consumer is attach_stage:
        add(consumer, leaves[x + 1:])
        return relax
    add(consumer, consumer.leaf_iter_vars)
    stage, ivar = consumer.attach_stage, consumer.attach_ivar
    while True:
        if stage is None or ivar is None:
            raise LoweringError(
                f"stage '{producer.name}' is computed at loop '{attach_ivar.name}' of "
                f"'{attach_stage.name}', but its consumer '{consumer.name}' runs outside that "
                "loop; compute it at root or inside the consumer")
        position = stage.leaf_iter_vars.index(ivar)
        if stage is attach_stage:
            if position < x:
                raise LoweringError(
                    f"stage '{producer.name}' is computed at loop '{attach_ivar.name}' of "
                    f"'{attach_stage.name}' but consumer '{consumer.name}' is computed "
                    f"outside it, at '{ivar.name}'")
            add(stage, stage.leaf_iter_vars[x + 1:position + 1])
            return relax
        add(stage, stage.leaf_iter_vars[:position + 1])
        stage, ivar = stage.attach_stage, stage.attach_ivar


def _thread_ranges(consumer: Stage, all_bounds: dict[Stage, StageBounds]
                   ) -> dict[Var, Interval]:
    """Ranges of the threadIdx-bound loops around `consumer` (its own and its hosts')."""
    relax: dict[Var, Interval] = {}
    stage: Stage | None = consumer
    while stage is not None:
        for iv in stage.leaf_iter_vars:
            attr = stage.iter_attrs.get(iv)
            thread = attr.bound_thread if attr is not None else None
            if thread is not None and thread.thread_tag.startswith("threadIdx"):
                extent = all_bounds[stage].leaf_extents[iv]
                relax[iv.var] = Interval.from_range(const(0), const(extent))
        stage = stage.attach_stage
    return relax


def infer_bounds(schedule: Schedule, bodies: dict[Stage, tuple[Expr, ...]]
                 ) -> dict[Stage, StageBounds]:
    """Bounds of every non-inlined stage, consumers before producers."""
    result: dict[Stage, StageBounds] = {}
    known_ranges: dict[Var, Interval] = {}
    consumers: dict[Stage, list[tuple[Stage, tuple[Expr, ...], int]]] = {}
    active = [s for s in schedule.stages if s.attach != Attach.INLINE]
    for stage in active:
        for tensor, index in access_list(stage, bodies):
            producer = schedule[tensor]
            consumers.setdefault(producer, []).append((stage, index, tensor.value_index))

    for stage in reversed(active):
        op = stage.op
        if not isinstance(op, (ComputeOp, ScanOp, ExternOp)):
            continue
        shape = [s.value for s in op.outputs[0].shape if isinstance(s, IntImm)]
        if stage.attach == Attach.ROOT or isinstance(op, ExternOp):
            offsets: list[Expr] = [const(0)] * len(shape)
            extents = list(shape)
        else:
            offsets, extents = _needed_region(stage, consumers.get(stage, []), result,
                                              known_ranges, shape)
        root_begin: dict[IterVar, Expr] = {}
        root_extent: dict[IterVar, int] = {}
        roots = _root_iter_vars(stage)
        if isinstance(op, ComputeOp):
            for d, iv in enumerate(op.axis):
                root_begin[iv], root_extent[iv] = offsets[d], extents[d]
            for iv in op.reduce_axis:
                root_begin[iv] = iv.dom.begin
                root_extent[iv] = iv.dom.extent.value  # type: ignore[attr-defined]
        elif isinstance(op, ScanOp):
            root_begin[op.scan_axis] = op.scan_axis.dom.begin
            root_extent[op.scan_axis] = op.scan_axis.dom.extent.value  # type: ignore
            for d, iv in enumerate(op.spatial_axis):
                root_begin[iv], root_extent[iv] = const(0), shape[d + 1]
        bounds = _leaf_structure(stage, root_begin, root_extent) if roots else StageBounds([], [])
        bounds.offsets, bounds.extents = offsets, extents
        if isinstance(op, ComputeOp) and stage.attach == Attach.SCOPE:
            bounds.guards += _domain_guards(op, offsets, extents, bounds, shape, known_ranges)
        for iv, extent in bounds.leaf_extents.items():
            known_ranges[iv.var] = Interval.from_range(const(0), const(extent))
        result[stage] = bounds
    return result


def _needed_region(stage: Stage, reads: list[tuple[Stage, tuple[Expr, ...], int]],
                   done: dict[Stage, StageBounds], known_ranges: dict[Var, Interval],
                   shape: list[int]) -> tuple[list[Expr], list[int]]:
    assert stage.attach_stage is not None and stage.attach_ivar is not None
    if not reads:
        raise LoweringError(f"stage '{stage.name}' is computed at '{stage.attach_stage.name}'"
                            " but nothing reads it")
    region: list[Interval | None] = [None] * len(shape)
    for consumer, index, _ in reads:
        relax = _relaxed(consumer, stage.attach_stage, stage.attach_ivar, stage, done)
        if stage.scope == "shared":
            # one copy serves the whole block: cover what every thread of it reads
            relax.update(_thread_ranges(consumer, done))
        root_value = done[consumer].root_value
        for d, idx in enumerate(index):
            interval = eval_interval(simplify(substitute(idx, root_value)), relax)
            region[d] = interval if region[d] is None else union(region[d], interval)
    offsets: list[Expr] = []
    extents: list[int] = []
    for d, interval in enumerate(region):
        assert interval is not None
        if interval.lo is None or interval.hi is None:
            raise LoweringError(f"stage '{stage.name}': cannot bound dimension {d} of the "
                                "region its consumers read")
        lo = simplify(interval.lo)
        _, upper = const_bounds(simplify(interval.hi - lo + 1), known_ranges)
        if upper is None:
            raise LoweringError(f"stage '{stage.name}': the region read in dimension {d} "
                                f"({lo} .. {interval.hi}) has no constant size bound")
        extent = int(upper)
        low, _ = const_bounds(lo, known_ranges)
        if low is not None and low >= 0:
            # a region starting inside the tensor never needs more than the tensor
            extent = min(extent, shape[d])
        offsets.append(lo)
        extents.append(max(1, extent))
    return offsets, extents


def _domain_guards(op: ComputeOp, offsets: list[Expr], extents: list[int],
                   bounds: StageBounds, shape: list[int],
                   ranges: dict[Var, Interval]) -> list[Expr]:
    """Conditions keeping an attached stage inside its tensor's domain."""
    from ember.arith.bounds import can_prove

    local = dict(ranges)
    for iv, extent in bounds.leaf_extents.items():
        local[iv.var] = Interval.from_range(const(0), const(extent))
    guards: list[Expr] = []
    for d, iv in enumerate(op.axis):
        value = bounds.root_value[iv.var]
        for cond in (value >= 0, value < shape[d]):
            cond = simplify(cond)
            if not can_prove(cond, local):
                guards.append(cond)
    return guards

