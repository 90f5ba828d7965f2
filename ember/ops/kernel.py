"""Turn a group of graph nodes into one kernel: te computes chained, the anchor's schedule,
then ember.build. Also `run_op`, the one-op test helper.
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

import numpy as np

from ember import te
from ember.errors import EmberError
from ember.graph.ir import Node, TensorType, Value, tensor_type
from ember.ops.generic import schedule_injective, schedule_reduction
from ember.ops.registry import OpDef, Pattern, get_op
from ember.runtime.module import Module
from ember.target import Target
from ember.te.schedule import Schedule
from ember.te.tensor import Tensor


def _ident(name: str) -> str:
    return re.sub(r"[^0-9a-zA-Z_]", "_", name) or "t"


def anchor_of(nodes: Sequence[Node]) -> Node:
    """The node whose schedule drives the group: the one with the highest pattern."""
    return max(nodes, key=lambda n: int(get_op(n.op).pattern))


def group_compute(nodes: Sequence[Node], inputs: Sequence[Value]
                  ) -> tuple[list[Tensor], dict[Value, Tensor]]:
    """Placeholders for `inputs` and the te tensor of every value computed by `nodes`."""
    env: dict[Value, Tensor] = {}
    placeholders = []
    for i, v in enumerate(inputs):
        t = te.placeholder(v.type.shape, v.type.dtype, name=_ident(f"in{i}_{v.name}"))
        env[v] = t
        placeholders.append(t)
    for node in nodes:
        opdef = get_op(node.op)
        args = [env[v] if v is not None else None for v in node.inputs]
        outs = opdef.compute(node.attrs, args)
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


def schedule_for(opdef: OpDef, outs: Sequence[Tensor], target: Target) -> Schedule:
    if opdef.schedule is not None:
        return opdef.schedule(outs, target)
    if opdef.pattern <= Pattern.INJECTIVE:
        return schedule_injective(outs, target)
    if opdef.pattern == Pattern.REDUCTION:
        return schedule_reduction(outs, target)
    raise EmberError(f"op '{opdef.name}' ({opdef.pattern.name}) needs its own schedule")


def build_group(name: str, nodes: Sequence[Node], inputs: Sequence[Value],
                outputs: Sequence[Value], target: Target | str = "llvm") -> Module:
    """One compiled kernel computing `outputs` from `inputs`; arguments: inputs, outputs."""
    tgt = Target(target)
    placeholders, env = group_compute(nodes, inputs)
    outs = [env[v] for v in outputs]
    anchor = get_op(anchor_of(nodes).op)
    s = schedule_for(anchor, outs, tgt)
    import ember

    # a prefix keeps kernel symbols clear of libc/libm names (a kernel "exp" would shadow exp)
    return ember.build(s, [*placeholders, *outs], target=tgt, name=f"k_{_ident(name)}")


def run_op(op: str, arrays: Sequence[np.ndarray | None], attrs: Mapping[str, Any] | None = None,
           target: Target | str = "llvm") -> list[np.ndarray]:
    """Compile and run one op on numpy arrays (attr-inputs go in `attrs`)."""
    opdef = get_op(op)
    full = opdef.complete_attrs(attrs or {}, op)
    values: list[Value | None] = []
    for i, a in enumerate(arrays):
        values.append(None if a is None else Value(f"x{i}", tensor_type(a.shape, a.dtype)))
    types: list[TensorType] = opdef.infer(full, [v.type if v else None for v in values])
    outputs = [Value(f"y{i}", t) for i, t in enumerate(types)]
    node = Node(op, op.lower(), tuple(values), tuple(outputs), full)
    present = [v for v in values if v is not None]
    module = build_group(op.lower(), [node], present, outputs, target)
    results = [np.zeros(t.shape, t.dtype.numpy) for t in types]
    # np.asarray keeps 0-d arrays 0-d (np.ascontiguousarray would make them 1-d)
    module(*[np.asarray(a, order="C") for a in arrays if a is not None], *results)
    return results
