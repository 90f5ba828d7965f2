"""Operator fusion: group nodes into "Fused" nodes, each of which compiles to one kernel.

Rules, by the pattern of the node being added to its producer's group:
- ELEMWISE / BROADCAST: joins any group (an epilogue), but joins a REDUCTION or OUT_FUSABLE
  group only when it keeps the anchor's output shape (no broadcast beyond it);
- INJECTIVE: joins groups that are at most INJECTIVE;
- REDUCTION: absorbs groups that are at most INJECTIVE (its prologue);
- OUT_FUSABLE and OPAQUE: start a group of their own; nothing fuses into OPAQUE ones.
A group holds at most MAX_GROUP_NODES nodes (an unrolled loop can chain thousands of
elementwise ops; one kernel inlining them all would be one expression too deep to compile).
A node joins through an input only when that input is not a graph output, comes from a
single-output node, and is read by this node alone or else (a diamond, as GELU's
x -> Div -> Erf -> Add -> Mul(x, .)) every other reader sits in an elementwise group this node
joins as well. A group holds at most one anchor (REDUCTION or OUT_FUSABLE). Those rules keep
every group's values used only inside it, except the last node's, so groups never form a cycle.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ember.graph.ir import Graph, Node, Value, rebuild
from ember.graph.passes.rewrite import op_pattern
from ember.ops.registry import Pattern

FUSED = "Fused"
MAX_GROUP_NODES = 32


@dataclass(eq=False)
class _Group:
    nodes: list[Node] = field(default_factory=list)
    pattern: Pattern = Pattern.ELEMWISE   # the highest pattern of its nodes
    merged_into: _Group | None = None

    def find(self) -> _Group:
        g = self
        while g.merged_into is not None:
            g = g.merged_into
        return g

    @property
    def has_anchor(self) -> bool:
        return self.pattern in (Pattern.REDUCTION, Pattern.OUT_FUSABLE)


def _joinable(node: Node, pattern: Pattern, via: Value, group: _Group) -> bool:
    """May `node` (of `pattern`) join `group` through its input `via`?"""
    if group.pattern == Pattern.OPAQUE or pattern >= Pattern.OUT_FUSABLE:
        return False
    if pattern <= Pattern.BROADCAST:
        if group.pattern <= Pattern.INJECTIVE:
            return True
        return all(v.type.shape == via.type.shape for v in node.outputs)
    return group.pattern <= Pattern.INJECTIVE  # INJECTIVE chain, or a REDUCTION's prologue


def fused_node(nodes: list[Node], used_outside: set[Value], name: str) -> Node:
    """A Fused node for `nodes` (in topological order), whose sub-graph's inputs are the
    values the nodes read from outside and whose outputs are those in `used_outside`."""
    inside = {v for n in nodes for v in n.outputs}
    inputs: dict[Value, None] = {}
    for n in nodes:
        for v in n.inputs:
            if v is not None and v not in inside:
                inputs[v] = None
    outputs = [v for n in nodes for v in n.outputs if v in used_outside]
    if not outputs:
        outputs = list(nodes[-1].outputs)
    pattern = max(op_pattern(n.op) for n in nodes)
    anchor = next(n for n in nodes if op_pattern(n.op) == pattern)
    sub = Graph(name, tuple(inputs), tuple(outputs), tuple(nodes))
    return Node(FUSED, name, tuple(inputs), tuple(outputs),
                {"graph": sub, "anchor": anchor.name, "pattern": pattern.name})


def fuse_ops(graph: Graph) -> Graph:
    """Group nodes into Fused nodes (conv + bias + bn + relu + add, reduction + epilogue, ...).

    Every node ends up in exactly one Fused node; Fused nodes already present stay as they are.
    """
    consumers = graph.consumers()
    producers = graph.producers()
    outputs = set(graph.outputs)
    group_of: dict[Node, _Group] = {}
    order: list[_Group] = []
    for node in graph.nodes:
        pattern = op_pattern(node.op)
        merged = _groups_to_merge(node, pattern, producers, consumers, outputs, group_of)
        target = _Group(pattern=max([pattern] + [g.pattern for g in merged]))
        for group in merged:
            group.merged_into = target
            target.nodes += group.nodes
        target.nodes.append(node)
        for n in target.nodes:
            group_of[n] = target
        order.append(target)
    position = {n: i for i, n in enumerate(graph.nodes)}
    new_nodes: list[Node] = []
    for group in order:
        if group.merged_into is not None:
            continue
        members = sorted(group.nodes, key=position.__getitem__)
        if len(members) == 1 and members[0].op == FUSED:
            new_nodes.append(members[0])
            continue
        external = _external_uses(members, consumers, outputs)
        new_nodes.append(fused_node(members, external, _group_name(members)))
    return rebuild(graph, new_nodes)


def _groups_to_merge(node: Node, pattern: Pattern, producers: dict[Value, Node],
                     consumers: dict[Value, list[Node]], outputs: set[Value],
                     group_of: dict[Node, _Group]) -> list[_Group]:
    """The producers' groups `node` joins: through a value it alone reads, or through a shared
    value (a diamond, e.g. x feeding both Div and the last Mul of GELU) once every other reader
    of that value sits in a group joined here too, so the value becomes internal."""
    candidates: list[tuple[Value, _Group]] = []
    for v in dict.fromkeys(v for v in node.inputs if v is not None):
        producer = producers.get(v)
        if producer is None or producer.op == FUSED or len(producer.outputs) != 1:
            continue
        group = group_of[producer].find()
        if v not in outputs and _joinable(node, pattern, v, group):
            candidates.append((v, group))
    merged: list[_Group] = []
    anchors = 1 if pattern in (Pattern.REDUCTION, Pattern.OUT_FUSABLE) else 0
    size = 1
    changed = True
    while changed:  # a group joined may make another input's readers all internal
        changed = False
        for v, group in candidates:
            if group in merged or (group.has_anchor and anchors) or \
                    size + len(group.nodes) > MAX_GROUP_NODES:
                continue
            joined = set(merged) | {group}
            if all(u is node or _elementwise_reader(u, group_of, joined)
                   for u in consumers.get(v, [])):
                merged.append(group)
                anchors += group.has_anchor
                size += len(group.nodes)
                changed = True
    return merged


def _elementwise_reader(reader: Node, group_of: dict[Node, _Group], joined: set[_Group]) -> bool:
    """Is `reader` an elementwise node in an elementwise group among `joined`?"""
    group = group_of[reader].find() if reader in group_of else None
    return (group in joined and op_pattern(reader.op) <= Pattern.BROADCAST
            and group.pattern <= Pattern.BROADCAST)


def _external_uses(members: list[Node], consumers: dict[Value, list[Node]],
                   outputs: set[Value]) -> set[Value]:
    inside = set(members)
    return {v for n in members for v in n.outputs
            if v in outputs or any(u not in inside for u in consumers.get(v, []))}


def _group_name(members: list[Node]) -> str:
    pattern = max(op_pattern(n.op) for n in members)
    anchor = next(n for n in members if op_pattern(n.op) == pattern)
    return f"fused_{anchor.name}"


def wrap_single_ops(graph: Graph) -> Graph:
    """Make every node a Fused group of its own: no fusion, one kernel per op."""
    if all(n.op == FUSED for n in graph.nodes):
        return graph
    consumers = graph.consumers()
    outputs = set(graph.outputs)
    nodes = [n if n.op == FUSED else
             fused_node([n], _external_uses([n], consumers, outputs),
                        f"fused_{n.name}")
             for n in graph.nodes]
    return rebuild(graph, nodes)
