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
(the executor fills outputs with kernels). Kernels are cached per process by (op,
attributes, input types), so repeated folds of one shape compile once.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from ember.graph.ir import Graph, Node, Value
from ember.graph.passes.rewrite import (
    NONDETERMINISTIC,
    ValueMap,
    apply_map,
    freeze_attrs,
    has_op,
    make_constant,
    op_pattern,
)
from ember.ops.registry import Pattern

MAX_FOLD_BYTES = 64 << 20
MAX_HEAVY_FOLD_BYTES = 1 << 20

_KERNELS: dict[Any, Any] = {}
_LOCK = threading.Lock()


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


def evaluate_node(node: Node, target: str = "llvm") -> list[np.ndarray]:
    """Run one node on its constant inputs with a compiled (and cached) kernel."""
    from ember.graph.ir import tensor_type
    from ember.lowering.kernel import build_group

    present = [v for v in node.inputs if v is not None]
    assert all(v.data is not None for v in present)
    key = (node.op, freeze_attrs(node.attrs),
           tuple(None if v is None else (v.type.shape, str(v.type.dtype)) for v in node.inputs),
           target)
    with _LOCK:
        module = _KERNELS.get(key)
    if module is None:
        # a node over fresh placeholder Values, so the cache entry holds no model constants
        ins = tuple(None if v is None else Value(f"x{i}", tensor_type(v.type.shape,
                                                                       v.type.dtype))
                    for i, v in enumerate(node.inputs))
        outs = tuple(Value(f"y{i}", v.type) for i, v in enumerate(node.outputs))
        fresh = Node(node.op, node.name, ins, outs, dict(node.attrs))
        module = build_group(f"fold_{node.op}", [fresh], [v for v in ins if v is not None],
                             list(outs), target)
        with _LOCK:
            _KERNELS[key] = module
    results = [np.zeros(v.type.shape, v.type.dtype.numpy) for v in node.outputs]
    module(*[np.ascontiguousarray(v.data) for v in present], *results)
    return results


def _from_types(node: Node) -> np.ndarray | None:
    """Shape and Size of any tensor are known from its type."""
    x = node.inputs[0] if node.inputs else None
    if x is None or node.op not in ("Shape", "Size"):
        return None
    if node.op == "Size":
        return np.array(x.type.size, np.int64)
    start, end = node.attrs.get("start", 0), node.attrs.get("end")
    return np.array(x.type.shape[start:end], np.int64)


def fold_constants(graph: Graph) -> Graph:
    """Replace nodes whose inputs are all constants, and Shape / Size nodes, by constants.

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
        if not all(v is None or v.is_constant for v in node.inputs) or not should_fold(node) \
                or any(v in outputs for v in node.outputs):
            kept.append(node)
            continue
        for value, array in zip(node.outputs, evaluate_node(node)):
            vmap.set(value, make_constant(value.name, array.astype(value.type.dtype.numpy)))
    if not vmap:
        return graph
    return apply_map(graph, kept, vmap)
