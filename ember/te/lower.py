"""lower(schedule, args) -> PrimFunc: bound inference, then one loop nest per stage.

Stages at root run one after another at the top of the function; a stage computed at a
loop of another stage runs at the start of that loop's body, in a buffer allocated there.
"""

from __future__ import annotations

import itertools
import re
from typing import Any, Sequence

from ember import dtype as dt
from ember.arith.bounds import Interval, can_prove
from ember.errors import LoweringError
from ember.te.bounds import StageBounds, infer_bounds
from ember.te.inline import inline_bodies
from ember.te.schedule import Attach, Schedule, Stage
from ember.te.tensor import (
    ComputeOp, ExternOp, Operation, PlaceholderOp, ScanOp, Tensor, TensorLoad,
)
from ember.tir.expr import (
    Add, And, Call, Expr, IterKind, IterVar, Load, Min, Not, Reduce, Select, Var, const,
)
from ember.tir.function import Buffer, PrimFunc
from ember.tir.functor import Mutator, Visitor, substitute, uses_var
from ember.tir.printer import expr_to_str
from ember.tir.stmt import (
    Allocate, Evaluate, For, ForKind, IfThenElse, LetStmt, Stmt, Store, seq,
)


def _align_strides(shape: list[int], aligns: dict[int, tuple[int, int]]) -> tuple[Expr, ...]:
    if not aligns:
        return ()
    strides = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        stride = strides[d + 1] * shape[d + 1]
        if d in aligns:
            factor, offset = aligns[d]
            while stride % factor != offset:
                stride += 1
        strides[d] = stride
    return tuple(const(s) for s in strides)


CACHE_LINE_BYTES = 64     # what one prefetch hint brings in (x86 and Arm cores alike)
MAX_PREFETCH_HINTS = 64   # hints issued per iteration of a prefetch's loop, at most


class _Lowering:
    def __init__(self, schedule: Schedule, args: Sequence[Tensor], name: str) -> None:
        self.schedule = schedule
        self.name = name
        self.bodies = inline_bodies(schedule)
        self.bounds: dict[Stage, StageBounds] = infer_bounds(schedule, self.bodies)
        self.buffers: dict[int, Buffer] = {}        # id(op) -> buffer of output i via key
        self.offsets: dict[int, list[Expr]] = {}    # id(tensor-key) -> buffer origin
        self.names: dict[str, int] = {}
        self.params: list[Buffer] = []
        self.unused: dict[int, Buffer] = {}
        self._bind_args(args)
        self.attached: dict[tuple[int, int], list[Stage]] = {}
        for stage in schedule.stages:
            if stage.attach == Attach.SCOPE:
                assert stage.attach_stage is not None and stage.attach_ivar is not None
                key = (id(stage.attach_stage), id(stage.attach_ivar))
                self.attached.setdefault(key, []).append(stage)

    # -- buffers -------------------------------------------------------------------------
    def _unique(self, name: str) -> str:
        clean = re.sub(r"[^0-9a-zA-Z_]", "_", name) or "buf"
        count = self.names.get(clean, 0)
        self.names[clean] = count + 1
        return clean if count == 0 else f"{clean}_{count}"

    def _key(self, op: Operation, index: int) -> tuple[int, int]:
        stage = self.schedule[op]
        return (id(stage), index)

    def _bind_args(self, args: Sequence[Tensor]) -> None:
        for arg in args:
            if not isinstance(arg, Tensor):
                raise LoweringError(f"lower: arguments must be tensors, got "
                                    f"{type(arg).__name__}")
            if not self._in_schedule(arg):
                # an argument nothing reads (e.g. the input of Shape): still a parameter
                buf = Buffer(self._unique(arg.name), arg.shape, arg.dtype)
                self.unused[id(arg.op)] = buf
                self.params.append(buf)
                continue
            stage = self.schedule[arg]
            if stage.attach != Attach.ROOT:
                raise LoweringError(f"tensor '{arg.name}' is a function argument, so its stage "
                                    f"must be computed at root (it is {stage.attach.value})")
            key = (id(stage), arg.value_index)
            if key in self.buffers:
                raise LoweringError(f"tensor '{arg.name}' appears twice in the arguments")
            buf = Buffer(self._unique(arg.name), arg.shape, arg.dtype)
            self.buffers[key] = buf
            self.offsets[key] = [const(0)] * len(arg.shape)  # type: ignore[index]
            self.params.append(buf)
        for stage in self.schedule.stages:
            if stage.is_output:
                for t in stage.op.outputs:
                    if (id(stage), t.value_index) not in self.buffers:
                        raise LoweringError(f"output tensor '{t.name}' is not among the "
                                            "arguments of lower/build")

    def _in_schedule(self, tensor: Tensor) -> bool:
        return any(stage.op is tensor.op or any(tensor.op is p for p in stage.previous_ops)
                   for stage in self.schedule.stages)

    def buffer_of(self, tensor: Tensor) -> tuple[Buffer, list[Expr]]:
        op = tensor.op
        for stage in self.schedule.stages:
            if isinstance(stage.op, ScanOp):
                for i, state in enumerate(stage.op.state_placeholder):
                    if state.op is op:
                        return self.buffer_of(stage.op.output(i))
        key = self._key(op, tensor.value_index)
        if key not in self.buffers:
            stage = self.schedule[op]
            if isinstance(stage.op, PlaceholderOp):
                raise LoweringError(f"placeholder '{tensor.name}' is read but not passed in "
                                    "the arguments of lower/build")
            self._make_buffers(stage)
        return self.buffers[key], self.offsets[key]  # type: ignore[index]

    def _make_buffers(self, stage: Stage) -> list[Buffer]:
        """The stage's output buffers that need an allocation (created on first use)."""
        made = []
        bounds = self.bounds[stage]
        for t in stage.op.outputs:
            key = (id(stage), t.value_index)
            if key in self.buffers:
                if self.buffers[key] not in self.params:
                    made.append(self.buffers[key])
                continue
            strides = _align_strides(bounds.extents, stage.storage_aligns)
            buf = Buffer(self._unique(t.name), tuple(const(e) for e in bounds.extents),
                         t.dtype, strides=strides, scope=stage.scope)
            self.buffers[key] = buf
            self.offsets[key] = bounds.offsets  # type: ignore[index]
            made.append(buf)
        return made

    # -- expressions ---------------------------------------------------------------------
    def to_tir(self, expr: Expr, root_value: dict[Var, Expr]) -> Expr:
        return _ToTIR(self).visit(substitute(expr, root_value))  # type: ignore[no-any-return]

    # -- statements ----------------------------------------------------------------------
    def build_stage(self, stage: Stage) -> Stmt:
        op = stage.op
        if isinstance(op, ExternOp):
            return self._build_extern(stage, op)
        if isinstance(op, ScanOp):
            return self._build_scan(stage, op)
        assert isinstance(op, ComputeOp)
        return self._build_compute(stage, op, self.bodies[stage])

    def _store_index(self, stage: Stage, axis: Sequence[IterVar]) -> list[Expr]:
        bounds = self.bounds[stage]
        return [bounds.root_value[iv.var] - off for iv, off in zip(axis, bounds.offsets)]

    def _loop(self, stage: Stage, iv: IterVar, body: Stmt) -> Stmt:
        hints = [h for p in stage.prefetches if p.at is iv
                 for h in self._prefetches(stage, p.at, p.ahead, p.offset)]
        if hints:
            body = seq(*hints, body)
        attr = stage.iter_attrs.get(iv)
        kind = attr.kind if attr else ForKind.SERIAL
        tag = attr.bound_thread.thread_tag if attr and attr.bound_thread else ""
        pragmas = tuple(attr.pragmas) if attr else ()
        extent = self.bounds[stage].leaf_extents[iv]
        return For(iv.var, const(0), const(extent), kind, body, tag, pragmas)

    def _extent_of(self, stage: Stage, iv: IterVar) -> int:
        """The trip count of loop `iv` of `stage` or of a stage it is computed inside."""
        at: Stage | None = stage
        while at is not None:
            if iv in self.bounds[at].leaf_extents:
                return int(self.bounds[at].leaf_extents[iv])
            at = at.attach_stage
        raise LoweringError(f"stage '{stage.name}': prefetch looks ahead on loop '{iv.name}', "
                            "which is not a loop around it")

    def _prefetches(self, stage: Stage, at: IterVar, ahead: IterVar, offset: int
                    ) -> list[Stmt]:
        """Stage.prefetch's hints at loop `at`: `prefetch(buf[i])` for each element a read
        of an argument that moves with `ahead` will touch `offset` iterations later."""
        if not isinstance(stage.op, ComputeOp):
            raise LoweringError(f"stage '{stage.name}': only compute stages prefetch")
        extent = self._extent_of(stage, ahead)
        leaves = stage.leaf_iter_vars
        inner = leaves[leaves.index(at) + 1:]
        fixed: dict[Var, Expr] = {iv.var: const(0) for iv in inner}
        fixed[ahead.var] = Min(Add(ahead.var, const(offset)), const(extent - 1))
        loads = _Loads()
        for body in self.bodies[stage]:
            for part in (body.source if isinstance(body, Reduce) else (body,)):
                loads.visit(self.to_tir(part, self.bounds[stage].root_value))
        hints: dict[str, Stmt] = {}
        for load in loads.found:
            if load.buffer not in self.params or not any(uses_var(i, ahead.var)
                                                         for i in load.indices):
                continue
            # straight-line loops inside `at` (unrolled, vectorized) touch every value;
            # a vectorized one a run of elements: one hint per cache line of it
            values = []
            for iv in inner:
                kind = stage.iter_attrs[iv].kind if iv in stage.iter_attrs else None
                if kind not in (ForKind.UNROLLED, ForKind.VECTORIZED) or not any(
                        uses_var(i, iv.var) for i in load.indices):
                    continue
                step = max(1, CACHE_LINE_BYTES // load.buffer.dtype.storage_bytes) \
                    if kind == ForKind.VECTORIZED else 1
                values.append([(iv.var, v) for v in
                               range(0, self.bounds[stage].leaf_extents[iv], step)])
            for combo in itertools.product(*values):
                where = {**fixed, **{var: const(v) for var, v in combo}}
                target = Load(load.buffer, tuple(substitute(i, where) for i in load.indices))
                hints.setdefault(expr_to_str(target),
                                 Evaluate(Call(dt.int32, "prefetch", (target,))))
                if len(hints) >= MAX_PREFETCH_HINTS:
                    return list(hints.values())
        return list(hints.values())

    def _with_attached(self, stage: Stage, iv: IterVar, body: Stmt) -> Stmt:
        children = self.attached.get((id(stage), id(iv)), [])
        if not children:
            return body
        buffers: list[Buffer] = []
        for child in children:
            buffers += self._make_buffers(child)
        result = seq(*[self.build_stage(c) for c in children], body)
        for buf in reversed(buffers):
            result = Allocate(buf, result)
        return result

    def _nest(self, stage: Stage, loops: Sequence[IterVar], body: Stmt, attach: bool) -> Stmt:
        for iv in reversed(loops):
            if attach:
                body = self._with_attached(stage, iv, body)
            body = self._loop(stage, iv, body)
        return body

    def _guarded(self, guards: Sequence[Expr], body: Stmt, stage: Stage) -> Stmt:
        ranges = {iv.var: Interval.from_range(const(0), const(e))
                  for iv, e in self.bounds[stage].leaf_extents.items()}
        needed = [g for g in guards if not can_prove(g, ranges)]
        if not needed:
            return body
        cond = needed[0]
        for g in needed[1:]:
            cond = And(cond, g)
        return IfThenElse(cond, body)

    def _build_compute(self, stage: Stage, op: ComputeOp, body: tuple[Expr, ...]) -> Stmt:
        bounds = self.bounds[stage]
        outputs = [self.buffer_of(t)[0] for t in op.outputs]
        index = tuple(self._store_index(stage, op.axis))
        leaves = stage.leaf_iter_vars
        reduce_vars = {iv.var for iv in op.reduce_axis}
        if not isinstance(body[0], Reduce):
            stores = seq(*[Store(buf, self.to_tir(b, bounds.root_value), index)
                           for buf, b in zip(outputs, body)])
            return self._nest(stage, leaves, self._guarded(bounds.guards, stores, stage), True)
        first = next(i for i, iv in enumerate(leaves) if iv.kind == IterKind.REDUCE)
        outer, inner = leaves[:first], leaves[first:]
        reduce = body[0]
        spatial_guards = [g for g in bounds.guards if not _uses_any(g, inner, reduce_vars,
                                                                   stage, spatial_ok=True)]
        init = seq(*[Store(buf, self.to_tir(reduce.combiner.identity[i], {}), index)
                     for i, buf in enumerate(outputs)])
        init_loops = [iv for iv in inner if iv.kind != IterKind.REDUCE]
        init_nest = self._nest(stage, init_loops,
                               self._guarded(spatial_guards, init, stage), False)
        update = self._update(reduce, outputs, index, bounds)
        update_nest = self._nest(stage, inner, self._guarded(bounds.guards, update, stage), True)
        return self._nest(stage, outer, seq(init_nest, update_nest), True)

    def _update(self, reduce: Reduce, outputs: list[Buffer], index: tuple[Expr, ...],
                bounds: StageBounds) -> Stmt:
        combiner = reduce.combiner
        sources = [self.to_tir(s, bounds.root_value) for s in reduce.source]
        lets: list[tuple[Var, Expr]] = []
        if len(outputs) > 1:
            bound = []
            for i, s in enumerate(sources):
                v = Var(f"{combiner.rhs[i].name}_value", s.dtype)
                lets.append((v, s))
                bound.append(v)
            sources = bound  # type: ignore[assignment]
        mapping: dict[Var, Expr] = {}
        for i, buf in enumerate(outputs):
            mapping[combiner.lhs[i]] = Load(buf, index)
            mapping[combiner.rhs[i]] = sources[i]
        results = [self.to_tir(substitute(r, mapping), {}) for r in combiner.result]
        if len(outputs) == 1:
            stmt: Stmt = Store(outputs[0], results[0], index)
        else:
            new_values = [Var(f"{buf.name}_next", r.dtype) for buf, r in zip(outputs, results)]
            stmt = seq(*[Store(buf, v, index) for buf, v in zip(outputs, new_values)])
            for v, r in reversed(list(zip(new_values, results))):
                stmt = LetStmt(v, r, stmt)
        for v, s in reversed(lets):
            stmt = LetStmt(v, s, stmt)
        if not _is_true(reduce.condition):
            stmt = IfThenElse(self.to_tir(reduce.condition, bounds.root_value), stmt)
        return stmt

    def _build_scan(self, stage: Stage, op: ScanOp) -> Stmt:
        bounds = self.bounds[stage]
        outputs = [self.buffer_of(t)[0] for t in op.outputs]
        # state[0:k] = init
        init_parts = []
        for buf, init in zip(outputs, op.init):
            ivs = [Var(f"{op.name}_init{d}") for d in range(len(init.shape))]
            value = self._scan_init(init, ivs)
            stmt: Stmt = Store(buf, value, tuple(ivs))
            for v, extent in reversed(list(zip(ivs, init.shape))):
                stmt = For(v, const(0), extent, ForKind.SERIAL, stmt)
            init_parts.append(stmt)
        axis = [op.scan_axis, *op.spatial_axis]
        index = tuple(bounds.root_value[iv.var] for iv in axis)
        stores = seq(*[Store(buf, self.to_tir(TensorLoad(u, tuple(iv.var for iv in axis)),
                                              bounds.root_value), index)
                       for buf, u in zip(outputs, op.update)])
        main = self._nest(stage, stage.leaf_iter_vars,
                          self._guarded(bounds.guards, stores, stage), True)
        return seq(*init_parts, main)

    def _scan_init(self, init: Tensor, ivs: Sequence[Var]) -> Expr:
        """The initial state at `ivs`: a load, or the init's own body where it was inlined
        (a zero state folded to a constant broadcast has no buffer of its own)."""
        init_stage = self.schedule[init.op] if self._in_schedule(init) else None
        if init_stage is not None and init_stage.attach == Attach.INLINE and \
                isinstance(init_stage.op, ComputeOp):
            body = self.bodies[init_stage][init.value_index]
            mapping = {iv.var: v for iv, v in zip(init_stage.op.axis, ivs)}
            return self.to_tir(substitute(body, mapping), {})
        in_buf, in_off = self.buffer_of(init)
        return Load(in_buf, tuple(v - o for v, o in zip(ivs, in_off)))

    def _build_extern(self, stage: Stage, op: ExternOp) -> Stmt:
        mapping: dict[int, Buffer] = {}
        for placeholder_buf, tensor in zip(op.input_buffers, op.inputs):
            buf, offsets = self.buffer_of(tensor)
            if self.schedule[tensor].attach != Attach.ROOT and not isinstance(
                    tensor.op, PlaceholderOp):
                raise LoweringError(f"extern '{op.name}' reads '{tensor.name}', which must be "
                                    "computed at root")
            mapping[id(placeholder_buf)] = buf
        for placeholder_buf, tensor in zip(op.output_buffers, op.outputs):
            mapping[id(placeholder_buf)] = self.buffer_of(tensor)[0]
        data = {old.data: mapping[id(old)].data
                for old in op.input_buffers + op.output_buffers}
        return _RebindBuffers(mapping, data).visit(op.body)  # type: ignore[no-any-return]

    def run(self, gpu: bool = False) -> PrimFunc:
        if gpu:
            from ember.te.gpu import check_gpu_schedule

            check_gpu_schedule(self.schedule, self.bounds)
        roots = [s for s in self.schedule.stages
                 if s.attach == Attach.ROOT and not isinstance(s.op, PlaceholderOp)]
        allocs: list[Buffer] = []
        for stage in roots:
            allocs += self._make_buffers(stage)
        body = seq(*[self.build_stage(s) for s in roots])
        for buf in reversed(allocs):
            body = Allocate(buf, body)
        return PrimFunc(self.name, tuple(self.params), body)


class _Loads(Visitor):
    """Every Load of an expression, in order."""

    def __init__(self) -> None:
        self.found: list[Load] = []

    def visit_Load(self, node: Load) -> None:
        self.found.append(node)
        self.generic_visit(node)


def _is_true(e: Expr) -> bool:
    return getattr(e, "value", None) == 1 and e.dtype.is_bool


def _uses_any(g: Expr, inner: Sequence[IterVar], reduce_vars: set[Var], stage: Stage,
              spatial_ok: bool) -> bool:
    from ember.tir.functor import used_vars

    reduce_leaves = {iv.var for iv in inner if iv.kind == IterKind.REDUCE}
    return any(v in reduce_leaves or v in reduce_vars for v in used_vars(g))


class _ToTIR(Mutator):
    """TensorLoad -> Load of the producer's buffer; if_then_else -> Select + guarded loads."""

    def __init__(self, lowering: _Lowering) -> None:
        self.lowering = lowering

    def visit_TensorLoad(self, node: TensorLoad) -> Expr:
        buf, offsets = self.lowering.buffer_of(node.tensor)
        indices = tuple(self.visit(i) - o for i, o in zip(node.indices, offsets))
        return Load(buf, indices)

    def visit_Reduce(self, node: Reduce) -> Expr:
        raise LoweringError("a reduction must be the outermost expression of a compute body")

    def visit_Call(self, node: Call) -> Expr:
        args = tuple(self.visit(a) for a in node.args)
        if node.name != "if_then_else":
            return Call(node.dtype, node.name, args)
        cond, then, other = args
        return Select(cond, _predicate_loads(then, cond), _predicate_loads(other, Not(cond)))


class _Predicate(Mutator):
    def __init__(self, cond: Expr) -> None:
        self.cond = cond

    def visit_Load(self, node: Load) -> Expr:
        indices = tuple(self.visit(i) for i in node.indices)
        pred = self.cond if node.predicate is None else And(node.predicate, self.cond)
        return Load(node.buffer, indices, pred)


def _predicate_loads(expr: Expr, cond: Expr) -> Expr:
    return _Predicate(cond).visit(expr)  # type: ignore[no-any-return]


class _RebindBuffers(Mutator):
    def __init__(self, mapping: dict[int, Buffer], data: dict[Var, Var]) -> None:
        self.mapping = mapping
        self.data = data

    def _buf(self, buf: Buffer) -> Buffer:
        return self.mapping.get(id(buf), buf)

    def visit_Load(self, node: Load) -> Expr:
        return Load(self._buf(node.buffer), tuple(self.visit(i) for i in node.indices),
                    None if node.predicate is None else self.visit(node.predicate))

    def visit_Store(self, node: Store) -> Stmt:
        return Store(self._buf(node.buffer), self.visit(node.value),
                     tuple(self.visit(i) for i in node.indices),
                     None if node.predicate is None else self.visit(node.predicate))

    def visit_Var(self, node: Var) -> Expr:
        return self.data.get(node, node)


def lower_schedule(schedule: Schedule, args: Sequence[Tensor], name: str = "main",
                   gpu: bool = False) -> PrimFunc:
    """The loop program of a schedule, before the TIR pass pipeline; `gpu`: check first
    that every root stage maps onto GPU threads (ember.te.gpu)."""
    if not isinstance(schedule, Schedule):
        raise LoweringError(f"lower: expected a Schedule, got {type(schedule).__name__}")
    return _Lowering(schedule, list(args), name).run(gpu)


def lower(schedule: Schedule, args: Sequence[Any], name: str = "main",
          simple: bool = True) -> PrimFunc:
    """`print(ember.lower(s, [A, B, C]))`: the simplified loop nest of a schedule."""
    func = lower_schedule(schedule, args, name)
    if simple:
        from ember.tir.transform.simplify import simplify

        func = simplify(func)
    return func
