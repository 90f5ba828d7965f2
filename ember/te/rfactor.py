"""rfactor: turn part of a reduction into a new spatial axis of an intermediate tensor.

    C[i] = sum(A[i, k], k)        s[C].split(k, 16) -> (ko, ki); s.rfactor(C, ki) gives
    CF[ki, i] = sum(A[i, ko*16 + ki], ko);   C[i] = sum(CF[ki, i], ki)
so that `ki` can be vectorized or parallelized in CF.
"""

from __future__ import annotations

from ember.errors import ScheduleError
from ember.te.cache import replace_op
from ember.te.relations import loop_structure
from ember.te.schedule import Schedule, Split, Stage
from ember.te.tensor import ComputeOp, Tensor, TensorLoad
from ember.tir.expr import (
    And, Expr, IntImm, IterKind, IterVar, Range, Reduce, Var, const,
)
from ember.tir.functor import substitute


def _reduce_structure(stage: Stage, op: ComputeOp
                      ) -> tuple[dict[IterVar, int], dict[IterVar, Expr], list[Expr]]:
    """Extents of all iter vars, root values in leaf vars, and split guards."""
    root_extent: dict[IterVar, int] = {}
    for iv in op.axis + op.reduce_axis:
        assert isinstance(iv.dom.extent, IntImm)
        root_extent[iv] = iv.dom.extent.value
    loops = loop_structure(stage, root_extent)
    return loops.extents, loops.values, loops.guards


def rfactor(schedule: Schedule, tensor: Tensor, axis: IterVar, factor_axis: int = 0) -> Tensor:
    """Factor the reduction of `tensor` over leaf axis `axis`; returns the new tensor."""
    stage = schedule[tensor]
    op = stage.op
    if not isinstance(op, ComputeOp) or not op.reduce_axis:
        raise ScheduleError(f"rfactor of '{tensor.name}': the stage is not a reduction")
    if not isinstance(axis, IterVar) or axis not in stage.leaf_iter_vars:
        raise ScheduleError(f"rfactor of '{tensor.name}': '{getattr(axis, 'name', axis)}' is "
                            "not a current axis of the stage")
    if axis.kind != IterKind.REDUCE:
        raise ScheduleError(f"rfactor of '{tensor.name}': axis '{axis.name}' is spatial; "
                            "rfactor needs a reduction axis")
    if not 0 <= factor_axis <= len(op.axis):
        raise ScheduleError(f"rfactor of '{tensor.name}': factor_axis must be in "
                            f"[0, {len(op.axis)}], got {factor_axis}")
    spatial_relations = [r for r in stage.relations
                         if (r.parent if isinstance(r, Split) else r.outer).kind
                         != IterKind.REDUCE]
    if spatial_relations:
        raise ScheduleError(f"rfactor of '{tensor.name}': apply rfactor before splitting or "
                            "fusing spatial axes")
    extents, values, guards = _reduce_structure(stage, op)
    reduce = op.body[0]
    assert isinstance(reduce, Reduce)

    rf_axis = IterVar(Var(f"{axis.name}.rf"), Range.from_extent(extents[axis]))
    spatial = [IterVar(Var(f"{iv.name}.rf"), iv.dom) for iv in op.axis]
    leaf_reduce = [iv for iv in stage.leaf_iter_vars if iv.kind == IterKind.REDUCE]
    new_reduce = [IterVar(Var(iv.name), Range.from_extent(extents[iv]), IterKind.REDUCE)
                  for iv in leaf_reduce if iv is not axis]
    leaf_map: dict[Var, Expr] = {axis.var: rf_axis.var}
    others = [iv for iv in leaf_reduce if iv is not axis]
    leaf_map.update({old.var: new.var for old, new in zip(others, new_reduce)})
    mapping: dict[Var, Expr] = {iv.var: new.var for iv, new in zip(op.axis, spatial)}
    for root in op.reduce_axis:
        mapping[root.var] = substitute(values[root] + root.dom.begin, leaf_map)
    condition = substitute(reduce.condition, mapping)
    for g in guards:
        condition = And(condition, substitute(g, leaf_map))
    sources = tuple(substitute(s, mapping) for s in reduce.source)
    rf_axes = spatial[:factor_axis] + [rf_axis] + spatial[factor_axis:]
    if new_reduce:
        rf_body = tuple(Reduce(reduce.combiner, sources, tuple(new_reduce), condition, i)
                        for i in range(len(op.body)))
    else:  # nothing left to reduce: the factored tensor is the (guarded) source itself
        rf_body = tuple(_select_identity(condition, s, reduce.combiner.identity[i])
                        for i, s in enumerate(sources))
    rf_op = ComputeOp(f"{op.name}.rf", tuple(rf_axes), rf_body)

    k = IterVar(Var(f"{axis.name}.v"), Range.from_extent(extents[axis]), IterKind.REDUCE)
    loads = []
    for out in rf_op.outputs:
        index = [iv.var for iv in op.axis]
        index.insert(factor_axis, k.var)
        loads.append(TensorLoad(out, tuple(index)))
    body = tuple(Reduce(reduce.combiner, tuple(loads), (k,), const(True), i)
                 for i in range(len(op.body)))
    replace_op(stage, ComputeOp(op.name, op.axis, body, op.tag))
    stage.all_iter_vars = list(op.axis) + [k]
    stage.leaf_iter_vars = list(stage.all_iter_vars)
    stage.relations = []
    stage.iter_attrs = {}
    rf_stage = Stage(rf_op, schedule)
    schedule.stages.insert(schedule.stages.index(stage), rf_stage)
    return rf_op.output(0)


def _select_identity(condition: Expr, value: Expr, identity: Expr) -> Expr:
    from ember.tir.expr import Select

    if isinstance(condition, IntImm) and condition.value == 1:
        return value
    return Select(condition, value, identity)
