"""A reference graph runner for tests: numpy for the ops below, ember kernels for the rest.

Fused nodes run as one compiled kernel (ember.lowering.kernel.build_group) when `compile_fused`
and every op inside is registered, else node by node.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ember.graph.ir import Graph, GraphBuilder, Node, Value, tensor_type
from ember.ops.registry import all_ops

Ref = Callable[[Mapping[str, Any], list[np.ndarray | None]], list[np.ndarray]]


def _conv(attrs: Mapping[str, Any], ins: list[np.ndarray | None]) -> list[np.ndarray]:
    x, w = ins[0], ins[1]
    b = ins[2] if len(ins) > 2 else None
    assert x is not None and w is not None and x.ndim == 4
    sh, sw = attrs.get("strides") or (1, 1)
    dh, dw = attrs.get("dilations") or (1, 1)
    top, left, bottom, right = attrs.get("pads") or (0, 0, 0, 0)
    group = int(attrs.get("group", 1))
    x = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (top, bottom), (left, right)))
    n, _, h, wid = x.shape
    m, cg, kh, kw = w.shape
    oh = (h - dh * (kh - 1) - 1) // sh + 1
    ow = (wid - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, m, oh, ow))
    mg = m // group
    for g in range(group):
        xs = x[:, g * cg:(g + 1) * cg]
        ws = w[g * mg:(g + 1) * mg].astype(np.float64)
        for i in range(kh):
            for j in range(kw):
                patch = xs[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh,
                           j * dw:j * dw + sw * (ow - 1) + 1:sw]
                out[:, g * mg:(g + 1) * mg] += np.einsum("nchw,mc->nmhw", patch, ws[:, :, i, j])
    if b is not None:
        out += b.reshape(1, -1, 1, 1)
    return [out.astype(w.dtype)]


def _batch_norm(attrs: Mapping[str, Any], ins: list[np.ndarray | None]) -> list[np.ndarray]:
    x, scale, bias, mean, var = ins[:5]
    assert x is not None and scale is not None and bias is not None
    assert mean is not None and var is not None
    shape = (1, -1) + (1,) * (x.ndim - 2)
    eps = float(attrs.get("epsilon", 1e-5))
    y = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps) * scale.reshape(shape) \
        + bias.reshape(shape)
    return [y.astype(x.dtype)]


def _gemm(attrs: Mapping[str, Any], ins: list[np.ndarray | None]) -> list[np.ndarray]:
    a, b = ins[0], ins[1]
    assert a is not None and b is not None
    a = a.T if attrs.get("transA") else a
    b = b.T if attrs.get("transB") else b
    y = float(attrs.get("alpha", 1.0)) * (a.astype(np.float64) @ b)
    if len(ins) > 2 and ins[2] is not None:
        y = y + float(attrs.get("beta", 1.0)) * ins[2]
    return [y.astype(a.dtype)]


def _reshape(attrs: Mapping[str, Any], ins: list[np.ndarray | None]) -> list[np.ndarray]:
    x = ins[0]
    assert x is not None
    shape = [x.shape[i] if d == 0 and not attrs.get("allowzero") else d
             for i, d in enumerate(attrs["shape"])]
    return [x.reshape(shape)]


def _flatten(attrs: Mapping[str, Any], ins: list[np.ndarray | None]) -> list[np.ndarray]:
    x = ins[0]
    assert x is not None
    axis = int(attrs.get("axis", 1)) % (x.ndim + 1) if x.ndim else 0
    return [x.reshape(int(np.prod(x.shape[:axis])), -1)]


def _one(fn: Callable[..., np.ndarray]) -> Ref:
    return lambda attrs, ins: [fn(*ins)]


NUMPY: dict[str, Ref] = {
    "Add": _one(np.add), "Sub": _one(np.subtract), "Mul": _one(np.multiply),
    "Div": _one(np.divide), "MatMul": _one(np.matmul),
    "Relu": _one(lambda x: np.maximum(x, 0).astype(x.dtype)),
    "Identity": _one(lambda x: x.copy()),
    "Dropout": lambda attrs, ins: [ins[0].copy(), np.ones(ins[0].shape, bool)],  # type: ignore
    "Transpose": lambda attrs, ins: [np.transpose(ins[0], attrs.get("perm"))],
    "Reshape": _reshape, "Flatten": _flatten,
    "Unsqueeze": lambda attrs, ins: [np.expand_dims(ins[0], tuple(attrs["axes"]))],
    "Conv": _conv, "BatchNormalization": _batch_norm, "Gemm": _gemm,
}

_KERNELS: dict[Any, Any] = {}


def _compiled(name: str, nodes: Sequence[Node], inputs: Sequence[Value],
              outputs: Sequence[Value]) -> Callable[..., None]:
    from ember.graph.passes.rewrite import freeze_attrs
    from ember.lowering.kernel import build_group

    key = tuple((n.op, freeze_attrs({k: v for k, v in n.attrs.items() if k != "graph"}),
                 tuple(id(v) for v in n.inputs), tuple(id(v) for v in n.outputs))
                for n in nodes) + (tuple(map(id, inputs)), tuple(map(id, outputs)))
    if key not in _KERNELS:
        _KERNELS[key] = (build_group(name, nodes, inputs, outputs), nodes, inputs, outputs)
    return _KERNELS[key][0]


def compilable(op: str) -> bool:
    return op in all_ops()


def run_node(node: Node, arrays: list[np.ndarray | None], compile_fused: bool = True
             ) -> list[np.ndarray]:
    inner = node.attrs.get("graph")
    if isinstance(inner, Graph):
        if compile_fused and all(compilable(n.op) for n in inner.nodes):
            module = _compiled(node.name, inner.nodes, inner.inputs, inner.outputs)
            results = [np.zeros(v.type.shape, v.type.dtype.numpy) for v in inner.outputs]
            module(*[np.ascontiguousarray(a) for a in arrays if a is not None], *results)
            return results
        present = [a for a in arrays if a is not None]
        return run_graph(inner, present, compile_fused)
    if node.op in NUMPY:
        return NUMPY[node.op](node.attrs, arrays)[:len(node.outputs)]
    ins = [None if v is None else v for v in node.inputs]
    module = _compiled(node.name, [node], [v for v in ins if v is not None], node.outputs)
    results = [np.zeros(v.type.shape, v.type.dtype.numpy) for v in node.outputs]
    module(*[np.ascontiguousarray(a) for a in arrays if a is not None], *results)
    return results


def run_graph(graph: Graph, inputs: Sequence[np.ndarray], compile_fused: bool = True
              ) -> list[np.ndarray]:
    """Evaluate `graph` on `inputs` (in graph.inputs order); returns its outputs."""
    env: dict[Value, np.ndarray] = dict(zip(graph.inputs, inputs))

    def get(v: Value) -> np.ndarray:
        return v.data if v.data is not None else env[v]

    for node in graph.nodes:
        arrays = [None if v is None else get(v) for v in node.inputs]
        for v, a in zip(node.outputs, run_node(node, arrays, compile_fused)):
            assert a.shape == v.type.shape, (node.name, a.shape, v.type.shape)
            env[v] = a
    return [np.asarray(get(v)) for v in graph.outputs]


def random_inputs(graph: Graph, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(v.type.shape).astype(v.type.dtype.numpy) for v in graph.inputs]


def assert_same_results(before: Graph, after: Graph, seed: int = 0, rtol: float = 1e-5,
                        atol: float = 1e-5) -> None:
    args = random_inputs(before, seed)
    want = run_graph(before, args)
    got = run_graph(after, args)
    assert len(want) == len(got)
    for w, g in zip(want, got):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


class Builder(GraphBuilder):
    """GraphBuilder plus `node`, which takes the output shapes instead of inferring them
    (for nodes inference would reject: ops ember does not have, deliberately bad types)."""

    def node(self, op: str, inputs: Sequence[Value | None], shapes: Sequence[Sequence[int]],
             attrs: Mapping[str, Any] | None = None, dtypes: Sequence[str] | None = None,
             name: str | None = None) -> tuple[Value, ...]:
        first = next(v for v in inputs if v is not None) if any(inputs) else None
        default = str(first.type.dtype) if first is not None else "float32"
        out_dtypes = list(dtypes or []) + [default] * len(shapes)
        node_name = self.unique(name or op.lower())
        outputs = tuple(Value(self.unique(f"{node_name}:{i}"), tensor_type(s, out_dtypes[i]))
                        for i, s in enumerate(shapes))
        self.nodes.append(Node(op, node_name, tuple(inputs), outputs, dict(attrs or {})))
        return outputs

    def const(self, name: str, shape: Sequence[int], seed: int, positive: bool = False
              ) -> Value:
        rng = np.random.default_rng(seed)
        data = rng.standard_normal(shape).astype(np.float32)
        return self.constant(name, np.abs(data) + 0.5 if positive else data)
