"""Compose consecutive Transposes into one, and drop the pair when the result is the identity."""

from __future__ import annotations

import dataclasses

from ember.graph.ir import Graph, Node, Value
from ember.graph.passes.rewrite import ValueMap, apply_map, drop_alias, produced_values


def permutation(node: Node) -> tuple[int, ...]:
    """A Transpose's perm; ONNX's default reverses the axes."""
    perm = node.attrs.get("perm")
    if perm is None:
        x = node.inputs[0]
        assert x is not None
        return tuple(reversed(range(x.type.ndim)))
    return tuple(int(p) for p in perm)


def cancel_transposes(graph: Graph) -> Graph:
    """transpose(transpose(x, p), q) -> transpose(x, r) with r[k] = p[q[k]]; no node if r = id.

    out[i] = y[i @ q^-1] and y[j] = x[j @ p^-1], so out's axis k is x's axis p[q[k]].
    The inner Transpose stays while something else reads it.
    """
    vmap = ValueMap()
    produced = produced_values(graph)
    source: dict[Value, tuple[Value, tuple[int, ...]]] = {}  # transpose output -> (x, perm)
    changed = False
    nodes: list[Node] = []
    for node in graph.nodes:
        node = vmap.apply_node(node)
        x = node.inputs[0] if node.inputs else None
        if node.op != "Transpose" or x is None:
            nodes.append(node)
            continue
        perm = permutation(node)
        if x in source:
            origin, inner = source[x]
            perm = tuple(inner[q] for q in perm)
            x = origin
        out = node.outputs[0]
        if perm == tuple(range(len(perm))) and drop_alias(graph, vmap, x, out, produced):
            changed = True
            continue
        if x is not node.inputs[0]:
            node = dataclasses.replace(node, inputs=(x,), attrs={**node.attrs, "perm": perm})
            changed = True
        source[vmap.resolve(node.outputs[0])] = (x, perm)
        nodes.append(node)
    if not changed:
        return graph
    return apply_map(graph, nodes, vmap)
