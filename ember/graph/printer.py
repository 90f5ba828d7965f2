"""Readable text of a graph: one line per node, fused groups with their inner nodes."""

from __future__ import annotations

from typing import Any

from ember.graph.ir import Graph, Node, Value


def _value(v: Value | None) -> str:
    if v is None:
        return "_"
    return f"%{v.name}" if not v.is_constant else f"$%{v.name}"


def _attr(value: Any) -> str:
    if hasattr(value, "nodes") and hasattr(value, "outputs"):
        return f"<graph {len(value.nodes)} nodes>"
    if isinstance(value, float):
        return f"{value:g}"
    return repr(value) if isinstance(value, str) else str(value)


def node_to_str(node: Node, depth: int = 1) -> list[str]:
    pad = "  " * depth
    outs = ", ".join(f"%{v.name}: {v.type}" for v in node.outputs)
    ins = ", ".join(_value(v) for v in node.inputs)
    attrs = ", ".join(f"{k}={_attr(v)}" for k, v in sorted(node.attrs.items())
                      if k != "graph")
    attr_text = f" {{{attrs}}}" if attrs else ""
    lines = [f"{pad}{outs} = {node.op}({ins}){attr_text}  # {node.name}"]
    inner = node.attrs.get("graph")
    if isinstance(inner, Graph):
        for sub in inner.nodes:
            lines += node_to_str(sub, depth + 2)
    return lines


def graph_to_str(graph: Graph) -> str:
    params = ", ".join(f"%{v.name}: {v.type}" for v in graph.inputs)
    lines = [f"graph {graph.name}({params}):"]
    for node in graph.nodes:
        lines += node_to_str(node)
    lines.append(f"  return {', '.join(_value(v) for v in graph.outputs)}")
    return "\n".join(lines)
