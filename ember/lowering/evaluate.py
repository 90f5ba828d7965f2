"""Run one graph node on constant inputs with ember's own compiled kernel (constant folding)."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from ember.graph.ir import Node, Value, tensor_type
from ember.graph.passes.rewrite import freeze_attrs
from ember.lowering.kernel import build_group

_KERNELS: dict[Any, Any] = {}
_LOCK = threading.Lock()


def evaluate_node(node: Node, target: str = "llvm") -> list[np.ndarray]:
    """Run one node on its constant inputs with a compiled kernel, cached per process by
    (op, attributes, input types), so repeated folds of one shape compile once."""
    present = [v for v in node.inputs if v is not None]
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
    # np.asarray(order="C"), not np.ascontiguousarray, which makes 0-d arrays 1-d
    module(*[np.asarray(v.data, order="C") for v in present], *results)
    return results
