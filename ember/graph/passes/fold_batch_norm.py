"""Fold inference BatchNormalization into the Conv, Gemm or MatMul(+Add) that feeds it.

BatchNormalization computes y = (x - mean) * s + bias per channel (axis 1), with
s = scale / sqrt(var + epsilon). When x = Conv(X, W, B) with constant weights:
    W'[m] = W[m] * s[m]        B' = (B - mean) * s + bias
and for x = A @ W (+ c) on 2-D tensors (channels = columns):
    W'[:, n] = W[:, n] * s[n]  c' = (c - mean) * s + bias
The arithmetic runs in float64 and is rounded once to the weights' dtype.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ember.graph.ir import Graph, Node, Value
from ember.graph.passes.rewrite import (
    ValueMap,
    apply_map,
    is_graph_output,
    make_constant,
    single_consumer,
)


def _bn_affine(bn: Node) -> tuple[np.ndarray, np.ndarray] | None:
    """(s, shift) with bn(x) = x * s + shift per channel, when BN is inference-mode and constant."""
    if bn.attrs.get("training_mode") or len(bn.inputs) < 5:
        return None
    scale, bias, mean, var = bn.inputs[1:5]
    if not all(v is not None and v.data is not None for v in (scale, bias, mean, var)):
        return None
    if bn.attrs.get("spatial", 1) == 0 or any(v.type.ndim != 1 for v in (scale, bias, mean, var)):
        return None  # per-activation statistics (opset < 9 with spatial=0) stay as they are
    eps = float(bn.attrs.get("epsilon", 1e-5))
    s = scale.data.astype(np.float64) / np.sqrt(var.data.astype(np.float64) + eps)  # type: ignore
    shift = bias.data.astype(np.float64) - mean.data.astype(np.float64) * s  # type: ignore
    return s, shift


def _const(like: Value, array: np.ndarray, suffix: str) -> Value:
    return make_constant(f"{like.name}_{suffix}", array.astype(like.type.dtype.numpy))


def _fold_into_conv(conv: Node, bn: Node, s: np.ndarray, shift: np.ndarray) -> list[Node] | None:
    w = conv.inputs[1]
    b = conv.inputs[2] if len(conv.inputs) > 2 else None
    if w is None or w.data is None or (b is not None and b.data is None):
        return None
    if not w.type.dtype.is_float or w.type.shape[0] != s.shape[0]:
        return None
    w64 = w.data.astype(np.float64) * s.reshape((-1,) + (1,) * (w.type.ndim - 1))
    b64 = (b.data.astype(np.float64) if b is not None else 0.0) * s + shift  # type: ignore
    new_b = _const(w, b64, "bias") if b is None else _const(b, b64, "bn")
    inputs = (conv.inputs[0], _const(w, w64, "bn"), new_b)
    return [dataclasses.replace(conv, inputs=inputs, outputs=(bn.outputs[0],))]


def _scaled_columns(w: Value, s: np.ndarray, transposed: bool) -> Value:
    w64 = w.data.astype(np.float64)  # type: ignore[union-attr]
    w64 = w64 * (s[:, None] if transposed else s[None, :])
    return _const(w, w64, "bn")


def _fold_into_gemm(gemm: Node, bn: Node, s: np.ndarray, shift: np.ndarray) -> list[Node] | None:
    w = gemm.inputs[1]
    c = gemm.inputs[2] if len(gemm.inputs) > 2 else None
    if w is None or w.data is None or (c is not None and c.data is None):
        return None
    n = gemm.outputs[0].type.shape[1]
    if s.shape[0] != n:
        return None
    trans_b = bool(gemm.attrs.get("transB", 0))
    beta = float(gemm.attrs.get("beta", 1.0))
    c64 = beta * c.data.astype(np.float64) if c is not None else np.zeros(())  # type: ignore
    if c64.ndim == 1 or c64.ndim == 0:
        c64 = np.broadcast_to(c64, (n,))
    new_c = (c64 - 0.0) * s + shift
    attrs = {**gemm.attrs, "beta": 1.0}
    inputs = (gemm.inputs[0], _scaled_columns(w, s, trans_b), _const(w, new_c, "bn_bias"))
    return [dataclasses.replace(gemm, inputs=inputs, outputs=(bn.outputs[0],), attrs=attrs)]


def _fold_into_matmul(mm: Node, add: Node | None, bn: Node, s: np.ndarray, shift: np.ndarray
                      ) -> list[Node] | None:
    from ember.graph.passes.rewrite import has_op

    w = mm.inputs[1]
    if w is None or w.data is None or w.type.ndim != 2 or w.type.shape[1] != s.shape[0]:
        return None
    if mm.outputs[0].type.ndim != 2:
        return None
    out = bn.outputs[0]
    if add is None:
        if not has_op("Add"):
            return None
        c64 = shift
        add = Node("Add", f"{bn.name}_shift", (mm.outputs[0], _const(w, c64, "bn_bias")),
                   (out,), {})
    else:
        c = add.inputs[1] if add.inputs[0] is mm.outputs[0] else add.inputs[0]
        if c is None or c.data is None:
            return None
        c64 = c.data.astype(np.float64) * s + shift
        add = dataclasses.replace(add, inputs=(mm.outputs[0], _const(c, c64, "bn")),
                                  outputs=(out,))
    new_mm = dataclasses.replace(mm, inputs=(mm.inputs[0], _scaled_columns(w, s, False)))
    return [new_mm, add]


def fold_batch_norm(graph: Graph) -> Graph:
    """Fold inference BatchNormalization into a preceding Conv / Gemm / MatMul(+Add) whose
    weights are constants and whose output feeds only the BatchNormalization."""
    producers = graph.producers()
    consumers = graph.consumers()
    replaced: dict[Node, list[Node]] = {}   # first node of the folded chain -> new nodes
    dropped: set[Node] = set()
    for bn in graph.nodes:
        if bn.op != "BatchNormalization" or bn.inputs[0] is None:
            continue
        if any(v in consumers or is_graph_output(graph, v) for v in bn.outputs[1:]):
            continue
        affine = _bn_affine(bn)
        chain = _feeding_chain(graph, bn.inputs[0], producers, consumers)
        if affine is None or chain is None or any(n in dropped for n in chain):
            continue
        s, shift = affine
        new: list[Node] | None = None
        match [n.op for n in chain]:
            case ["Conv"]:
                new = _fold_into_conv(chain[0], bn, s, shift)
            case ["Gemm"] if chain[0].outputs[0].type.ndim == 2:
                new = _fold_into_gemm(chain[0], bn, s, shift)
            case ["MatMul"]:
                new = _fold_into_matmul(chain[0], None, bn, s, shift)
            case ["MatMul", "Add"]:
                new = _fold_into_matmul(chain[0], chain[1], bn, s, shift)
        if new is None:
            continue
        replaced[chain[0]] = new
        dropped.update(chain[1:])
        dropped.add(bn)
    if not replaced:
        return graph
    nodes: list[Node] = []
    for node in graph.nodes:
        if node in replaced:
            nodes += replaced[node]
        elif node not in dropped:
            nodes.append(node)
    return apply_map(graph, nodes, ValueMap())


def _feeding_chain(graph: Graph, x: Value, producers: dict[Value, Node],
                   consumers: dict[Value, list[Node]]) -> list[Node] | None:
    """[producer] or [MatMul, Add] computing `x`, each intermediate read only inside the chain."""
    if is_graph_output(graph, x) or single_consumer(consumers, x) is None:
        return None
    node = producers.get(x)
    if node is None or len(node.outputs) != 1:
        return None
    if node.op == "Add":
        first = node.inputs[0]
        mm_value = first if first is not None and first in producers and \
            producers[first].op == "MatMul" else node.inputs[1]
        if mm_value is None or mm_value not in producers or producers[mm_value].op != "MatMul":
            return None
        if is_graph_output(graph, mm_value) or single_consumer(consumers, mm_value) is not node:
            return None
        if node.inputs[0] is node.inputs[1]:
            return None
        return [producers[mm_value], node]
    return [node]
