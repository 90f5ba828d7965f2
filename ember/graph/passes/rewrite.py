"""Helpers the graph passes share: value substitution, op patterns, hashable attributes."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from ember.graph.ir import Graph, Node, Value, rebuild, tensor_type
from ember.ops.registry import Pattern

# ops whose result differs from run to run: never folded, never merged
NONDETERMINISTIC = frozenset({"RandomNormal", "RandomUniform", "RandomNormalLike",
                              "RandomUniformLike", "Multinomial", "Bernoulli"})


def op_pattern(op: str) -> Pattern:
    """The fusion pattern of `op`; ops missing from the table (and "Fused") are OPAQUE."""
    from ember.ops.registry import all_ops

    opdef = all_ops().get(op)
    return opdef.pattern if opdef is not None else Pattern.OPAQUE


def has_op(op: str) -> bool:
    from ember.ops.registry import all_ops

    return op in all_ops()


class ValueMap:
    """A substitution of Values, resolved transitively (a -> b and b -> c give a -> c).

    Passes record "uses of `old` now read `new`" and apply the map once at the end; mapping
    a node's own output renames it (the producer then defines the new Value).
    """

    def __init__(self) -> None:
        self._map: dict[Value, Value] = {}

    def __bool__(self) -> bool:
        return bool(self._map)

    def __contains__(self, v: Value) -> bool:
        return v in self._map

    def set(self, old: Value, new: Value) -> None:
        new = self.resolve(new)
        assert old is not new and old not in self._map, (old, new)
        assert old.type == new.type, (old, new)
        self._map[old] = new

    def resolve(self, v: Value) -> Value:
        while v in self._map:
            v = self._map[v]
        return v

    def resolve_opt(self, v: Value | None) -> Value | None:
        return None if v is None else self.resolve(v)

    def apply_node(self, node: Node) -> Node:
        """`node` with its inputs and outputs substituted (the same object if unchanged)."""
        inputs = tuple(self.resolve_opt(v) for v in node.inputs)
        outputs = tuple(self.resolve(v) for v in node.outputs)
        same_in = all(a is b for a, b in zip(inputs, node.inputs))
        same_out = all(a is b for a, b in zip(outputs, node.outputs))
        if same_in and same_out:
            return node
        return dataclasses.replace(node, inputs=inputs, outputs=outputs)


def apply_map(graph: Graph, nodes: Iterable[Node], vmap: ValueMap) -> Graph:
    """A new graph of `nodes` with `vmap` applied to node inputs, outputs and graph outputs."""
    new_nodes = [vmap.apply_node(n) for n in nodes]
    outputs = [vmap.resolve(v) for v in graph.outputs]
    return rebuild(graph, new_nodes, outputs)


def is_graph_output(graph: Graph, v: Value, vmap: ValueMap | None = None) -> bool:
    outs = graph.outputs if vmap is None else [vmap.resolve(o) for o in graph.outputs]
    return any(o is v for o in outs)


def single_consumer(graph_consumers: Mapping[Value, list[Node]], v: Value) -> Node | None:
    """The only node reading `v` (possibly several times), or None."""
    users = graph_consumers.get(v, [])
    if not users or any(u is not users[0] for u in users):
        return None
    return users[0]


def freeze(value: Any) -> Any:
    """A hashable stand-in for an attribute value (lists -> tuples, arrays -> bytes)."""
    if isinstance(value, (list, tuple)):
        return tuple(freeze(x) for x in value)
    if isinstance(value, dict):
        return tuple(sorted((k, freeze(x)) for k, x in value.items()))
    if isinstance(value, np.ndarray):
        return ("array", str(value.dtype), value.shape, value.tobytes())
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, float) and np.isnan(value):  # NaN: equal to nothing, so unique
        return ("nan", id(value))
    try:
        hash(value)
    except TypeError:
        return ("object", id(value))
    if isinstance(value, Graph):
        return ("graph", id(value))
    return (type(value).__name__, value)


def freeze_attrs(attrs: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(sorted((k, freeze(v)) for k, v in attrs.items()))


def constant_key(v: Value) -> tuple[str, tuple[int, ...], str]:
    """(dtype, shape, digest of the bytes): equal keys mean equal constants."""
    assert v.data is not None
    digest = hashlib.blake2b(np.ascontiguousarray(v.data).tobytes(), digest_size=20).hexdigest()
    return (str(v.type.dtype), v.type.shape, digest)


def scalar_value(v: Value | None) -> float | None:
    """The value of a constant whose elements are all equal, else None."""
    if v is None or v.data is None or v.data.size == 0:
        return None
    flat = v.data.reshape(-1)
    first = flat[0]
    if not np.all(flat == first):
        return None
    return float(first)


def drop_alias(graph: Graph, vmap: ValueMap, src: Value, dst: Value, produced: set[Value]
               ) -> bool:
    """Make readers of `dst` read `src` (equal contents), so the node copying src -> dst can go.

    When `dst` is a graph output it keeps its Value: the producer of `src` is renamed to
    define `dst` instead. That is impossible when `src` is a graph input, a constant or
    itself a graph output; then nothing changes and False is returned (keep the node).
    """
    src = vmap.resolve(src)
    if src.type != dst.type:
        return False
    if not is_graph_output(graph, dst, vmap):
        vmap.set(dst, src)
        return True
    if src in produced and not is_graph_output(graph, src, vmap):
        vmap.set(src, dst)
        return True
    return False


def produced_values(graph: Graph) -> set[Value]:
    return {v for n in graph.nodes for v in n.outputs}


def make_constant(name: str, array: np.ndarray) -> Value:
    """A read-only constant Value; unlike np.ascontiguousarray this keeps 0-d arrays 0-d."""
    data = np.array(array, order="C", copy=True)
    data.setflags(write=False)
    return Value(name, tensor_type(data.shape, data.dtype), data)
