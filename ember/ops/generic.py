"""Generic CPU schedules by pattern: injective (elementwise, broadcast, layout) and reduction.

Every default schedule is parallel over the outer loops and vectorized over the innermost
contiguous loop; fused elementwise producers are inlined into their consumer.

Reductions pick one of two vector strategies from where the reduced axes sit in memory:
  - the innermost input axis is reduced (row sums, softmax over the last axis): split it by
    the vector width and rfactor the lanes, so each lane keeps a partial result over a
    contiguous vector load, then add the lanes up once per output element;
  - only outer axes are reduced (column sums, softmax over channels of NCHW): vectorize the
    innermost output axis and put the reduction loop outside it, so every lane accumulates
    its own column.
A reduction that feeds an elementwise epilogue (mean = sum / n, softmax's exp / sum) is
computed inside the epilogue's outer (parallel) loop, one row at a time, so the row stays
in cache and nothing but the final output is written to memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence, TypeVar

from ember import dtype as dt
from ember import te
from ember.ops.knobs import Knobs, Space, Task, resolve_knobs
from ember.target import Target
from ember.te.inline import inline_bodies
from ember.te.schedule import Attach, Schedule, Stage
from ember.te.tensor import ComputeOp, Tensor, TensorLoad
from ember.tir.expr import Expr, IntImm, IterKind, IterVar, Reduce, Var
from ember.tir.functor import Visitor

# below this many output elements a kernel runs on one thread: waking workers costs more
PARALLEL_MIN_ELEMENTS = 16384


def _extent(iv: IterVar) -> int:
    assert isinstance(iv.dom.extent, IntImm)
    return iv.dom.extent.value


def vector_lanes(target: Target, dtype: str = "float32", bits: int | None = None) -> int:
    """Elements of `dtype` per vector: of the target's registers, or of `bits` if given
    (0: scalar code)."""
    try:
        if bits is None:
            return max(1, target.vector_lanes(dtype))
        return max(1, bits // (dt.parse(dtype).element.storage_bytes * 8))
    except Exception:  # a target without a vector unit, or a dtype it has no lanes for
        return 1


# -- knobs ----------------------------------------------------------------------------------
def _vector_choices(task: Task) -> tuple[int, ...]:
    bits = task.target.vector_bits
    return tuple(sorted({0, 128, bits, 2 * bits}))


@dataclass(frozen=True)
class VectorKnobs(Knobs):
    """Choices of the generic schedules (the base of InjectiveKnobs and ReductionKnobs).

    vector_bits: the width of the vectorized inner loop (0: scalar; default: the target's
    registers; twice that is two vectors per step); parallel: run the outer loop on the
    threads when the kernel is big enough (PARALLEL_MIN_ELEMENTS), else never."""

    vector_bits: int = 0
    parallel: bool = True

    @classmethod
    def space(cls, task: Task) -> Space:
        return Space({"vector_bits": _vector_choices(task), "parallel": (False, True)})

    @classmethod
    def default(cls: type[KI], task: Task) -> KI:
        return cls(vector_bits=task.target.vector_bits, parallel=True)

    def check(self, task: Task) -> None:
        bits = self.vector_bits
        if isinstance(bits, bool) or not isinstance(bits, int) or bits < 0 or bits % 8:
            raise self.reject("vector_bits", "must be 0 or a positive multiple of 8")


@dataclass(frozen=True)
class InjectiveKnobs(VectorKnobs):
    """Choices of the generic elementwise / broadcast / injective schedule (VectorKnobs)."""


@dataclass(frozen=True)
class ReductionKnobs(VectorKnobs):
    """Choices of the generic reduction schedule (softmax, normalizations, Reduce*, ...):
    vector_bits sets the lanes of the partial results (inner reductions) or of the output
    columns (outer ones); parallel as for VectorKnobs."""


KI = TypeVar("KI", bound=VectorKnobs)


def inline_injective(s: Schedule, keep_tags: Sequence[str] = ()) -> None:
    """Inline every non-output compute stage without a reduction (except those tagged with
    one of `keep_tags`)."""
    for stage in s.stages:
        op = stage.op
        if isinstance(op, ComputeOp) and not op.reduce_axis and not stage.is_output \
                and op.tag not in keep_tags:
            stage.compute_inline()


def schedule_flat(stage: Stage, target: Target, dtype: str = "float32",
                  knobs: VectorKnobs | None = None) -> IterVar | None:
    """Parallel outer loops, vectorized innermost loop, for an injective stage's own axes
    (vector width and parallelism from `knobs`, default: the target's).

    Returns the outermost loop (None for a stage without loops)."""
    axes = list(stage.op.axis)  # type: ignore[attr-defined]
    if not axes:
        return None
    lanes = vector_lanes(target, dtype, knobs.vector_bits if knobs else None)
    total = 1
    for iv in axes:
        total *= _extent(iv)
    last = axes[-1]
    if _extent(last) >= lanes and lanes > 1:
        outer_axes = axes[:-1]
        inner_o, inner_i = stage.split(last, lanes)
        stage.vectorize(inner_i)
        outer = stage.fuse(*outer_axes, inner_o) if outer_axes else inner_o
    else:
        fused = stage.fuse(*axes) if len(axes) > 1 else axes[0]
        if lanes > 1 and total >= lanes:
            outer, inner = stage.split(fused, lanes)
            stage.vectorize(inner)
        else:
            outer = fused
    if total >= PARALLEL_MIN_ELEMENTS and (knobs is None or knobs.parallel):
        stage.parallel(outer)
    return outer


def schedule_injective(outs: Sequence[Tensor], target: Target, knobs: Knobs | None = None,
                       root_tags: Sequence[str] = ()) -> Schedule:
    """Generic schedule for a group of elementwise / broadcast / injective ops.

    Stages tagged with one of `root_tags` (small tables such as per-channel factors) are
    computed once at root instead of being inlined into every output element."""
    k = resolve_knobs(InjectiveKnobs, knobs, outs, target)
    s = te.create_schedule([t.op for t in outs])
    inline_injective(s, root_tags)
    for t in outs:
        schedule_flat(s[t], target, str(t.dtype), k)
    for stage in s.stages:
        if isinstance(stage.op, ComputeOp) and stage.op.tag in root_tags and \
                not stage.is_output and not stage.op.reduce_axis:
            schedule_flat(stage, target, str(stage.op.output(0).dtype), k)
    return s


# ------------------------------------------------------------------------------------------
# analysis of compute bodies
class _Loads(Visitor):
    """Every TensorLoad of an expression, with the variables of each index."""

    def __init__(self) -> None:
        self.loads: list[TensorLoad] = []

    def visit_TensorLoad(self, node: TensorLoad) -> None:
        self.loads.append(node)
        self.generic_visit(node)


class _Vars(Visitor):
    def __init__(self) -> None:
        self.vars: set[Var] = set()

    def visit_Var(self, node: Var) -> None:
        self.vars.add(node)


def _loads(body: object) -> list[TensorLoad]:
    finder = _Loads()
    for b in body if isinstance(body, tuple) else (body,):
        finder.visit(b)
    return finder.loads


def _vars(expr: Expr) -> set[Var]:
    finder = _Vars()
    finder.visit(expr)
    return finder.vars


def reduction_layout(op: ComputeOp, body: tuple[Expr, ...]) -> tuple[str, IterVar | None]:
    """("inner", k) when reduce axis k indexes the innermost dimension of an input;
    ("outer", None) when the innermost output axis does; ("none", None) otherwise."""
    reduce = body[0]
    assert isinstance(reduce, Reduce)
    sources = _loads(reduce.source)
    last_vars = [_vars(ld.indices[-1]) for ld in sources if ld.indices]
    for iv in reversed(op.reduce_axis):
        if any(iv.var in vs for vs in last_vars):
            return "inner", iv
    if op.axis and any(op.axis[-1].var in vs for vs in last_vars):
        return "outer", None
    return "none", None


# ------------------------------------------------------------------------------------------
# reduction stages
def schedule_reduction_stage(stage: Stage, target: Target, dtype: str = "float32",
                             body: tuple[Expr, ...] | None = None, parallel: bool = True,
                             bits: int | None = None) -> IterVar | None:
    """Vectorize one reduction stage (see the module docstring) with vectors of `bits`
    (default: the target's) and make its spatial loops one outer loop, parallel when the
    stage is big and `parallel`; returns that loop."""
    op = stage.op
    assert isinstance(op, ComputeOp) and op.reduce_axis
    s = stage.schedule
    layout, k = reduction_layout(op, body if body is not None else op.body)
    lanes = vector_lanes(target, dtype, bits)
    axes = list(op.axis)
    big = parallel and _big(stage)  # before rfactor shortens the reduction
    if layout == "inner" and k is not None and lanes > 1 and _extent(k) >= 2 * lanes:
        _, ki = stage.split(k, lanes)
        factored = s.rfactor(op.output(0), ki)
        rf = s[factored]
        rf_op = rf.op
        assert isinstance(rf_op, ComputeOp)
        lane_axis, spatial = rf_op.axis[0], list(rf_op.axis[1:])
        others = [iv for iv in rf_op.reduce_axis]
        rf.reorder(*spatial, *others, lane_axis)
        rf.vectorize(lane_axis)
        outer = stage.fuse(*axes) if len(axes) > 1 else (axes[0] if axes else None)
        if outer is not None:
            rf.compute_at(stage, outer)
    elif layout == "outer" and lanes > 1 and axes and _extent(axes[-1]) >= lanes:
        jo, ji = stage.split(axes[-1], lanes)
        outer = stage.fuse(*axes[:-1], jo) if len(axes) > 1 else jo
        reduce_leaves = [iv for iv in stage.leaf_iter_vars if iv.kind == IterKind.REDUCE]
        stage.reorder(outer, *reduce_leaves, ji)
        stage.vectorize(ji)
    else:
        outer = stage.fuse(*axes) if len(axes) > 1 else (axes[0] if axes else None)
    if big and outer is not None:
        stage.parallel(outer)
    return outer


def _big(stage: Stage) -> bool:
    op = stage.op
    assert isinstance(op, ComputeOp)
    total = work = 1
    for iv in op.axis:
        total *= _extent(iv)
    for iv in op.reduce_axis:
        work *= _extent(iv)
    return total > 1 and total * work >= PARALLEL_MIN_ELEMENTS


def _reads(body: tuple[Expr, ...], producer: Stage) -> list[TensorLoad]:
    ops = (producer.op, *producer.previous_ops)
    return [ld for ld in _loads(body) if any(ld.tensor.op is o for o in ops)]


def _attach_depth(consumer: Stage, body: tuple[Expr, ...], producers: list[Stage]) -> int:
    """How many leading axes of `consumer` index the reductions it reads directly: the rest
    (a softmax row, a normalized channel) reuse one reduced value."""
    axes = list(consumer.op.axis)  # type: ignore[attr-defined]
    depth = len(axes)
    for producer in producers:
        used: set[Var] = set()
        for ld in _reads(body, producer):
            for index in ld.indices:
                used |= _vars(index)
        first_unused = next((d for d, iv in enumerate(axes) if iv.var not in used), len(axes))
        depth = min(depth, first_unused)
    return depth


def _schedule_epilogue(s: Schedule, stage: Stage, body: tuple[Expr, ...],
                       attached: list[Stage], layouts: dict[Stage, str], target: Target,
                       work: int, outer_of: dict[Stage, IterVar | None],
                       big_of: dict[Stage, bool], k: ReductionKnobs) -> None:
    """Schedule an elementwise output stage and compute `attached` reductions in its loop."""
    axes = list(stage.op.axis)  # type: ignore[attr-defined]
    direct = [r for r in attached if _reads(body, r)]
    depth = _attach_depth(stage, body, direct) if direct else 0
    lanes = vector_lanes(target, str(stage.op.output(0).dtype), k.vector_bits)
    if not attached or depth == 0:
        outer = schedule_flat(stage, target, str(stage.op.output(0).dtype), k)
        for r in attached:  # computed whole, before the epilogue, with their own threads
            r.compute_root()
            r_outer = outer_of[r]
            if r_outer is not None and big_of[r] and k.parallel:
                r.parallel(r_outer)
        if outer is not None and work >= PARALLEL_MIN_ELEMENTS and k.parallel:
            stage.parallel(outer)
        return
    if depth < len(axes):  # a row of outputs shares each reduced value
        outer = stage.fuse(*axes[:depth]) if depth > 1 else axes[0]
        inner = axes[depth:]
        if lanes > 1 and _extent(inner[-1]) >= lanes:
            _, vi = stage.split(inner[-1], lanes)
            stage.vectorize(vi)
    elif (lanes > 1 and all(layouts[r] == "outer" for r in direct)
          and _extent(axes[-1]) >= lanes):  # one vector of columns per step
        lo, li = stage.split(axes[-1], lanes)
        stage.vectorize(li)
        outer = stage.fuse(*axes[:-1], lo) if len(axes) > 1 else lo
    else:  # one reduced value per output element
        outer = stage.fuse(*axes) if len(axes) > 1 else axes[0]
    for r in attached:
        r.compute_at(stage, outer)
    if work >= PARALLEL_MIN_ELEMENTS and k.parallel:
        stage.parallel(outer)


def schedule_reduction(outs: Sequence[Tensor], target: Target, knobs: Knobs | None = None
                       ) -> Schedule:
    """Generic schedule for a reduction with fused elementwise prologue and epilogue."""
    k = resolve_knobs(ReductionKnobs, knobs, outs, target)
    s = te.create_schedule([t.op for t in outs])
    inline_injective(s)
    bodies = inline_bodies(s)
    reductions = [st for st in s.stages if isinstance(st.op, ComputeOp) and st.op.reduce_axis
                  and st.attach != Attach.INLINE]
    out_stages = [s[t] for t in outs]
    users = {r: [o for o in out_stages if o is r or s.depends(o, r)] for r in reductions}
    layouts: dict[Stage, str] = {}
    work_of: dict[Stage, int] = {}
    for r in reductions:
        op = r.op
        assert isinstance(op, ComputeOp)
        layouts[r] = reduction_layout(op, bodies[r])[0]
        work = 1
        for iv in (*op.axis, *op.reduce_axis):
            work *= _extent(iv)
        work_of[r] = work
    big_of = {r: _big(r) for r in reductions}
    attach_to: dict[Stage, list[Stage]] = {}
    outer_of: dict[Stage, IterVar | None] = {}
    for r in reductions:
        owners = users[r]
        alone = len(owners) == 1 and owners[0] is not r and not r.is_output
        if alone:
            attach_to.setdefault(owners[0], []).append(r)
        outer_of[r] = schedule_reduction_stage(r, target, str(r.op.output(0).dtype), bodies[r],
                                               parallel=not alone and k.parallel,
                                               bits=k.vector_bits)
    for t, st in zip(outs, out_stages):
        if st in reductions:
            continue
        attached = attach_to.get(st, [])
        total = 1
        for iv in st.op.axis:  # type: ignore[attr-defined]
            total *= _extent(iv)
        work = max([total] + [work_of[r] for r in attached])
        _schedule_epilogue(s, st, bodies[st], attached, layouts, target, work, outer_of,
                           big_of, k)
    return s
