"""Dead code elimination: drop nodes none of whose outputs reach a graph output."""

from __future__ import annotations

from ember.graph.ir import Graph, Node, Value, rebuild


def eliminate_dead_code(graph: Graph) -> Graph:
    """Drop nodes whose outputs are all unused (a multi-output node stays if any is used)."""
    live: set[Value] = set(graph.outputs)
    kept: list[Node] = []
    for node in reversed(graph.nodes):
        if not any(v in live for v in node.outputs):
            continue
        kept.append(node)
        live.update(v for v in node.inputs if v is not None)
    if len(kept) == len(graph.nodes):
        return graph
    return rebuild(graph, reversed(kept))
