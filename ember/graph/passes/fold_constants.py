"""Constant folding: nodes whose inputs are all constants run at compile time (ember's own JIT).

The rule for what to fold, in order:
- never ops whose results change from run to run (RandomNormal, Bernoulli, ...), nor ops
  missing from the op table (they cannot be compiled);
- never when the results would exceed MAX_FOLD_BYTES (64 MB): the model would grow by that
  much, and the kernel that makes them is cheaper to keep;
- OUT_FUSABLE and OPAQUE ops (conv, matmul, rnn, ...) only when their results are at most
  MAX_HEAVY_FOLD_BYTES (1 MB): at compile time they run through one untuned kernel, so big
  ones would cost seconds, and shapes never depend on them (shape-deciding inputs are
  attributes already).
Everything else (reshapes of weights, Unsqueeze/Squeeze/Transpose of constants, Range,
ConstantOfShape, elementwise math on constants) folds, except nodes computing graph outputs
(the executor fills outputs with kernels). The caller passes the evaluator that runs a
node (ember.lowering.evaluate.evaluate_node compiles it with ember's own kernels).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ember.graph.ir import Graph, Node
from ember.graph.passes.rewrite import (
    NONDETERMINISTIC,
    ValueMap,
    apply_map,
    has_op,
    make_constant,
    op_pattern,
)
from ember.ops.registry import Pattern

MAX_FOLD_BYTES = 64 << 20
MAX_HEAVY_FOLD_BYTES = 1 << 20

# runs one node on its constant inputs (ember.lowering.evaluate.evaluate_node: the graph
# layer does not compile kernels itself, so the caller hands it the means)
Evaluator = Callable[[Node], list[np.ndarray]]


def should_fold(node: Node) -> bool:
    """Whether `node` (all of whose inputs are constants) is evaluated at compile time."""
    if node.op in NONDETERMINISTIC or not has_op(node.op) or "graph" in node.attrs:
        return False
    if node.op == "Dropout" and node.attrs.get("training_mode"):
        return False
    out_bytes = sum(v.type.nbytes for v in node.outputs)
    if out_bytes > MAX_FOLD_BYTES:
        return False
    heavy = op_pattern(node.op) >= Pattern.OUT_FUSABLE
    return not heavy or out_bytes <= MAX_HEAVY_FOLD_BYTES


def _from_types(node: Node) -> np.ndarray | None:
    """Shape and Size of any tensor are known from its type."""
    x = node.inputs[0] if node.inputs else None
    if x is None or node.op not in ("Shape", "Size"):
        return None
    if node.op == "Size":
        return np.array(x.type.size, np.int64)
    start, end = node.attrs.get("start", 0), node.attrs.get("end")
    return np.array(x.type.shape[start:end], np.int64)


def fold_constants(graph: Graph, evaluate: Evaluator | None = None) -> Graph:
    """Replace nodes whose inputs are all constants (run by `evaluate`), and Shape / Size
    nodes (known from types), by constants; without `evaluate` only the latter fold.

    Nodes that compute graph outputs stay: the executor fills outputs with kernels.
    """
    vmap = ValueMap()
    outputs = set(graph.outputs)
    kept: list[Node] = []
    for node in graph.nodes:
        node = vmap.apply_node(node)
        known = _from_types(node)
        out = node.outputs[0]
        if known is not None and known.size == out.type.size and out not in outputs:
            array = known.reshape(out.type.shape).astype(out.type.dtype.numpy)
            vmap.set(out, make_constant(out.name, array))
            continue
        if evaluate is None or not all(v is None or v.is_constant for v in node.inputs) \
                or not should_fold(node) or any(v in outputs for v in node.outputs):
            kept.append(node)
            continue
        for value, array in zip(node.outputs, evaluate(node)):
            vmap.set(value, make_constant(value.name, array.astype(value.type.dtype.numpy)))
    if not vmap:
        return graph
    return apply_map(graph, kept, vmap)


def constant_folder(evaluate: Evaluator | None) -> Callable[[Graph], Graph]:
    """fold_constants as a one-argument pass bound to `evaluate`."""
    def fold_constants_with(graph: Graph) -> Graph:
        return fold_constants(graph, evaluate)

    fold_constants_with.__name__ = "fold_constants"
    return fold_constants_with
