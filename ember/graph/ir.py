"""The operator graph: Values (typed edges), Nodes (ops with attributes) and Graphs.

Types are known when a node is built: GraphBuilder.add infers output types through the
op's `infer` rule, so every Value carries a TensorType. Constants are Values holding data.
Passes are functions Graph -> Graph that build new nodes instead of mutating old ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from ember.dtype import DType
from ember.errors import EmberError, ShapeError, UnsupportedOpError
from ember.types import MAX_ELEMENTS, TensorType, check_shape, tensor_type  # noqa: F401 (re-exported)


class Value:
    """An edge of the graph: a graph input, a constant, or the output of a node.

    Identity, not name, tells two values apart; names are for printing and for the
    frontend's bookkeeping.
    """

    __slots__ = ("name", "type", "data")

    def __init__(self, name: str, type: TensorType, data: np.ndarray | None = None) -> None:
        self.name = name
        self.type = type
        self.data = data
        if data is not None:
            assert tuple(data.shape) == type.shape, (name, data.shape, type.shape)

    @property
    def is_constant(self) -> bool:
        return self.data is not None

    def __repr__(self) -> str:
        kind = "const " if self.data is not None else ""
        return f"%{self.name}: {kind}{self.type}"


def constant(name: str, array: np.ndarray) -> Value:
    """A constant Value holding `array` (made C-contiguous and read-only)."""
    # np.ascontiguousarray would turn a 0-d array into shape (1,)
    data = np.array(array, order="C", copy=True)
    data.setflags(write=False)
    return Value(name, tensor_type(data.shape, data.dtype), data)


@dataclass(frozen=True, eq=False)
class Node:
    """One operator application. `attrs` hold plain Python values (ints, floats, strings,
    tuples); absent optional inputs are None."""

    op: str
    name: str
    inputs: tuple[Value | None, ...]
    outputs: tuple[Value, ...]
    attrs: Mapping[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"Node({self.name}: {self.op})"


@dataclass(frozen=True, eq=False)
class Graph:
    """A DAG of nodes in topological order, with its inputs and outputs."""

    name: str
    inputs: tuple[Value, ...]
    outputs: tuple[Value, ...]
    nodes: tuple[Node, ...]

    def producers(self) -> dict[Value, Node]:
        return {v: n for n in self.nodes for v in n.outputs}

    def consumers(self) -> dict[Value, list[Node]]:
        users: dict[Value, list[Node]] = {}
        for n in self.nodes:
            for v in n.inputs:
                if v is not None:
                    users.setdefault(v, []).append(n)
        return users

    def constants(self) -> list[Value]:
        seen: dict[Value, None] = {}
        for n in self.nodes:
            for v in n.inputs:
                if v is not None and v.is_constant:
                    seen[v] = None
        for v in self.outputs:
            if v.is_constant:
                seen[v] = None
        return list(seen)

    def __str__(self) -> str:
        from ember.graph.printer import graph_to_str

        return graph_to_str(self)


def topological_order(nodes: Iterable[Node], inputs: Iterable[Value]) -> tuple[Node, ...]:
    """Order `nodes` so that every node comes after the producers of its inputs."""
    node_list = list(nodes)
    produced = {v: n for n in node_list for v in n.outputs}
    ready: set[Value] = set(inputs)
    order: list[Node] = []
    done: set[int] = set()
    visiting: set[int] = set()

    def visit(node: Node) -> None:
        if id(node) in done:
            return
        if id(node) in visiting:
            raise EmberError(f"graph has a cycle through node '{node.name}' ({node.op})")
        visiting.add(id(node))
        for v in node.inputs:
            if v is not None and v not in ready and v in produced:
                visit(produced[v])
        visiting.discard(id(node))
        done.add(id(node))
        order.append(node)

    for node in node_list:
        visit(node)
    return tuple(order)


class GraphBuilder:
    """Build a graph node by node, inferring each node's output types as it is added.

        b = GraphBuilder("net")
        x = b.input("x", (1, 3, 8, 8), "float32")
        y, = b.add("Relu", [x])
        g = b.finish([y])
    """

    def __init__(self, name: str = "graph") -> None:
        self.name = name
        self.inputs: list[Value] = []
        self.nodes: list[Node] = []
        self._names: dict[str, int] = {}

    def unique(self, name: str) -> str:
        count = self._names.get(name, 0)
        self._names[name] = count + 1
        return name if count == 0 else f"{name}_{count}"

    def input(self, name: str, shape: Sequence[int], dtype: str | DType) -> Value:
        value = Value(self.unique(name), tensor_type(shape, dtype, f"graph input '{name}'"))
        self.inputs.append(value)
        return value

    def constant(self, name: str, array: np.ndarray) -> Value:
        return constant(self.unique(name), array)

    def add(self, op: str, inputs: Sequence[Value | None], attrs: Mapping[str, Any] | None = None,
            name: str | None = None, output_names: Sequence[str] | None = None
            ) -> tuple[Value, ...]:
        """Add a node of registered op `op`; returns its output Values (types inferred)."""
        from ember.ops.registry import get_op

        opdef = get_op(op)
        node_name = self.unique(name or op.lower())
        full_attrs = opdef.complete_attrs(attrs or {}, node_name)
        try:
            types = opdef.infer(full_attrs, [v.type if v is not None else None for v in inputs])
        except (ShapeError, UnsupportedOpError) as err:
            if str(err).startswith(f"node '{node_name}'"):
                raise
            raise type(err)(f"node '{node_name}' ({op}): {err}") from None
        for i, t in enumerate(types):
            check_shape(t.shape, f"node '{node_name}' ({op}) output {i}")
        names = list(output_names or [])
        outputs = tuple(
            Value(self.unique(names[i] if i < len(names) and names[i] else f"{node_name}:{i}"), t)
            for i, t in enumerate(types))
        self.nodes.append(Node(op, node_name, tuple(inputs), outputs, dict(full_attrs)))
        return outputs

    def finish(self, outputs: Sequence[Value]) -> Graph:
        return Graph(self.name, tuple(self.inputs), tuple(outputs),
                     topological_order(self.nodes, self.inputs))


def rebuild(graph: Graph, nodes: Iterable[Node], outputs: Sequence[Value] | None = None
            ) -> Graph:
    """A graph with the same inputs and the given nodes (re-sorted), for passes."""
    return Graph(graph.name, graph.inputs, tuple(outputs if outputs is not None else
                                                  graph.outputs),
                 topological_order(nodes, graph.inputs))


def without_constant_values(graph: Graph) -> Graph:
    """The same graph structure with every constant's data replaced by a zero-stride stand-in
    of the same shape and dtype, so holding it costs no memory. For display only: the
    stand-ins read as zeros, so such a graph must not be compiled or evaluated.
    """
    memo: dict[Value, Value] = {}

    def value(v: Value | None) -> Value | None:
        if v is None or v.data is None:
            return v
        if v not in memo:
            hollow = np.broadcast_to(np.zeros((), v.type.dtype.numpy), v.type.shape)
            memo[v] = Value(v.name, v.type, hollow)
        return memo[v]

    def node(n: Node) -> Node:
        attrs = dict(n.attrs)
        if isinstance(attrs.get("graph"), Graph):
            attrs["graph"] = rebuilt(attrs["graph"])
        return Node(n.op, n.name, tuple(value(v) for v in n.inputs), n.outputs, attrs)

    def rebuilt(g: Graph) -> Graph:
        return Graph(g.name, tuple(value(v) for v in g.inputs),  # type: ignore[misc]
                     tuple(value(v) for v in g.outputs), tuple(node(n) for n in g.nodes))

    return rebuilt(graph)

