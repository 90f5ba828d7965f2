"""Loop features of a lowered kernel for the cost model: one fixed-length vector per PrimFunc.

Every count is weighted by how often it runs (the product of the enclosing loop extents) and
log-scaled, so kernels of different sizes land on comparable scales:

    arithmetic: float ops, integer ops, intrinsic calls (lanes counted)
    memory: loads and stores (elements), by the stride of the innermost loop in their index
            (0: reused, 1: contiguous, >1: strided, other: gather), vector vs scalar accesses
    loops: counts per kind, the parallel extent, unrolled and vectorized extents, nest depth,
           innermost serial extent, trips of the innermost loops
    ratios: arithmetic intensity (ops per access), vector share of the ops, local scratch bytes
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from ember.tir import expr as E
from ember.tir.function import PrimFunc
from ember.tir.functor import Visitor
from ember.tir.stmt import Allocate, For, ForKind, Store

FEATURE_NAMES = (
    "float_ops", "int_ops", "calls", "loads", "stores", "vector_ops_share", "max_lanes",
    "loads_stride0", "loads_stride1", "loads_strided", "loads_gather", "stores_contiguous",
    "vector_loads", "loops_serial", "loops_parallel", "loops_vectorized", "loops_unrolled",
    "parallel_extent", "unroll_product", "vector_extent", "depth", "innermost_extent",
    "innermost_trips", "intensity", "local_bytes", "buffers", "reads_per_store",
    "outer_parallel_share",
)
UNKNOWN_EXTENT = 16  # a loop whose extent is not a constant


@dataclass
class _Counts:
    values: dict[str, float] = field(default_factory=lambda: dict.fromkeys(FEATURE_NAMES, 0.0))
    buffers: set[int] = field(default_factory=set)

    def add(self, name: str, amount: float) -> None:
        self.values[name] += amount


def _extent(loop: For) -> int:
    return int(loop.extent.value) if isinstance(loop.extent, E.IntImm) else UNKNOWN_EXTENT


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


class _Uses(Visitor):
    def __init__(self, var: E.Var) -> None:
        self.var, self.found = var, False

    def visit_Var(self, node: E.Var) -> None:
        self.found = self.found or node is self.var


class _Extract(Visitor):
    def __init__(self) -> None:
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
        if node.kind == ForKind.PARALLEL:
            self.c.values["parallel_extent"] = max(self.c.values["parallel_extent"], n)
            if not any(loop.kind == ForKind.PARALLEL for loop in self.loops):
                self.c.add("outer_parallel_share", float(len(self.loops) == 0))
        elif node.kind == ForKind.UNROLLED:
            self.c.values["unroll_product"] = max(self.c.values["unroll_product"], n)
        elif node.kind == ForKind.VECTORIZED:
            self.c.values["vector_extent"] = max(self.c.values["vector_extent"], n)
        self.loops.append(node)
        self.trips *= n
        self.max_depth = max(self.max_depth, len(self.loops))
        self.visit(node.body)
        self.trips /= n
        self.loops.pop()

    def visit_Allocate(self, node: Allocate) -> None:
        if node.buffer.scope != "global":
            size = math.prod(int(d.value) if isinstance(d, E.IntImm) else UNKNOWN_EXTENT
                             for d in node.buffer.shape)
            self.c.add("local_bytes", size * node.buffer.dtype.storage_bytes)
        self.visit(node.body)

    def visit_Store(self, node: Store) -> None:
        lanes = node.value.dtype.lanes
        self.c.add("stores", self.trips * lanes)
        self.c.buffers.add(id(node.buffer.data))
        stride = self._stride(node.indices)
        if stride == 1 or lanes > 1:
            self.c.add("stores_contiguous", self.trips * lanes)
        if self.loops and not isinstance(self.loops[-1].body, For):
            self.c.values["innermost_extent"] = max(self.c.values["innermost_extent"],
                                                    _extent(self.loops[-1]))
            self.c.add("innermost_trips", self.trips)
        self.generic_visit(node)

    # expressions -----------------------------------------------------------------------
    def visit_Load(self, node: E.Load) -> None:
        lanes = node.dtype.lanes
        self.c.add("loads", self.trips * lanes)
        self.c.buffers.add(id(node.buffer.data))
        if lanes > 1:
            self.c.add("vector_loads", self.trips * lanes)
        stride = self._stride(node.indices)
        bucket = {0: "loads_stride0", 1: "loads_stride1", None: "loads_gather"}.get(
            stride, "loads_strided")
        self.c.add(bucket, self.trips * lanes)
        self.generic_visit(node)

    def visit_Call(self, node: E.Call) -> None:
        self.c.add("calls", self.trips * node.dtype.lanes)
        self.generic_visit(node)

    def generic_visit(self, node: object) -> None:
        if isinstance(node, E.BinaryOp) and not isinstance(node, E.CompareOp):
            lanes = node.dtype.lanes
            self.c.values["max_lanes"] = max(self.c.values["max_lanes"], lanes)
            name = "float_ops" if node.dtype.is_float else "int_ops"
            self.c.add(name, self.trips * lanes)
            if lanes > 1:
                self.c.add("vector_ops_share", self.trips * lanes)
        super().generic_visit(node)

    def _stride(self, indices: Sequence[E.Expr]) -> int | None:
        """The stride of the innermost non-vectorized loop in a (flat) index."""
        if not self.loops or not indices:
            return 0
        coefficient = _coefficient(indices[-1], self.loops[-1].var)
        return None if coefficient is None else abs(coefficient) if coefficient <= 1 else 2


def loop_features(funcs: PrimFunc | Sequence[PrimFunc]) -> tuple[float, ...]:
    """The feature vector (FEATURE_NAMES order) of a kernel; several functions add up."""
    items = [funcs] if isinstance(funcs, PrimFunc) else list(funcs)
    extract = _Extract()
    for f in items:
        extract.visit(f.body)
    v = extract.c.values
    ops = v["float_ops"] + v["int_ops"] + v["calls"]
    accesses = v["loads"] + v["stores"]
    v["vector_ops_share"] = v["vector_ops_share"] / ops if ops else 0.0
    v["intensity"] = ops / accesses if accesses else 0.0
    v["reads_per_store"] = v["loads"] / v["stores"] if v["stores"] else 0.0
    v["depth"] = extract.max_depth
    v["buffers"] = len(extract.c.buffers)
    ratios = ("vector_ops_share", "outer_parallel_share")
    return tuple(round(v[n] if n in ratios else math.log2(1.0 + v[n]), 6)
                 for n in FEATURE_NAMES)


__all__ = ["FEATURE_NAMES", "loop_features"]
