"""Turn a group of graph nodes into one kernel: te computes chained, the anchor's schedule,
then ember.lowering.build. Also `run_op`, the one-op test helper.

Weight stages are computed at compile time: a stage that reads only constant inputs (the
panels of a packed B, a transposed recurrent weight, a blocked convolution kernel) would
otherwise redo the same work on every call. `split_constant_stages` moves such stages into
a separate "pack" kernel, run once when the model is compiled; the main kernel reads the
packed tensor as a new input instead. The op's schedule still sees a stage with the same
name and tag (an identity copy of the new input), so it needs no special case; the copy is
inlined after the schedule, so the main kernel reads the packed tensor in place.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ember import te
from ember.errors import EmberError, ScheduleError
from ember.lowering.build import build
from ember.graph.ir import Node, TensorType, Value, tensor_type
from ember.ops.generic import (
    inline_injective,
    schedule_flat,
    schedule_injective,
    schedule_reduction,
)
from ember.ops.knobs import Knobs, Task, resolve_knobs
from ember.ops.registry import OpDef, Pattern, get_op
from ember.runtime.module import Module
from ember.target import Target
from ember.te.graph import post_order
from ember.te.schedule import Schedule
from ember.te.tensor import ComputeOp, Operation, PlaceholderOp, ScanOp, Tensor, TensorLoad
from ember.tir.expr import Expr, Reduce
from ember.tir.function import PrimFunc
from ember.tir.functor import Mutator

# a constant stage is precomputed only if it is at most this many times larger than the
# constants it reads (a broadcast of a bias to a whole tensor stays in the kernel)
PRECOMPUTE_MAX_GROWTH = 2.0
PACK_SUFFIX = "_pack"


def _ident(name: str) -> str:
    return re.sub(r"[^0-9a-zA-Z_]", "_", name) or "t"


def anchor_of(nodes: Sequence[Node]) -> Node:
    """The node whose schedule drives the group: the one with the highest pattern."""
    return max(nodes, key=lambda n: int(get_op(n.op).pattern))


def group_compute(nodes: Sequence[Node], inputs: Sequence[Value], target: Target | None = None
                  ) -> tuple[list[Tensor], dict[Value, Tensor]]:
    """Placeholders for `inputs` and the te tensor of every value computed by `nodes` (on a
    GPU `target`, in the form its schedules tile: ember.ops.gpu.gpu_compute; on a CPU one,
    MatMul/Gemm with B in the target's panels: ember.ops.dense.cpu_compute)."""
    from ember.ops.dense import DENSE_TAGS, cpu_compute
    from ember.ops.gpu import gpu_compute, is_gpu

    env: dict[Value, Tensor] = {}
    placeholders = []
    for i, v in enumerate(inputs):
        t = te.placeholder(v.type.shape, v.type.dtype, name=_ident(f"in{i}_{v.name}"))
        env[v] = t
        placeholders.append(t)
    for node in nodes:
        opdef = get_op(node.op)
        args = [env[v] if v is not None else None for v in node.inputs]
        compute = opdef.compute
        if target is not None and is_gpu(target):
            compute = gpu_compute(opdef)
        elif target is not None and opdef.name in DENSE_TAGS:
            compute = cpu_compute(opdef, target)  # B packed in the target's panels
        outs = compute(node.attrs, args)
        if len(outs) < len(node.outputs):
            raise EmberError(f"node '{node.name}' ({node.op}): compute gave {len(outs)} "
                             f"outputs, expected {len(node.outputs)}")
        for value, tensor in zip(node.outputs, outs):
            got = (tuple(int(d.value) for d in tensor.shape), str(tensor.dtype))  # type: ignore
            want = (value.type.shape, str(value.type.dtype))
            if got != want:
                raise EmberError(f"node '{node.name}' ({node.op}): compute made {got}, "
                                 f"inference said {want}")
            env[value] = tensor
    return placeholders, env


def group_task(opdef: OpDef, outs: Sequence[Tensor], target: Target,
               attrs: Mapping[str, Any] | None = None) -> Task:
    """What the knobs of a group whose anchor is `opdef` are chosen for."""
    return Task(tuple(outs), target, opdef.name, dict(attrs or {}))


def knob_family(opdef: OpDef, target: Target) -> type[Knobs]:
    """The knob class of the schedule for groups anchored at `opdef` on `target`."""
    from ember.ops.gpu import gpu_knobs, is_gpu

    return gpu_knobs(opdef) if is_gpu(target) else opdef.knob_family()


def schedule_for(opdef: OpDef, outs: Sequence[Tensor], target: Target,
                 knobs: Knobs | None = None) -> Schedule:
    """The schedule of a group whose anchor is `opdef`, with `knobs` (None: the default of
    the op's knob family for this group); bad knobs raise ScheduleError naming the op."""
    from ember.ops.gpu import is_gpu, schedule_gpu

    try:
        k = resolve_knobs(knob_family(opdef, target), knobs, outs, target, opdef.name)
        if is_gpu(target):  # GPU targets: the same computes, the schedules of ember.ops.gpu
            return schedule_gpu(opdef, outs, target, k)
        if opdef.schedule is not None:
            return opdef.schedule(outs, target, k)
        if opdef.pattern <= Pattern.INJECTIVE:
            return schedule_injective(outs, target, k)
        if opdef.pattern == Pattern.REDUCTION:
            return schedule_reduction(outs, target, k)
    except ScheduleError as error:
        text = str(error)
        raise ScheduleError(text if text.startswith("op '") else
                            f"op '{opdef.name}': {text}") from None
    raise EmberError(f"op '{opdef.name}' ({opdef.pattern.name}) needs its own schedule")


def group_knobs(nodes: Sequence[Node], inputs: Sequence[Value], outputs: Sequence[Value],
                target: Target | str = "llvm") -> tuple[Task, type[Knobs]]:
    """The Task of a group and its anchor's knob family (to choose knobs before lowering)."""
    tgt = Target(target)
    _, env = group_compute(nodes, inputs, tgt)
    anchor = anchor_of(nodes)
    opdef = get_op(anchor.op)
    return (group_task(opdef, [env[v] for v in outputs], tgt, anchor.attrs),
            knob_family(opdef, tgt))


# -- compile-time weight stages -------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class ConstantSplit:
    """A group's computation with its constant-only stages moved out.

    The main kernel's parameters are `inputs[i] for i in main_inputs`, then `packed`, then
    the outputs; the pack kernel's are `inputs[i] for i in pack_inputs`, then `sources`
    (the original stages, which compute what `packed` holds)."""

    outputs: tuple[Tensor, ...]        # the group outputs, reading `packed`
    main_inputs: tuple[int, ...]
    packed: tuple[Tensor, ...]         # new placeholders, one per precomputed stage
    copies: tuple[Tensor, ...]         # identity stages standing in for the originals
    pack_inputs: tuple[int, ...]
    sources: tuple[Tensor, ...]

    @property
    def empty(self) -> bool:
        return not self.packed


def _size(t: Tensor) -> int:
    return int(np.prod([int(d.value) for d in t.shape], dtype=np.int64))  # type: ignore


class _Retarget(Mutator):
    """Point tensor reads at rebuilt operations (one new Reduce per old one, so the
    outputs of a multi-output reduction keep sharing theirs)."""

    def __init__(self, ops: dict[int, Operation]) -> None:
        self.ops = ops
        self.reduces: dict[int, Expr] = {}

    def visit_TensorLoad(self, node: TensorLoad) -> Expr:
        indices = tuple(self.visit(i) for i in node.indices)
        op = self.ops.get(id(node.tensor.op))
        tensor = node.tensor if op is None else op.outputs[node.tensor.value_index]
        if tensor is node.tensor and all(a is b for a, b in zip(indices, node.indices)):
            return node
        return TensorLoad(tensor, indices)

    def visit_Reduce(self, node: Reduce) -> Expr:
        if id(node) not in self.reduces:
            self.reduces[id(node)] = self.generic_visit(node)
        return self.reduces[id(node)]


def _rebuild(order: Sequence[Operation], replaced: dict[int, Operation]) -> dict[int, Operation]:
    """New operations for every op downstream of `replaced` (old id -> new op)."""
    ops = dict(replaced)
    mutator = _Retarget(ops)
    for op in order:
        if id(op) in ops:
            continue
        if isinstance(op, ComputeOp):
            body = tuple(mutator.visit(b) for b in op.body)
            if any(a is not b for a, b in zip(body, op.body)):
                ops[id(op)] = ComputeOp(op.name, op.axis, body, op.tag)
        elif isinstance(op, ScanOp):
            init = tuple(ops[id(t.op)].outputs[t.value_index] if id(t.op) in ops else t
                         for t in op.init)
            update = tuple(ops[id(t.op)].outputs[t.value_index] if id(t.op) in ops else t
                           for t in op.update)
            if init != op.init or update != op.update:
                ops[id(op)] = ScanOp(op.name, op.scan_axis, init, update, op.state_placeholder)
        elif not isinstance(op, PlaceholderOp) and any(id(t.op) in ops
                                                       for t in op.input_tensors()):
            raise _CannotSplit()  # an extern op reads a precomputed stage
    return ops


class _CannotSplit(Exception):
    pass


def split_constant_stages(placeholders: Sequence[Tensor], outs: Sequence[Tensor],
                          constant: Sequence[bool]) -> ConstantSplit:
    """Move the stages that read only constant placeholders (and are not much larger than
    what they read) out of the computation of `outs`; see ConstantSplit."""
    everything = tuple(range(len(placeholders)))
    nothing = ConstantSplit(tuple(outs), everything, (), (), (), ())
    const_ph = {id(p.op) for p, c in zip(placeholders, constant) if c}
    if not const_ph:
        return nothing
    index = {id(p.op): i for i, p in enumerate(placeholders)}
    order = post_order([t.op for t in outs])
    reads: dict[int, frozenset[int]] = {}   # op -> constant placeholders it reads, if only those
    for op in order:
        if isinstance(op, PlaceholderOp):
            if id(op) in const_ph:
                reads[id(op)] = frozenset([index[id(op)]])
        elif isinstance(op, ComputeOp):
            inputs = op.input_tensors()
            if inputs and all(id(t.op) in reads for t in inputs):
                reads[id(op)] = frozenset().union(*(reads[id(t.op)] for t in inputs))
    consumers: dict[int, list[Operation]] = {}
    for op in order:
        for t in op.input_tensors():
            consumers.setdefault(id(t.op), []).append(op)
        if isinstance(op, ScanOp):
            for t in op.update:
                consumers.setdefault(id(t.op), []).append(op)
    out_ops = {id(t.op) for t in outs}
    chosen: list[ComputeOp] = []
    for op in order:
        if (not isinstance(op, ComputeOp) or id(op) not in reads or op.reduce_axis
                or op.num_outputs != 1 or id(op) in out_ops):
            continue
        if all(id(c) in reads for c in consumers.get(id(op), [])):
            continue  # only feeds other constant stages: precompute those instead
        read_size = sum(_size(placeholders[i]) for i in reads[id(op)])
        if _size(op.outputs[0]) > PRECOMPUTE_MAX_GROWTH * read_size:
            continue
        chosen.append(op)
    if not chosen:
        return nothing
    packed, copies, replaced = [], [], {}
    for op in chosen:
        src = op.outputs[0]
        holder = te.placeholder(tuple(int(d.value) for d in src.shape),  # type: ignore
                                src.dtype, name=f"{op.name}_pre")
        copy = te.compute(src.shape, lambda *i, h=holder: h[i], name=op.name, tag=op.tag)
        packed.append(holder)
        copies.append(copy)
        replaced[id(op)] = copy.op  # type: ignore[union-attr]
    try:
        ops = _rebuild(order, replaced)
    except _CannotSplit:
        return nothing
    new_outs = tuple(ops[id(t.op)].outputs[t.value_index] if id(t.op) in ops else t
                     for t in outs)
    still_read = {id(op) for op in post_order([t.op for t in new_outs])}
    main_inputs = tuple(i for i, p in enumerate(placeholders)
                        if not constant[i] or id(p.op) in still_read)
    pack_inputs = tuple(sorted(frozenset().union(*(reads[id(op)] for op in chosen))))
    return ConstantSplit(new_outs, main_inputs, tuple(packed), tuple(copies),  # type: ignore
                         pack_inputs, tuple(op.outputs[0] for op in chosen))


def inline_copies(s: Schedule, copies: Sequence[Tensor]) -> None:
    """Inline the identity stages standing in for precomputed ones (unless a schedule put
    another stage inside their loops)."""
    for copy in copies:
        stage = s[copy]
        if stage.is_output or any(other.attach_stage is stage for other in s.stages):
            continue
        stage.compute_inline()


def schedule_pack(sources: Sequence[Tensor], target: Target) -> Schedule:
    """Parallel, vectorized loops for the pack kernel (it runs once per compile)."""
    s = te.create_schedule([t.op for t in sources])
    inline_injective(s)
    for t in sources:
        schedule_flat(s[t], target, str(t.dtype))
    return s


@dataclass(frozen=True, eq=False)
class GroupKernels:
    """The lowered kernels of a group: `main`, and `pack` when stages were precomputed, and
    the knobs its schedule ran with."""

    main: PrimFunc
    pack: PrimFunc | None
    split: ConstantSplit
    knobs: Knobs


def lower_group_kernels(nodes: Sequence[Node], inputs: Sequence[Value],
                        outputs: Sequence[Value], name: str, target: Target | str = "llvm",
                        constant: Sequence[bool] = (), knobs: Knobs | None = None
                        ) -> GroupKernels:
    """The main kernel `name` (and `name` + "_pack") of a group, before the TIR pipeline;
    its anchor's schedule runs with `knobs` (None: the default for the group)."""
    from ember.te.lower import lower_schedule

    tgt = Target(target)
    placeholders, env = group_compute(nodes, inputs, tgt)
    outs = [env[v] for v in outputs]
    split = split_constant_stages(placeholders, outs, constant or [False] * len(inputs))
    anchor = anchor_of(nodes)
    opdef = get_op(anchor.op)
    if knobs is None:
        task = group_task(opdef, split.outputs, tgt, anchor.attrs)
        knobs = knob_family(opdef, tgt).default(task)
    s = schedule_for(opdef, list(split.outputs), tgt, knobs)
    inline_copies(s, split.copies)
    args = [placeholders[i] for i in split.main_inputs] + list(split.packed) + list(split.outputs)
    from ember.ops.gpu import is_gpu

    main = lower_schedule(s, args, name, gpu=is_gpu(tgt))
    pack = None
    if not split.empty:
        ps = schedule_pack(split.sources, tgt)
        pack = lower_schedule(ps, [placeholders[i] for i in split.pack_inputs]
                              + list(split.sources), name + PACK_SUFFIX)
    return GroupKernels(main, pack, split, knobs)


def build_group(name: str, nodes: Sequence[Node], inputs: Sequence[Value],
                outputs: Sequence[Value], target: Target | str = "llvm",
                knobs: Knobs | None = None) -> Module:
    """One compiled kernel computing `outputs` from `inputs`; arguments: inputs, outputs."""
    tgt = Target(target)
    placeholders, env = group_compute(nodes, inputs, tgt)
    outs = [env[v] for v in outputs]
    anchor = get_op(anchor_of(nodes).op)
    s = schedule_for(anchor, outs, tgt, knobs)
    return build(s, [*placeholders, *outs], target=tgt, name=_ident(name))


def build_prepacked(name: str, nodes: Sequence[Node], inputs: Sequence[Value],
                    outputs: Sequence[Value], constant: Sequence[bool],
                    target: Target | str = "llvm", knobs: Knobs | None = None
                    ) -> tuple[Module, Module | None, ConstantSplit]:
    """The main and pack kernels of a group whose inputs flagged in `constant` are weights:
    call `pack(*[inputs[i] for i in split.pack_inputs], *packed)` once, then
    `main(*[inputs[i] for i in split.main_inputs], *packed, *outputs)`."""
    kernels = lower_group_kernels(nodes, inputs, outputs, _ident(name), target, constant,
                                  knobs)
    main = build(kernels.main, target=target)
    pack = build(kernels.pack, target=target) if kernels.pack is not None else None
    return main, pack, kernels.split


def run_op(op: str, arrays: Sequence[np.ndarray | None], attrs: Mapping[str, Any] | None = None,
           target: Target | str = "llvm", constant: Sequence[int] = (),
           knobs: Knobs | None = None) -> list[np.ndarray]:
    """Compile and run one op on numpy arrays (attr-inputs go in `attrs`); the inputs at
    positions `constant` are treated as weights (their constant-only stages precomputed);
    the op's schedule runs with `knobs` (None: its default)."""
    opdef = get_op(op)
    full = opdef.complete_attrs(attrs or {}, op)
    values: list[Value | None] = []
    for i, a in enumerate(arrays):
        values.append(None if a is None else Value(f"x{i}", tensor_type(a.shape, a.dtype)))
    types: list[TensorType] = opdef.infer(full, [v.type if v else None for v in values])
    outputs = [Value(f"y{i}", t) for i, t in enumerate(types)]
    node = Node(op, op.lower(), tuple(values), tuple(outputs), full)
    present = [v for v in values if v is not None]
    name = f"op_{op.lower()}"  # not "tanh", "exp", ...: a kernel must not shadow libm
    results = [np.zeros(t.shape, t.dtype.numpy) for t in types]
    # np.asarray keeps 0-d arrays 0-d (np.ascontiguousarray would make them 1-d)
    given = [np.asarray(a, order="C") for a in arrays if a is not None]
    if not constant:
        module = build_group(name, [node], present, outputs, target, knobs)
        module(*given, *results)
        return results
    positions = [i for i, a in enumerate(arrays) if a is not None]
    flags = [p in constant for p in positions]
    main, pack, split = build_prepacked(name, [node], present, outputs, flags, target, knobs)
    packed = [np.zeros([int(d.value) for d in t.shape], str(t.dtype))  # type: ignore
              for t in split.packed]
    if pack is not None:
        pack(*[given[i] for i in split.pack_inputs], *packed)
    main(*[given[i] for i in split.main_inputs], *packed, *results)
    return results
