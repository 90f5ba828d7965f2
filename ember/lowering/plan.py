"""The execution plan: every kernel argument of every fused group resolved to a slot
(graph input, graph output, workspace offset or constant offset)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ember.errors import EmberError
from ember.graph.ir import Graph, Value
from ember.lowering.groups import FusedGroup
from ember.runtime.plan import ExecPlan, KernelCall, Slot, TensorSpec

__all__ = ["exec_plan"]


def exec_plan(graph: Graph, groups: Sequence[FusedGroup], memory: Any,
              constant_offsets: Mapping[Value, int], constant_bytes: int) -> ExecPlan:
    """Resolve every kernel argument to a slot: input, output, workspace or constant."""
    input_index = {v: i for i, v in enumerate(graph.inputs)}
    produced = {v for g in groups for v in g.outer_outputs}
    output_index: dict[Value, int] = {}
    for i, v in enumerate(graph.outputs):
        if v in produced:
            output_index.setdefault(v, i)

    def slot(v: Value) -> Slot:
        if v in input_index:
            return Slot("input", input_index[v])
        if v in constant_offsets:
            return Slot("constant", constant_offsets[v])
        if v in output_index:
            return Slot("output", output_index[v])
        if v not in memory.offsets:
            raise EmberError(f"the memory plan has no place for value '{v.name}' ({v.type})")
        return Slot("workspace", int(memory.offsets[v]))

    calls = []
    for g in groups:
        values = [*g.outer_inputs, *g.outer_outputs]
        calls.append(KernelCall(g.name, g.symbol, tuple(slot(v) for v in values),
                                tuple(str(v.type.dtype) for v in values),
                                tuple(v.type.shape for v in values), g.anchor, g.pattern,
                                tuple(v.name for v in values), len(g.outer_inputs)))
    sources = [slot(v) for v in graph.outputs]

    def spec(v: Value) -> TensorSpec:
        return TensorSpec(v.name, v.type.shape, str(v.type.dtype))

    return ExecPlan(graph.name, tuple(spec(v) for v in graph.inputs),
                    tuple(spec(v) for v in graph.outputs), tuple(sources), tuple(calls),
                    int(memory.workspace_bytes), constant_bytes,
                    int(getattr(memory, "naive_bytes", 0)),
                    int(getattr(memory, "peak_live_bytes", 0)))
