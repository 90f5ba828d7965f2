"""Merge chains of shape-only ops (Reshape, Flatten, Squeeze, Unsqueeze) into one Reshape."""

from __future__ import annotations

from typing import Any

from ember.graph.ir import Graph, Node, Value
from ember.graph.passes.rewrite import ValueMap, apply_map, has_op

RESHAPES = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze"})


def reshape_attrs(shape: tuple[int, ...]) -> dict[str, Any]:
    """Attributes of a Reshape to exactly `shape` (allowzero keeps a literal 0 dimension)."""
    attrs: dict[str, Any] = {"shape": tuple(shape), "allowzero": 1 if 0 in shape else 0}
    if has_op("Reshape"):
        from ember.ops.registry import get_op

        attrs = get_op("Reshape").complete_attrs(attrs, "reshape")
    return attrs


def merge_reshapes(graph: Graph) -> Graph:
    """Replace reshape-of-reshape by one Reshape of the original data to the final shape.

    Row-major reshapes compose: the element order never changes, so only the last shape
    matters. The inner reshape stays if something else reads it (dead code removes it else).
    """
    if not has_op("Reshape"):
        return graph
    source: dict[Value, Value] = {}   # output of a shape-only node -> the data it reshapes
    changed = False
    nodes: list[Node] = []
    for node in graph.nodes:
        x = node.inputs[0] if node.inputs else None
        if node.op not in RESHAPES or x is None or len(node.outputs) != 1:
            nodes.append(node)
            continue
        out = node.outputs[0]
        origin = source.get(x)
        if origin is not None:
            node = Node("Reshape", node.name, (origin,), (out,), reshape_attrs(out.type.shape))
            changed = True
            x = origin
        source[out] = x
        nodes.append(node)
    if not changed:
        return graph
    return apply_map(graph, nodes, ValueMap())
