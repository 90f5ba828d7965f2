"""Fused groups as kernels: structure keys, and the graph pipeline's entry point.

`optimize(graph, opt_level, target)` runs ember.graph.pipeline.optimize_graph and wraps any
node it left unfused into a one-node "Fused" group; `fused_groups` turns every Fused node
into a FusedGroup, the unit the rest of lowering compiles.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ember.errors import EmberError
from ember.graph.ir import Graph, Node, TensorType, Value
from ember.graph.memory import plan_memory
from ember.graph.pipeline import optimize_graph
from ember.lowering.evaluate import evaluate_node
from ember.lowering.kernel import group_compute, split_constant_stages
from ember.ops.knobs import Knobs
from ember.ops.registry import get_op
from ember.target import Target

ALIGN = 64


@dataclass(frozen=True)
class WeightStages:
    """The interface of a group whose weight-only stages are precomputed: the kernel reads
    inputs `main_inputs` then one packed tensor per `packed` type; the pack kernel
    `<symbol>_pack` reads inputs `pack_inputs` and writes the packed tensors."""

    main_inputs: tuple[int, ...]
    pack_inputs: tuple[int, ...]
    packed: tuple[tuple[str, TensorType], ...]   # (name, type) of each packed tensor


@dataclass(frozen=True, eq=False)
class FusedGroup:
    """One fused node as a kernel: inner nodes, kernel parameters and their outer values."""

    name: str
    nodes: tuple[Node, ...]
    inputs: tuple[Value, ...]          # kernel parameters (inner values), then `outputs`
    outputs: tuple[Value, ...]
    outer_inputs: tuple[Value, ...]    # what the caller passes for each parameter
    outer_outputs: tuple[Value, ...]
    key: str                           # structure hash: equal keys compile to equal code
    anchor: str
    pattern: str
    constants: tuple[bool, ...] = ()   # per input: a weight whose weight-only stages are
                                       # precomputed at compile time; () when none are
    weight_stages: WeightStages | None = None
    knobs: Knobs | None = None         # the anchor schedule's knobs (None: its default);
                                       # set by `with_knobs`, which folds them into `key`
    weights: tuple[bool, ...] = ()     # per input: a model constant, recorded by
                                       # `without_weights`, which makes them plain values

    @property
    def symbol(self) -> str:
        return f"k_{self.key[:24]}"

    def describe(self) -> str:
        return " -> ".join(n.op for n in self.nodes)

    def node_names(self) -> str:
        """The names of the group's nodes (the model's node names), for messages."""
        return ", ".join(f"'{n.name}'" for n in self.nodes)


def wrap_node(node: Node) -> Node:
    """A one-node Fused group around `node`."""
    inputs = tuple(dict.fromkeys(v for v in node.inputs if v is not None))
    sub = Graph(node.name, inputs, node.outputs, (node,))
    pattern = get_op(node.op).pattern.name
    return Node("Fused", node.name, inputs, node.outputs,
                {"graph": sub, "anchor": node.name, "pattern": pattern})


def optimize(graph: Graph, opt_level: int, target: Any = None) -> Graph:
    """The graph pipeline, then every node left unfused inside a one-node Fused group."""
    graph = optimize_graph(graph, opt_level, target=target, evaluate=evaluate_node)
    if all(n.op == "Fused" for n in graph.nodes):
        return graph
    nodes = tuple(n if n.op == "Fused" else wrap_node(n) for n in graph.nodes)
    return Graph(graph.name, graph.inputs, graph.outputs, nodes)


def _attr_key(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return ("array", str(value.dtype), value.shape,
                hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest())
    if isinstance(value, (list, tuple)):
        return tuple(_attr_key(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _attr_key(v)) for k, v in value.items()))
    if isinstance(value, float):
        return ("float", value.hex())
    if isinstance(value, Graph):
        return ("graph", tuple(_node_key(n, {}) for n in value.nodes))
    return value


def _node_key(node: Node, ids: dict[Value, Any]) -> str:
    refs = [None if v is None else ids.get(v, ("value", str(v.type))) for v in node.inputs]
    attrs = tuple(sorted((k, _attr_key(v)) for k, v in node.attrs.items()))
    return repr((node.op, refs, attrs, [str(v.type) for v in node.outputs]))


def group_key(nodes: tuple[Node, ...], inputs: tuple[Value, ...],
              outputs: tuple[Value, ...]) -> str:
    """A hash of what the kernel computes: ops, attributes, types and wiring, not names."""
    ids: dict[Value, Any] = {v: ("in", i, str(v.type)) for i, v in enumerate(inputs)}
    parts = []
    for k, node in enumerate(nodes):
        parts.append(_node_key(node, ids))
        for j, v in enumerate(node.outputs):
            ids.setdefault(v, ("node", k, j))
    parts.append(repr([ids[v] for v in outputs]))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def constants_key(key: str, constants: tuple[bool, ...]) -> str:
    """The structure key of a kernel whose inputs flagged in `constants` are weights."""
    if not any(constants):
        return key
    flags = "".join("c" if c else "-" for c in constants)
    return hashlib.sha256(f"{key}/{flags}".encode()).hexdigest()


def fused_group(node: Node, prepack: bool = True, target: Target | None = None) -> FusedGroup:
    """The kernel of one Fused node; with `prepack`, constant inputs are marked as weights
    (their packed form is the one `target`'s computes read: ember.lowering.kernel)."""
    if node.op != "Fused" or not isinstance(node.attrs.get("graph"), Graph):
        raise EmberError(f"node '{node.name}' ({node.op}) is not a fused group")
    sub: Graph = node.attrs["graph"]
    outer_in = [v for v in node.inputs if v is not None]
    if len(sub.inputs) != len(outer_in) or len(sub.outputs) != len(node.outputs):
        raise EmberError(f"fused group '{node.name}': sub-graph has {len(sub.inputs)} inputs "
                         f"and {len(sub.outputs)} outputs, the node {len(outer_in)} and "
                         f"{len(node.outputs)}")
    inputs, outer = list(sub.inputs), list(outer_in)
    produced = {v for n in sub.nodes for v in n.outputs}
    for n in sub.nodes:  # constants used inside but not passed in become parameters too
        for v in n.inputs:
            if v is not None and v.is_constant and v not in produced and v not in inputs:
                inputs.append(v)
                outer.append(v)
    for v in sub.outputs:
        if v not in produced:
            raise EmberError(f"fused group '{node.name}': output '{v.name}' is not computed "
                             "inside the group")
    anchor = str(node.attrs.get("anchor", ""))
    pattern = str(node.attrs.get("pattern", ""))
    constants = tuple(v.is_constant for v in outer)
    stages = weight_stages(sub.nodes, inputs, sub.outputs, constants, target) if prepack \
        else None
    if stages is None:
        constants = ()
    key = constants_key(group_key(sub.nodes, tuple(inputs), sub.outputs), constants)
    return FusedGroup(node.name, sub.nodes, tuple(inputs), sub.outputs, tuple(outer),
                      node.outputs, key, anchor, pattern, constants, stages)


def weight_stages(nodes: tuple[Node, ...], inputs: list[Value], outputs: tuple[Value, ...],
                  constants: tuple[bool, ...], target: Target | None = None
                  ) -> WeightStages | None:
    """What the group's kernel reads when its weight-only stages are precomputed (None when
    it has none: no constant input, or nothing but plain reads of them)."""
    if not any(constants):
        return None
    placeholders, env = group_compute(nodes, inputs, target)
    split = split_constant_stages(placeholders, [env[v] for v in outputs], constants)
    if split.empty:
        return None
    packed = tuple((t.name, TensorType(tuple(int(d.value) for d in t.shape),  # type: ignore
                                       t.dtype)) for t in split.packed)
    return WeightStages(split.main_inputs, split.pack_inputs, packed)


def without_weights(group: FusedGroup) -> FusedGroup:
    """The same kernel with constant parameters as plain typed values (cheap to send to a
    worker process: the kernel never reads constant data, only its type)."""
    swap = {v: Value(v.name, v.type) for v in group.inputs if v.is_constant}
    if not swap:
        return group

    def sub(v: Value | None) -> Value | None:
        return swap.get(v, v) if v is not None else None

    nodes = tuple(Node(n.op, n.name, tuple(sub(v) for v in n.inputs), n.outputs, n.attrs)
                  for n in group.nodes)
    inputs = tuple(swap.get(v, v) for v in group.inputs)
    return replace(group, nodes=nodes, inputs=inputs, outer_inputs=(), outer_outputs=(),
                   weights=tuple(v.is_constant for v in group.inputs))


def knobs_key(key: str, knobs: Knobs) -> str:
    """The key of a kernel whose schedule runs with `knobs`: equal knobs, equal code."""
    values = json.dumps(knobs.to_dict(), sort_keys=True, default=str)
    return hashlib.sha256(f"{key}/{knobs.family()}/{values}".encode()).hexdigest()


def with_knobs(group: FusedGroup, knobs: Knobs) -> FusedGroup:
    """The group compiled with `knobs` (its key, hence its symbol and cache entry, too)."""
    return replace(group, knobs=knobs, key=knobs_key(group.key, knobs))


def fused_groups(graph: Graph, prepack: bool = True, target: Target | None = None
                 ) -> list[FusedGroup]:
    return [fused_group(n, prepack, target) for n in graph.nodes]


__all__ = ["ALIGN", "FusedGroup", "WeightStages", "fused_groups", "knobs_key", "optimize",
           "plan_memory", "with_knobs", "without_weights"]
