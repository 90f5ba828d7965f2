"""Remove nodes that only copy their input: Identity, inference Dropout, no-op casts, x + 0, ..."""

from __future__ import annotations

import numpy as np

from ember.graph.ir import Graph, Node, Value
from ember.graph.passes.rewrite import (
    ValueMap,
    apply_map,
    drop_alias,
    make_constant,
    produced_values,
    scalar_value,
)

# op -> (neutral constant, which inputs may hold it): x + 0, 0 + x, x - 0, x * 1, 1 * x, x / 1
_NEUTRAL = {"Add": (0.0, (0, 1)), "Sub": (0.0, (1,)), "Mul": (1.0, (0, 1)), "Div": (1.0, (1,)),
            "Pow": (1.0, (1,))}


def copied_input(node: Node) -> Value | None:
    """The input whose contents `node`'s first output equals, or None."""
    out = node.outputs[0]
    match node.op:
        case "Identity":
            return node.inputs[0]
        case "Dropout" if not node.attrs.get("training_mode"):
            return node.inputs[0]
        case "Reshape" | "Flatten" | "Squeeze" | "Unsqueeze" | "Expand" | "Cast" | "CastLike":
            x = node.inputs[0]
            return x if x is not None and x.type == out.type else None
        case "Transpose":
            x = node.inputs[0]
            perm = node.attrs.get("perm")
            if x is None or perm is None:  # default perm reverses: identity only for rank <= 1
                return x if x is not None and x.type.ndim <= 1 else None
            return x if tuple(perm) == tuple(range(len(perm))) else None
        case op if op in _NEUTRAL and len(node.inputs) == 2:
            neutral, positions = _NEUTRAL[op]
            for k in positions:
                other = node.inputs[1 - k]
                if scalar_value(node.inputs[k]) == neutral and other is not None \
                        and other.type == out.type:
                    return other
    return None


def remove_identities(graph: Graph) -> Graph:
    """Drop nodes whose (first) output equals one of their inputs; readers read the input.

    Dropout's mask output, when used, becomes a constant of ones (inference keeps all).
    A node is kept when both its input and output must stay distinct graph-level Values.
    """
    vmap = ValueMap()
    produced = produced_values(graph)
    consumers = graph.consumers()
    kept: list[Node] = []
    for node in graph.nodes:
        node = vmap.apply_node(node)
        src = copied_input(node)
        extra = [v for v in node.outputs[1:] if v in consumers or v in graph.outputs]
        if extra and (node.op != "Dropout" or any(v in graph.outputs for v in extra)):
            src = None  # other outputs are used (a graph output cannot become a constant)
        if src is None or not drop_alias(graph, vmap, src, node.outputs[0], produced):
            kept.append(node)
            continue
        for mask in extra:  # Dropout's mask in inference: all true
            ones = np.ones(mask.type.shape, mask.type.dtype.numpy)
            vmap.set(mask, make_constant(mask.name, ones))
    if not vmap:
        return graph
    return apply_map(graph, kept, vmap)
