"""Common subexpression elimination: merge equal constants, then equal (op, attrs, inputs) nodes."""

from __future__ import annotations

from typing import Any

from ember.graph.ir import Graph, Node, Value
from ember.graph.passes.rewrite import (
    NONDETERMINISTIC,
    ValueMap,
    apply_map,
    constant_key,
    freeze_attrs,
)


def eliminate_common_subexpressions(graph: Graph) -> Graph:
    """Merge identical constants (dtype, shape, bytes) and nodes with equal op, attrs, inputs.

    A node whose outputs include a graph output is kept (the graph's outputs keep their
    Values), though later nodes may still be merged into it.
    """
    vmap = ValueMap()
    outputs = set(graph.outputs)
    seen_constants: dict[tuple[str, tuple[int, ...], str], Value] = {}
    for v in graph.constants():
        if v in outputs:
            continue
        first = seen_constants.setdefault(constant_key(v), v)
        if first is not v:
            vmap.set(v, first)
    seen_nodes: dict[Any, Node] = {}
    kept: list[Node] = []
    for node in graph.nodes:
        node = vmap.apply_node(node)
        if node.op in NONDETERMINISTIC or "graph" in node.attrs:
            kept.append(node)
            continue
        key = (node.op, freeze_attrs(node.attrs), tuple(id(v) for v in node.inputs),
               tuple((v.type.shape, str(v.type.dtype)) for v in node.outputs))
        first = seen_nodes.get(key)
        if first is None or any(v in outputs for v in node.outputs):
            seen_nodes.setdefault(key, node)
            kept.append(node)
            continue
        for old, new in zip(node.outputs, first.outputs):
            vmap.set(old, new)
    if not vmap:
        return graph
    return apply_map(graph, kept, vmap)
