"""Schedule and Stage: how to compute. Primitives validate their arguments and record.

    s = te.create_schedule(C.op)
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], 32, 32)
    s[C].vectorize(ji)

Stage-level primitives (split, fuse, reorder, tile, vectorize, unroll, parallel, bind,
pragma, compute_at, compute_inline, compute_root, storage_align) rewrite the loop structure
of one stage; schedule-level ones (cache_read, cache_write, rfactor) add stages.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Sequence

from ember.errors import EmberError, ScheduleError
from ember.te.tensor import ComputeOp, Operation, ScanOp, Tensor
from ember.tir.expr import Expr, ExprLike, IterKind, IterVar, Range, Var, const, convert
from ember.tir.stmt import ForKind


@dataclass(frozen=True, eq=False)
class Split:
    parent: IterVar
    outer: IterVar
    inner: IterVar
    factor: int | None
    nparts: int | None


@dataclass(frozen=True, eq=False)
class Fuse:
    outer: IterVar
    inner: IterVar
    fused: IterVar


Relation = Split | Fuse


@dataclass
class IterAttr:
    kind: ForKind = ForKind.SERIAL
    bound_thread: IterVar | None = None
    pragmas: list[tuple[str, Expr]] = field(default_factory=list)


class Attach(Enum):
    ROOT = "root"
    INLINE = "inline"
    SCOPE = "scope"


@dataclass(frozen=True, eq=False)
class Prefetch:
    """Stage.prefetch: at each iteration of loop `at`, hint what `offset` iterations of loop
    `ahead` later will read."""

    at: IterVar
    ahead: IterVar
    offset: int


class Stage:
    """The schedule of one operation: its loop axes and where it is computed."""

    def __init__(self, op: Operation, schedule: Schedule) -> None:
        self.op = op
        self.origin_op = op
        self.previous_ops: list[Operation] = []
        self.schedule = schedule
        self.all_iter_vars: list[IterVar] = list(_root_iter_vars(op))
        self.leaf_iter_vars: list[IterVar] = list(self.all_iter_vars)
        self.relations: list[Relation] = []
        self.iter_attrs: dict[IterVar, IterAttr] = {}
        self.attach = Attach.ROOT
        self.attach_stage: Stage | None = None
        self.attach_ivar: IterVar | None = None
        self.scope = "global"
        self.storage_aligns: dict[int, tuple[int, int]] = {}
        self.is_output = False
        self.prefetches: list[Prefetch] = []

    @property
    def name(self) -> str:
        return self.op.name

    def __repr__(self) -> str:
        return f"Stage({self.name})"

    # -- checks --------------------------------------------------------------------------
    def _leaf(self, iv: object, primitive: str) -> IterVar:
        if not isinstance(iv, IterVar):
            raise ScheduleError(f"stage '{self.name}': {primitive} expects an axis (IterVar), "
                                f"got {type(iv).__name__}")
        if iv not in self.leaf_iter_vars:
            where = "an axis of another stage" if iv not in self.all_iter_vars else \
                "already split or fused away"
            raise ScheduleError(f"stage '{self.name}': cannot {primitive} axis '{iv.name}': it "
                                f"is {where}; current axes are "
                                f"{[v.name for v in self.leaf_iter_vars]}")
        return iv

    def _schedulable(self, primitive: str) -> None:
        if not self.all_iter_vars:
            raise ScheduleError(f"stage '{self.name}' ({type(self.op).__name__}) has no loops "
                                f"to {primitive}")

    def _attr(self, iv: IterVar) -> IterAttr:
        return self.iter_attrs.setdefault(iv, IterAttr())

    def _new_iter_var(self, name: str, extent: int | None, kind: IterKind) -> IterVar:
        dom = Range.from_extent(extent) if extent is not None else Range(const(0), const(0))
        iv = IterVar(Var(name), dom, kind)
        self.all_iter_vars.append(iv)
        return iv

    # -- loop structure ------------------------------------------------------------------
    def split(self, parent: IterVar, factor: int | None = None,
              nparts: int | None = None) -> tuple[IterVar, IterVar]:
        """Split `parent` into (outer, inner) with inner extent `factor` (or `nparts` outer).

            for i in range(100):        ->  for i.outer in range(4):
              body(i)                          for i.inner in range(32):
                                                 if i.outer * 32 + i.inner < 100:
                                                   body(i.outer * 32 + i.inner)
        """
        self._schedulable("split")
        self._leaf(parent, "split")
        if (factor is None) == (nparts is None):
            raise ScheduleError(f"stage '{self.name}': split of '{parent.name}' needs exactly "
                                "one of factor= or nparts=")
        amount = factor if factor is not None else nparts
        if isinstance(amount, Expr):
            amount = getattr(amount, "value", amount)
        if not isinstance(amount, int) or isinstance(amount, bool) or amount <= 0:
            raise ScheduleError(f"stage '{self.name}': split factor of '{parent.name}' must be "
                                f"a positive integer, got {amount!r}")
        outer = self._new_iter_var(f"{parent.name}.outer", None, parent.kind)
        inner = self._new_iter_var(f"{parent.name}.inner", None, parent.kind)
        position = self.leaf_iter_vars.index(parent)
        self.leaf_iter_vars[position:position + 1] = [outer, inner]
        self.relations.append(Split(parent, outer, inner,
                                    amount if factor is not None else None,
                                    amount if nparts is not None else None))
        return outer, inner

    def fuse(self, *axes: IterVar) -> IterVar:
        """Fuse adjacent axes (outermost first) into one: for i, j -> for i.j.fused."""
        self._schedulable("fuse")
        if len(axes) == 1 and isinstance(axes[0], (list, tuple)):
            axes = tuple(axes[0])
        if not axes:
            raise ScheduleError(f"stage '{self.name}': fuse needs at least one axis")
        for iv in axes:
            self._leaf(iv, "fuse")
        positions = [self.leaf_iter_vars.index(iv) for iv in axes]
        if positions != list(range(positions[0], positions[0] + len(axes))):
            raise ScheduleError(f"stage '{self.name}': fuse needs adjacent axes in loop order "
                                f"(outer first), got {[iv.name for iv in axes]} in loop order "
                                f"{[iv.name for iv in self.leaf_iter_vars]}; reorder first")
        kinds = {iv.kind for iv in axes}
        if len(kinds) > 1:
            raise ScheduleError(f"stage '{self.name}': cannot fuse spatial and reduction axes "
                                f"{[iv.name for iv in axes]}")
        fused = axes[0]
        for inner in axes[1:]:
            result = self._new_iter_var(f"{fused.name}.{inner.name}.fused", None, inner.kind)
            self.relations.append(Fuse(fused, inner, result))
            position = self.leaf_iter_vars.index(fused)
            self.leaf_iter_vars[position:position + 2] = [result]
            fused = result
        return fused

    def reorder(self, *axes: IterVar) -> None:
        """Put the given axes in this relative order; other axes keep their places."""
        self._schedulable("reorder")
        if len(axes) == 1 and isinstance(axes[0], (list, tuple)):
            axes = tuple(axes[0])
        for iv in axes:
            self._leaf(iv, "reorder")
        if len(set(axes)) != len(axes):
            raise ScheduleError(f"stage '{self.name}': reorder got an axis twice: "
                                f"{[iv.name for iv in axes]}")
        positions = sorted(self.leaf_iter_vars.index(iv) for iv in axes)
        for position, iv in zip(positions, axes):
            self.leaf_iter_vars[position] = iv

    def tile(self, x: IterVar, y: IterVar, x_factor: int, y_factor: int
             ) -> tuple[IterVar, IterVar, IterVar, IterVar]:
        """Split x and y and order the loops (x.outer, y.outer, x.inner, y.inner)."""
        xo, xi = self.split(x, x_factor)
        yo, yi = self.split(y, y_factor)
        self.reorder(xo, yo, xi, yi)
        return xo, yo, xi, yi

    # -- loop annotations ----------------------------------------------------------------
    def _annotate(self, iv: IterVar, kind: ForKind, primitive: str) -> None:
        self._schedulable(primitive)
        self._leaf(iv, primitive)
        if iv.kind == IterKind.REDUCE and kind in (ForKind.VECTORIZED, ForKind.PARALLEL):
            raise ScheduleError(f"stage '{self.name}': cannot {primitive} reduction axis "
                                f"'{iv.name}'; {primitive} a spatial axis or rfactor it first")
        self._attr(iv).kind = kind

    def vectorize(self, iv: IterVar) -> None:
        """Run the loop of `iv` as vector instructions (its extent becomes the lane count)."""
        self._annotate(iv, ForKind.VECTORIZED, "vectorize")

    def unroll(self, iv: IterVar) -> None:
        """Replace the loop of `iv` by copies of its body (constant extent)."""
        self._annotate(iv, ForKind.UNROLLED, "unroll")

    def parallel(self, iv: IterVar) -> None:
        """Run the iterations of `iv` on the thread pool."""
        self._annotate(iv, ForKind.PARALLEL, "parallel")

    def bind(self, iv: IterVar, thread: IterVar | str) -> None:
        """Map the loop of `iv` to a GPU thread axis: te.thread_axis("threadIdx.x") or its tag.

            for i.outer in range(64):        ->  i.outer = blockIdx.x   (one block each)
              for i.inner in range(128):         i.inner = threadIdx.x  (one thread each)
        """
        if isinstance(thread, str):
            from ember.te.tensor import thread_axis

            try:
                thread = thread_axis(thread)
            except EmberError as error:
                raise ScheduleError(f"stage '{self.name}': cannot bind '{iv.name}': "
                                    f"{error}") from None
        if iv in self.leaf_iter_vars and iv.kind == IterKind.REDUCE:
            raise ScheduleError(f"stage '{self.name}': cannot bind reduction axis '{iv.name}' "
                                "to a thread axis; rfactor it first")
        if not isinstance(thread, IterVar) or thread.kind != IterKind.THREAD:
            raise ScheduleError(f"stage '{self.name}': bind target must be a te.thread_axis, "
                                f"got '{getattr(thread, 'name', thread)}'")
        self._annotate(iv, ForKind.THREAD_BINDING, "bind")
        self._attr(iv).bound_thread = thread

    def pragma(self, iv: IterVar, key: str, value: ExprLike = 1) -> None:
        """Attach a pragma (key, value) to the loop of `iv`; code generators may read it."""
        self._schedulable("pragma")
        self._leaf(iv, "pragma")
        if not isinstance(key, str) or not key:
            raise ScheduleError(f"stage '{self.name}': pragma key must be a non-empty string")
        self._attr(iv).pragmas.append((key, convert(value)))

    def prefetch(self, at: IterVar, ahead: IterVar, offset: int = 1) -> None:
        """At the start of each iteration of this stage's loop `at`, hint the cache to fetch
        what the body will read from the kernel's arguments `offset` iterations of loop
        `ahead` later (clamped to its last): `ahead` is a loop around `at`, of this stage or
        of the stage it is computed at. Only reads that move with `ahead` are hinted, one
        hint per cache line of each unrolled or vectorized access inside `at` (other loops
        inside `at` at their first iteration). Weights a kernel streams once per `ahead`
        iteration then arrive while the current iteration computes."""
        self._leaf(at, "prefetch")
        if not isinstance(ahead, IterVar):
            raise ScheduleError(f"stage '{self.name}': prefetch expects an axis (IterVar) to "
                                f"look ahead on, got {type(ahead).__name__}")
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 1:
            raise ScheduleError(f"stage '{self.name}': prefetch offset must be an int >= 1, "
                                f"got {offset!r}")
        self.prefetches.append(Prefetch(at, ahead, offset))

    # -- where the stage is computed -------------------------------------------------------
    def compute_at(self, parent: Stage, iv: IterVar) -> None:
        """Compute this stage inside loop `iv` of `parent`, only the part that loop needs."""
        if not isinstance(parent, Stage):
            raise ScheduleError(f"stage '{self.name}': compute_at needs a Stage (s[T]), got "
                                f"{type(parent).__name__}")
        if parent is self:
            raise ScheduleError(f"stage '{self.name}': cannot compute_at itself")
        if self.is_output:
            raise ScheduleError(f"stage '{self.name}' is an output of the schedule; it cannot "
                                "be computed inside another stage")
        if not isinstance(self.op, ComputeOp):
            raise ScheduleError(f"stage '{self.name}': only compute stages can compute_at")
        if iv not in parent.leaf_iter_vars:
            raise ScheduleError(f"stage '{self.name}': compute_at axis '{getattr(iv, 'name', iv)}'"
                                f" is not a loop of stage '{parent.name}'")
        if not self.schedule.depends(parent, self):
            raise ScheduleError(f"stage '{self.name}': cannot compute_at stage '{parent.name}' "
                                f"because '{parent.name}' does not consume it")
        self.attach = Attach.SCOPE
        self.attach_stage = parent
        self.attach_ivar = iv

    def compute_inline(self) -> None:
        """Substitute this stage's expression into every consumer; it gets no buffer."""
        if self.is_output:
            raise ScheduleError(f"stage '{self.name}' is an output; it cannot be inlined")
        if not isinstance(self.op, ComputeOp) or self.op.reduce_axis:
            raise ScheduleError(f"stage '{self.name}': only element-wise compute stages (no "
                                "reduction) can be inlined")
        self.attach = Attach.INLINE
        self.attach_stage = None
        self.attach_ivar = None

    def compute_root(self) -> None:
        """Compute the whole tensor before its consumers, at the top of the function."""
        self.attach = Attach.ROOT
        self.attach_stage = None
        self.attach_ivar = None

    def set_scope(self, scope: str) -> None:
        if scope not in ("global", "shared", "local"):
            raise ScheduleError(f"stage '{self.name}': unknown memory scope {scope!r}; "
                                "expected 'global', 'shared' or 'local'")
        self.scope = scope

    def storage_align(self, axis: IterVar, factor: int, offset: int) -> None:
        """Pad the stride of dimension `axis` to be `offset` modulo `factor` (bank conflicts)."""
        if not isinstance(self.op, ComputeOp) or axis not in self.op.axis:
            raise ScheduleError(f"stage '{self.name}': storage_align needs an original axis of "
                                f"the stage, got '{getattr(axis, 'name', axis)}'")
        if not isinstance(factor, int) or factor <= 0 or not isinstance(offset, int):
            raise ScheduleError(f"stage '{self.name}': storage_align factor must be a positive "
                                f"integer and offset an integer, got {factor!r}, {offset!r}")
        self.storage_aligns[self.op.axis.index(axis)] = (factor, offset % factor)


def _root_iter_vars(op: Operation) -> tuple[IterVar, ...]:
    if isinstance(op, ComputeOp):
        return op.axis + op.reduce_axis
    if isinstance(op, ScanOp):
        return (op.scan_axis,) + op.spatial_axis
    return ()


class Schedule:
    """All stages of a computation in topological (producer-first) order."""

    def __init__(self, outputs: Sequence[Operation]) -> None:
        from ember.te.graph import post_order

        self.outputs = list(outputs)
        self.stages: list[Stage] = [Stage(op, self) for op in post_order(self.outputs)]
        for op in self.outputs:
            self[op].is_output = True
        from ember.te.graph import attach_scan_bodies

        attach_scan_bodies(self)

    def __getitem__(self, key: Tensor | Operation) -> Stage:
        op = key.op if isinstance(key, Tensor) else key
        for stage in self.stages:
            if stage.op is op or any(op is p for p in stage.previous_ops):
                return stage
        name = getattr(op, "name", key)
        raise ScheduleError(f"'{name}' is not part of this schedule")

    def stage_of(self, op: Operation) -> Stage:
        return self[op]

    def reads(self, consumer: Stage, producer: Stage) -> bool:
        """True if `consumer`'s operation reads an output of `producer`."""
        return any(t.op is producer.op or any(t.op is p for p in producer.previous_ops)
                   for t in consumer.op.input_tensors())

    def depends(self, consumer: Stage, producer: Stage) -> bool:
        """True if `consumer` reads `producer`'s output directly or through other stages."""
        seen: set[int] = set()
        pending = [consumer]
        while pending:
            stage = pending.pop()
            if self.reads(stage, producer):
                return True
            for t in stage.op.input_tensors():
                upstream = self[t]
                if id(upstream) not in seen:
                    seen.add(id(upstream))
                    pending.append(upstream)
        return False

    def cache_read(self, tensor: Tensor, scope: str, readers: Sequence[Tensor | Operation]
                   ) -> Tensor:
        from ember.te.cache import cache_read

        return cache_read(self, tensor, scope, readers)

    def cache_write(self, tensor: Tensor, scope: str) -> Tensor:
        from ember.te.cache import cache_write

        return cache_write(self, tensor, scope)

    def rfactor(self, tensor: Tensor, axis: IterVar, factor_axis: int = 0) -> Tensor:
        from ember.te.rfactor import rfactor

        return rfactor(self, tensor, axis, factor_axis)


def create_schedule(ops: Operation | Tensor | Sequence[Operation | Tensor]) -> Schedule:
    """A default schedule (every stage at root, serial loops) for the given outputs."""
    items = ops if isinstance(ops, (list, tuple)) else [ops]
    return Schedule([t.op if isinstance(t, Tensor) else t for t in items])
