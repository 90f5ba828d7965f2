"""Static memory planning: lifetimes of intermediate values packed into one workspace.

Steps are the graph's nodes in order. A value lives from the step that produces it to the
last step that reads it (inclusive). Graph inputs, graph outputs and constants are not
planned: the caller owns those buffers. Sizes are rounded up to ALIGNMENT bytes everywhere
(naive, peak and the packing), so the three numbers compare directly.

Packing is greedy by size (Lee et al., "On-Device Neural Net Inference with Mobile GPUs"
style): buffers from largest to smallest, each at the offset of the smallest gap between
already placed buffers whose lifetimes overlap it that fits (best fit), else above them.
In-place: a single-output group made only of ELEMWISE/BROADCAST ops may write its output
into an input buffer that dies at that step, has the output's element type and the output's
shape (up to leading 1s): such a kernel reads element i of that input only to write
element i of the output, so the two can share memory.
Concat views: a group that is only a Concat whose axis has nothing but 1s before it (so
each input is one contiguous slice of the output, e.g. channels of NCHW[x]c at batch 1)
gets its inputs planned as slices of its output's buffer: their producers write straight
into the concatenation and the Concat kernel is not run at all (`assembled`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ember.graph.ir import Graph, Node, Value
from ember.graph.passes.rewrite import op_pattern
from ember.ops.registry import Pattern

ALIGNMENT = 64


def aligned(nbytes: int, alignment: int = ALIGNMENT) -> int:
    return max(alignment, -(-nbytes // alignment) * alignment)


@dataclass
class MemoryPlan:
    """Where each intermediate value lives in the one workspace, and what that saved.

    offsets: byte offset of every planned value; lifetimes: (first step, last step);
    inplace: output value -> the input value whose buffer it reuses; views: Concat input ->
    (the Concat's output, byte offset inside it); assembled: Concat outputs made entirely of
    views, whose Concat kernel need not run.
    """

    offsets: dict[Value, int]
    workspace_bytes: int
    naive_bytes: int
    peak_live_bytes: int
    lifetimes: dict[Value, tuple[int, int]] = field(default_factory=dict)
    inplace: dict[Value, Value] = field(default_factory=dict)
    alignment: int = ALIGNMENT
    views: dict[Value, tuple[Value, int]] = field(default_factory=dict)

    @property
    def assembled(self) -> set[Value]:
        return {out for out, _ in self.views.values()}

    def size_of(self, v: Value) -> int:
        return aligned(v.type.nbytes, self.alignment)

    def __str__(self) -> str:
        rows = sorted(self.offsets, key=lambda v: (self.offsets[v], self.lifetimes[v]))
        width = max([len(v.name) + 1 for v in rows] + [5])
        lines = [(f"memory plan: workspace {_mb(self.workspace_bytes)} (naive "
                  f"{_mb(self.naive_bytes)}, peak live {_mb(self.peak_live_bytes)}), "
                  f"{len(rows)} values, {len(self.inplace)} in place, "
                  f"{len(self.assembled)} concats assembled in place"),
                 f"  {'value':<{width}}  {'offset':>12}  {'bytes':>12}  steps"]
        for v in rows:
            first, last = self.lifetimes[v]
            note = f"  (in place of %{self.inplace[v].name})" if v in self.inplace else ""
            if v in self.views:
                note = f"  (slice of %{self.views[v][0].name} at +{self.views[v][1]})"
            lines.append(f"  {'%' + v.name:<{width}}  {self.offsets[v]:>12}  "
                         f"{self.size_of(v):>12}  {first}..{last}{note}")
        return "\n".join(lines)


def _mb(nbytes: int) -> str:
    return f"{nbytes / (1 << 20):.2f} MiB" if nbytes >= 1 << 20 else f"{nbytes} B"


def lifetimes(graph: Graph) -> dict[Value, tuple[int, int]]:
    """(producing step, last reading step) of every intermediate value of `graph`."""
    outputs = set(graph.outputs)
    live: dict[Value, tuple[int, int]] = {}
    for step, node in enumerate(graph.nodes):
        for v in node.inputs:
            if v is not None and v in live:
                live[v] = (live[v][0], step)
        for v in node.outputs:
            if v not in outputs and not v.is_constant:
                live[v] = (step, step)
    return live


def _node_patterns(node: Node) -> list[Pattern]:
    inner = node.attrs.get("graph")
    if isinstance(inner, Graph):
        return [p for n in inner.nodes for p in _node_patterns(n)]
    return [op_pattern(node.op)]


def _same_layout(a: Value, b: Value) -> bool:
    if a.type.dtype != b.type.dtype:
        return False
    sa, sb = list(a.type.shape), list(b.type.shape)
    width = max(len(sa), len(sb))
    return [1] * (width - len(sa)) + sa == [1] * (width - len(sb)) + sb


def inplace_candidates(graph: Graph, life: dict[Value, tuple[int, int]]) -> dict[Value, Value]:
    """output -> input whose buffer it may take over (see the module docstring)."""
    pairs: dict[Value, Value] = {}
    taken: set[Value] = set()
    for step, node in enumerate(graph.nodes):
        if len(node.outputs) != 1 or node.outputs[0] not in life:
            continue
        if any(p > Pattern.BROADCAST for p in _node_patterns(node)):
            continue
        out = node.outputs[0]
        for v in dict.fromkeys(v for v in node.inputs if v is not None):
            if v in life and life[v][1] == step and v not in taken and _same_layout(v, out):
                pairs[out] = v
                taken.add(v)
                break
    return pairs


def _concat_parts(node: Node) -> tuple[Value, list[Value], int] | None:
    """(output, inputs, axis) of a group that is only a Concat, else None."""
    inner = node.attrs.get("graph")
    nodes = inner.nodes if isinstance(inner, Graph) else (node,)
    if len(nodes) != 1 or nodes[0].op != "Concat" or len(node.outputs) != 1:
        return None
    concat = nodes[0]
    out = concat.outputs[0]
    axis = int(concat.attrs.get("axis", 0))
    axis = axis + len(out.type.shape) if axis < 0 else axis
    return out, [v for v in concat.inputs if v is not None], axis


def concat_views(graph: Graph, life: dict[Value, tuple[int, int]], alignment: int = ALIGNMENT
                 ) -> dict[Value, tuple[Value, int]]:
    """Concat input -> (Concat output, byte offset) for the Concats that can be assembled in
    place (see the module docstring); each value is a slice of at most one Concat, and
    neither side of a view is itself assembled or a slice elsewhere."""
    views: dict[Value, tuple[Value, int]] = {}
    assembled: set[Value] = set()
    for node in graph.nodes:
        parts = _concat_parts(node)
        if parts is None:
            continue
        out, inputs, axis = parts
        if (out not in life or any(d != 1 for d in out.type.shape[:axis])
                or len(set(inputs)) != len(inputs)):
            continue
        if any(v not in life or v in views or v in assembled or v.type.dtype != out.type.dtype
               or v.type.nbytes % alignment for v in inputs):
            continue
        offset = 0
        for v in inputs:
            views[v] = (out, offset)
            offset += v.type.nbytes
        assembled.add(out)
    return views


def plan_memory(graph: Graph, inplace: bool = True, alignment: int = ALIGNMENT,
                views: bool = True) -> MemoryPlan:
    """Offsets of every intermediate value in one workspace, reusing dead values' memory.

        plan = plan_memory(fuse_ops(graph))
        print(plan)          # a table: value, offset, bytes, live steps
    """
    life = lifetimes(graph)
    slices = concat_views(graph, life, alignment) if views else {}
    sliced = set(slices) | {out for out, _ in slices.values()}
    pairs = inplace_candidates(graph, life) if inplace else {}
    pairs = {out: src for out, src in pairs.items() if out not in sliced and src not in sliced}
    # buffers: chains of values sharing memory through in-place reuse, and concatenations
    # with the slices they are made of
    root: dict[Value, Value] = {}
    for v in life:
        root[v] = root[pairs[v]] if v in pairs else v
    for v, (out, _) in slices.items():
        root[v] = out
    members: dict[Value, list[Value]] = {}
    for v in life:
        members.setdefault(root[v], []).append(v)
    buffers = []
    for r, vs in members.items():
        first = min(life[v][0] for v in vs)
        last = max(life[v][1] for v in vs)
        size = max(aligned(v.type.nbytes, alignment) for v in vs)
        buffers.append((size, first, last, r))
    buffers.sort(key=lambda b: (-b[0], b[1], b[2]))
    placed: list[tuple[int, int, int, int]] = []   # (offset, size, first, last)
    buffer_offset: dict[Value, int] = {}
    workspace = 0
    for size, first, last, r in buffers:
        overlapping = sorted((o, s) for o, s, f, end in placed if f <= last and first <= end)
        offset = _best_fit(overlapping, size)
        placed.append((offset, size, first, last))
        buffer_offset[r] = offset
        workspace = max(workspace, offset + size)
    offsets = {v: buffer_offset[root[v]] + (slices[v][1] if v in slices else 0) for v in life}
    naive = sum(aligned(v.type.nbytes, alignment) for v in life)
    return MemoryPlan(offsets, workspace, naive, _peak(life, alignment, len(graph.nodes)),
                      life, pairs, alignment, slices)


def _best_fit(overlapping: list[tuple[int, int]], size: int) -> int:
    """The start of the smallest gap among (offset, size) blocks that holds `size` bytes."""
    best: tuple[int, int] | None = None   # (gap size, offset)
    cursor = 0
    for offset, length in overlapping:
        gap = offset - cursor
        if gap >= size and (best is None or gap < best[0]):
            best = (gap, cursor)
        cursor = max(cursor, offset + length)
    return best[1] if best is not None else cursor


def _peak(life: dict[Value, tuple[int, int]], alignment: int, steps: int) -> int:
    delta = [0] * (steps + 1)
    for v, (first, last) in life.items():
        size = aligned(v.type.nbytes, alignment)
        delta[first] += size
        delta[last + 1] -= size
    peak = current = 0
    for d in delta:
        current += d
        peak = max(peak, current)
    return peak
