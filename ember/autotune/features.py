"""Features of a candidate for the cost model: one fixed-length vector per lowered kernel.

Counts are weighted by how often they run (the product of the enclosing loop extents). So
that what the model learns on one task carries to another of another size, a count enters
as a share of the kernel's float operations (or of its memory accesses), and sizes enter
against the target's facts (its vector width, registers, L1d / L2, threads); only
`float_ops` gives the task's scale.

    arithmetic: float ops (log2, the scale), integer ops, calls, guards (select / if) per flop
    memory: loads and stores per flop; accesses by the stride of the innermost loop in their
            flattened index (0: reused, 1: contiguous, within a cache line, farther, gather)
            and by the stride of the innermost loop that is not vectorized; vector accesses
    reuse:  per access, the innermost loop it does not depend on (its data is reused there)
            and the bytes the loop's one iteration touches meanwhile (the reuse distance):
            shares of accesses whose reuse fits the registers, L1d, L2, none of them, or that
            have no reuse at all; the working set of one parallel task and of the innermost
            serial loop (all its iterations) against L2 / L1d
    loops:  counts per kind, nest depth, innermost serial extent, innermost trips per flop,
            parallel tasks per thread and their balance over the threads, the unrolled and
            vectorized extents, the vector loop's width against the target's vector
    tile:   the register tile (the accumulator vectors of the innermost unrolled body: the
            vectors its accumulating stores write at distinct addresses) against the
            registers and against the accumulators that keep the FMA pipes busy; scratch
            buffers allocated inside loops against L1d
    estimate: `tile_estimate`, the machine model's guess from the target's facts alone, in
            log2 of the FMA pipes' share the tile reaches (ember.ops.budgets.tile_efficiency;
            a tile past the accumulator budget spills, its estimate falls with the square of
            the overflow); 0 for a kernel without a tile. The model-guided search ranks by
            it before it has measured anything and learns its error after.
    knobs:  the candidate's knob values (`knob_features`), for what the loop counts miss.
"""

from __future__ import annotations

import dataclasses
import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ember.errors import TuningError
from ember.ops.budgets import accumulator_budget, tile_efficiency
from ember.target import Target
from ember.target_facts import TargetFacts
from ember.tir import expr as E
from ember.tir.function import PrimFunc
from ember.tir.functor import Visitor
from ember.tir.stmt import Allocate, For, ForKind, IfThenElse, Store

LOOP_FEATURE_NAMES = (
    # arithmetic (per flop, but float_ops itself)
    "float_ops", "int_ops", "calls", "guards", "vector_ops_share", "intensity",
    # memory (per flop; shares of the accesses)
    "loads", "stores", "reads_per_store", "stride0", "stride1", "stride_line", "stride_far",
    "gather", "outer_stride0", "outer_stride_line", "outer_stride_far", "vector_accesses",
    "buffers",
    # reuse (shares of the accesses; working sets in log2 of their ratio to a cache)
    "reuse_registers", "reuse_l1", "reuse_l2", "reuse_far", "reuse_none",
    "task_bytes_over_l2", "body_bytes_over_l1",
    # loops
    "loops_serial", "loops_parallel", "loops_vectorized", "loops_unrolled", "depth",
    "innermost_extent", "innermost_trips", "parallel_per_thread", "parallel_balance",
    "outer_parallel", "unroll_product", "vector_extent", "vector_fill",
    # register tile, scratch
    "register_tile", "tile_over_registers", "tile_over_latency", "scratch_over_l1",
    # the machine model's estimate
    "tile_estimate",
)
KNOB_SLOTS = 8  # the most fields of a knob family (ConvKnobs: 7)
FEATURE_NAMES = LOOP_FEATURE_NAMES + tuple(f"knob_{i}" for i in range(KNOB_SLOTS))
UNKNOWN_EXTENT = 16  # a loop whose extent is not a constant
_GATHER = -1         # an index not linear in the loop's variable


@dataclass(frozen=True)
class _Access:
    """One load or store: its buffer, bytes an element, lanes, how often it runs, and per
    enclosing loop (outermost first) the element stride of the loop's variable in the
    flattened index (0: not used, _GATHER: not linear)."""

    buffer: int
    element_bytes: int
    buffer_bytes: float
    lanes: int
    trips: float
    loops: tuple[int, ...]          # ids of the enclosing For nodes
    strides: tuple[int, ...]


@dataclass
class _Counts:
    values: dict[str, float] = field(default_factory=lambda: dict.fromkeys(LOOP_FEATURE_NAMES,
                                                                           0.0))
    accesses: list[_Access] = field(default_factory=list)
    extents: dict[int, int] = field(default_factory=dict)   # For id -> extent
    kinds: dict[int, ForKind] = field(default_factory=dict)

    def add(self, name: str, amount: float) -> None:
        self.values[name] += amount

    def most(self, name: str, amount: float) -> None:
        self.values[name] = max(self.values[name], amount)


def _extent(loop: For) -> int:
    return int(loop.extent.value) if isinstance(loop.extent, E.IntImm) else UNKNOWN_EXTENT


def _const(e: E.Expr) -> int:
    return int(e.value) if isinstance(e, E.IntImm) else UNKNOWN_EXTENT


def _coefficient(e: E.Expr, var: E.Var) -> int | None:
    """The coefficient of `var` in an index that is linear in it (None: not linear)."""
    if isinstance(e, E.Var):
        return 1 if e is var else 0
    if isinstance(e, (E.IntImm, E.FloatImm)):
        return 0
    if isinstance(e, E.Ramp):
        return _coefficient(e.base, var)
    if isinstance(e, E.Broadcast):
        return _coefficient(e.value, var)
    if isinstance(e, E.Cast):
        return _coefficient(e.value, var)
    if isinstance(e, (E.Add, E.Sub)):
        a, b = _coefficient(e.a, var), _coefficient(e.b, var)
        if a is None or b is None:
            return None
        return a + b if isinstance(e, E.Add) else a - b
    if isinstance(e, E.Mul):
        a, b = _coefficient(e.a, var), _coefficient(e.b, var)
        if a == 0 and b == 0:
            return 0
        if isinstance(e.b, E.IntImm) and a is not None:
            return a * int(e.b.value)
        if isinstance(e.a, E.IntImm) and b is not None:
            return b * int(e.a.value)
        return None
    uses = _Uses(var)
    uses.visit(e)
    return None if uses.found else 0


def _reads(e: E.Expr, buffer: object) -> bool:
    """Whether `e` loads from `buffer`."""
    reads = _Reads(buffer)
    reads.visit(e)
    return reads.found


class _Reads(Visitor):
    def __init__(self, buffer: object) -> None:
        self.buffer, self.found = buffer, False

    def visit_Load(self, node: E.Load) -> None:
        self.found = self.found or node.buffer is self.buffer
        self.generic_visit(node)


class _Uses(Visitor):
    def __init__(self, var: E.Var) -> None:
        self.var, self.found = var, False

    def visit_Var(self, node: E.Var) -> None:
        self.found = self.found or node is self.var


def _row_major(shape: Sequence[E.Expr], strides: Sequence[E.Expr]) -> list[int]:
    if strides:
        return [_const(s) for s in strides]
    out, step = [], 1
    for d in reversed(shape):
        out.append(step)
        step *= _const(d)
    return out[::-1]


class _Extract(Visitor):
    def __init__(self, facts: TargetFacts) -> None:
        self.facts = facts
        self.c = _Counts()
        self.loops: list[For] = []
        self.trips = 1.0
        self.max_depth = 0

    # statements ------------------------------------------------------------------------
    def visit_For(self, node: For) -> None:
        n = _extent(node)
        kind = {ForKind.PARALLEL: "loops_parallel", ForKind.VECTORIZED: "loops_vectorized",
                ForKind.UNROLLED: "loops_unrolled"}.get(node.kind, "loops_serial")
        self.c.add(kind, 1)
        self.c.extents[id(node)], self.c.kinds[id(node)] = n, node.kind
        if node.kind == ForKind.PARALLEL:
            if not any(loop.kind == ForKind.PARALLEL for loop in self.loops):
                self.c.most("parallel_per_thread", n)
                self.c.add("outer_parallel", float(len(self.loops) == 0))
        elif node.kind == ForKind.UNROLLED:
            self.c.most("unroll_product", n)
        elif node.kind == ForKind.VECTORIZED:
            self.c.most("vector_extent", n)
        self.loops.append(node)
        self.trips *= n
        self.max_depth = max(self.max_depth, len(self.loops))
        self.visit(node.body)
        self.trips /= n
        self.loops.pop()

    def visit_Allocate(self, node: Allocate) -> None:
        if self.loops or node.buffer.scope != "global":  # a tile's scratch, not a stage
            size = math.prod(_const(d) for d in node.buffer.shape)
            self.c.most("scratch_over_l1", size * node.buffer.dtype.storage_bytes)
        self.visit(node.body)

    def visit_IfThenElse(self, node: IfThenElse) -> None:
        self.c.add("guards", self.trips)
        self.generic_visit(node)

    def visit_Store(self, node: Store) -> None:
        lanes = node.value.dtype.lanes
        self.c.add("stores", self.trips * lanes)
        self._access(node.buffer, node.indices, lanes)
        if self.loops and not isinstance(self.loops[-1].body, For):
            self.c.most("innermost_extent", _extent(self.loops[-1]))
            self.c.add("innermost_trips", self.trips)
        self._register_tile(node)
        self.generic_visit(node)

    def _register_tile(self, node: Store) -> None:
        """Accumulator vectors of the innermost unrolled body, for a store that accumulates
        (its value reads the buffer it writes): the extents of the unrolled loops its
        address moves with (an unrolled reduction loop writes the same vectors again) times
        the vectors of its vectorized loop (or of its lanes)."""
        if not _reads(node.value, node.buffer):
            return
        unrolled = math.prod(_extent(loop) for loop in self.loops
                             if loop.kind == ForKind.UNROLLED
                             and any(_coefficient(i, loop.var) != 0 for i in node.indices))
        lanes = node.value.dtype.lanes * math.prod(
            _extent(loop) for loop in self.loops if loop.kind == ForKind.VECTORIZED)
        vector_bytes = max(1, self.facts.vector_bits // 8)
        vectors = -(-lanes * node.value.dtype.storage_bytes // vector_bytes)
        self.c.most("register_tile", unrolled * vectors)

    # expressions -----------------------------------------------------------------------
    def visit_Load(self, node: E.Load) -> None:
        lanes = node.dtype.lanes
        self.c.add("loads", self.trips * lanes)
        self._access(node.buffer, node.indices, lanes)
        self.generic_visit(node)

    def visit_Select(self, node: E.Select) -> None:
        self.c.add("guards", self.trips * node.dtype.lanes)
        self.generic_visit(node)

    def visit_Call(self, node: E.Call) -> None:
        self.c.add("calls", self.trips * node.dtype.lanes)
        self.generic_visit(node)

    def generic_visit(self, node: object) -> None:
        if isinstance(node, E.BinaryOp) and not isinstance(node, E.CompareOp):
            lanes = node.dtype.lanes
            name = "float_ops" if node.dtype.is_float else "int_ops"
            self.c.add(name, self.trips * lanes)
            if lanes > 1:
                self.c.add("vector_ops_share", self.trips * lanes)
        super().generic_visit(node)

    def _access(self, buffer: object, indices: Sequence[E.Expr], lanes: int) -> None:
        shape, dtype = buffer.shape, buffer.dtype  # type: ignore[attr-defined]
        steps = _row_major(shape, buffer.strides)  # type: ignore[attr-defined]
        strides = []
        for loop in self.loops:
            total: int | None = 0
            for index, step in zip(indices, steps):
                k = _coefficient(index, loop.var)
                total = None if k is None or total is None else total + k * step
            strides.append(_GATHER if total is None else abs(total))
        elements = math.prod(_const(d) for d in shape)
        self.c.accesses.append(_Access(
            id(buffer.data), dtype.storage_bytes, float(elements * dtype.storage_bytes),  # type: ignore[attr-defined]
            lanes, self.trips * lanes, tuple(id(loop) for loop in self.loops),
            tuple(strides)))


def _touched(a: _Access, depth: int, extents: dict[int, int], whole: bool = False) -> float:
    """Bytes access `a` touches in one iteration of its enclosing loop at `depth` (all of
    its loops inside that one run; `whole`: all iterations of it), at most its buffer."""
    elements = float(a.lanes)
    first = depth if whole else depth + 1
    for loop, stride in zip(a.loops[first:], a.strides[first:]):
        if stride != 0:
            elements *= extents[loop]
    return min(elements * a.element_bytes, a.buffer_bytes)


def _footprint(accesses: Sequence[_Access], loop: int, depth: int,
               extents: dict[int, int], whole: bool = False) -> float:
    """Bytes one iteration of the loop (`whole`: the whole loop) touches, per buffer the
    largest of its accesses."""
    per_buffer: dict[int, float] = {}
    for a in accesses:
        if len(a.loops) > depth and a.loops[depth] == loop:
            per_buffer[a.buffer] = max(per_buffer.get(a.buffer, 0.0),
                                       _touched(a, depth, extents, whole))
    return sum(per_buffer.values())


def _reuse(c: _Counts, facts: TargetFacts) -> None:
    """Reuse shares and working sets from the accesses."""
    v, extents = c.values, c.extents
    registers = facts.vector_registers * facts.vector_bits // 8
    total = sum(a.trips for a in c.accesses) or 1.0
    cache: dict[tuple[int, int], float] = {}
    for a in c.accesses:
        depth = next((d for d in range(len(a.loops) - 1, -1, -1)
                      if a.strides[d] == 0 and extents[a.loops[d]] > 1), None)
        if depth is None:
            v["reuse_none"] += a.trips / total
            continue
        key = (a.loops[depth], depth)
        if key not in cache:
            cache[key] = _footprint(c.accesses, a.loops[depth], depth, extents)
        distance = cache[key]
        bucket = ("reuse_registers" if distance <= registers else
                  "reuse_l1" if distance <= facts.l1d_bytes else
                  "reuse_l2" if distance <= facts.l2_bytes else "reuse_far")
        v[bucket] += a.trips / total
    # one parallel task's working set, and the whole innermost serial loop's
    task, body = 0.0, 0.0
    for a in c.accesses:
        for d, loop in enumerate(a.loops):
            if c.kinds[loop] == ForKind.PARALLEL:
                key = (loop, d)
                if key not in cache:
                    cache[key] = _footprint(c.accesses, loop, d, extents)
                task = max(task, cache[key])
                break
        serial = [d for d, loop in enumerate(a.loops)
                  if c.kinds[loop] == ForKind.SERIAL and extents[loop] > 1]
        if serial:
            d = serial[-1]
            body = max(body, _footprint(c.accesses, a.loops[d], d, extents, whole=True))
    v["task_bytes_over_l2"] = math.log2((1.0 + task) / facts.l2_bytes)
    v["body_bytes_over_l1"] = math.log2((1.0 + body) / facts.l1d_bytes)


def _strides(c: _Counts, line_elements: dict[int, int]) -> None:
    """Shares of the accesses by the stride of their innermost loop, and of their innermost
    loop that is not vectorized (the next register or cache line they move to)."""
    v = c.values
    total = sum(a.trips for a in c.accesses) or 1.0
    for a in c.accesses:
        line = line_elements[a.element_bytes]
        share = a.trips / total
        if a.lanes > 1 or (a.loops and c.kinds[a.loops[-1]] == ForKind.VECTORIZED):
            v["vector_accesses"] += share
        inner = a.strides[-1] if a.strides else 0
        v[{0: "stride0", 1: "stride1", _GATHER: "gather"}.get(
            inner, "stride_line" if inner < line else "stride_far")] += share
        outer = [s for loop, s in zip(a.loops, a.strides)
                 if c.kinds[loop] != ForKind.VECTORIZED]
        s = outer[-1] if outer else 0
        v["outer_stride0" if s == 0 else "outer_stride_line" if 0 < s < line
          else "outer_stride_far"] += share


def tile_estimate(facts: TargetFacts, tile: int) -> float:
    """log2 of the FMA pipes' share a register tile of `tile` accumulator vectors reaches (one
    FMA each a step, the tile's loads not counted), scaled by (budget / tile)^2 past the
    accumulator budget (it spills: 13-16 ymm accumulators ran 1.4-1.6x slower than 12 on
    Zen 3); 0 without a tile."""
    if tile <= 0:
        return 0.0
    share = tile_efficiency(facts, tile, 0)
    budget = accumulator_budget(facts)
    if tile > budget:
        share *= (budget / tile) ** 2
    return math.log2(share)


def loop_features(funcs: PrimFunc | Sequence[PrimFunc],
                  target: Target | str | None = None) -> tuple[float, ...]:
    """The loop features (LOOP_FEATURE_NAMES order) of a kernel for `target` (default: this
    machine); several functions add up."""
    target = Target.host() if target is None else Target(target) if isinstance(target, str) \
        else target
    facts = target.facts
    items = [funcs] if isinstance(funcs, PrimFunc) else list(funcs)
    extract = _Extract(facts)
    for f in items:
        extract.visit(f.body)
    c = extract.c
    v = c.values
    flops = v["float_ops"] or 1.0
    ops = v["float_ops"] + v["int_ops"] + v["calls"]
    accesses = v["loads"] + v["stores"]
    v["vector_ops_share"] = v["vector_ops_share"] / ops if ops else 0.0
    v["intensity"] = ops / accesses if accesses else 0.0
    v["reads_per_store"] = v["loads"] / v["stores"] if v["stores"] else 0.0
    for name in ("int_ops", "calls", "guards", "loads", "stores", "innermost_trips"):
        v[name] /= flops
    line = facts.cache_line_bytes or 64
    _strides(c, {b: max(1, line // b) for b in {a.element_bytes for a in c.accesses}})
    _reuse(c, facts)
    threads = max(1, target.num_cores)
    tasks = v["parallel_per_thread"]
    v["parallel_balance"] = tasks / (math.ceil(tasks / threads) * threads) if tasks else 0.0
    v["parallel_per_thread"] = tasks / threads
    lanes = max(1, facts.vector_bits // 32)
    v["vector_fill"] = v["vector_extent"] / lanes
    v["tile_over_registers"] = v["register_tile"] / facts.vector_registers
    v["tile_over_latency"] = v["register_tile"] / max(1, facts.latency_accumulators)
    v["scratch_over_l1"] = v["scratch_over_l1"] / facts.l1d_bytes
    v["tile_estimate"] = tile_estimate(facts, int(v["register_tile"]))
    v["float_ops"] = math.log2(1.0 + v["float_ops"])
    v["depth"] = extract.max_depth
    v["buffers"] = len({a.buffer for a in c.accesses})
    return tuple(round(float(v[n]), 6) for n in LOOP_FEATURE_NAMES)


def knob_features(knobs: Any) -> tuple[float, ...]:
    """The candidate's knob values in its family's field order, padded to KNOB_SLOTS: True /
    False as 1 / 0, numbers as they are, text by a stable code. Features are ranked within
    a task and transferred within a knob family only, so a slot means the same knob
    wherever it is compared. They tell apart what the loop counts cannot: a loop order
    (ConvKnobs.rows_outer), an unroll the code generator applies (DenseKnobs.unroll_k), a
    parallel loop run on one thread; in a sample of benchmarks/search_efficiency.py, the
    dense task's 96 candidates had 72 distinct loop feature vectors, candidates sharing
    one up to 1.6x apart in time."""
    values = [getattr(knobs, f.name) for f in dataclasses.fields(knobs)] \
        if dataclasses.is_dataclass(knobs) else []
    if len(values) > KNOB_SLOTS:
        raise TuningError(f"{type(knobs).__name__} has {len(values)} knobs; the cost model's "
                          f"features hold {KNOB_SLOTS}")
    codes = [float(zlib.crc32(v.encode()) % 997) if isinstance(v, str) else float(v)
             for v in values]
    return tuple(codes + [0.0] * (KNOB_SLOTS - len(codes)))


def candidate_features(funcs: PrimFunc | Sequence[PrimFunc], target: Target | str | None,
                       knobs: Any) -> tuple[float, ...]:
    """The cost model's feature vector (FEATURE_NAMES order): the kernel's loop features,
    then its knobs'."""
    return loop_features(funcs, target) + knob_features(knobs)


__all__ = ["FEATURE_NAMES", "KNOB_SLOTS", "LOOP_FEATURE_NAMES", "candidate_features",
           "knob_features", "loop_features", "tile_estimate"]
