"""Interval: inclusive integer bounds [lo, hi] with symbolic endpoints; None means unbounded."""

from __future__ import annotations

from dataclasses import dataclass

from ember.tir.expr import Expr, IntImm, convert


@dataclass(frozen=True, eq=False)
class Interval:
    """The inclusive range lo <= x <= hi; an endpoint of None is unbounded on that side.

    >>> Interval.from_range(0, 32)      # a loop `for i in range(32)`: [0, 31]
    """

    lo: Expr | None
    hi: Expr | None

    def __post_init__(self) -> None:
        # accept plain Python ints for convenience
        if self.lo is not None and not isinstance(self.lo, Expr):
            object.__setattr__(self, "lo", convert(self.lo))
        if self.hi is not None and not isinstance(self.hi, Expr):
            object.__setattr__(self, "hi", convert(self.hi))

    @staticmethod
    def point(e: Expr | int) -> Interval:
        """The interval holding exactly `e`."""
        value = convert(e)
        return Interval(value, value)

    @staticmethod
    def from_range(begin: Expr | int, extent: Expr | int) -> Interval:
        """The values of `for v in [begin, begin + extent)`: [begin, begin + extent - 1]."""
        from ember.arith.simplify import simplify

        lo = convert(begin)
        hi = simplify(lo + convert(extent, lo.dtype) - 1)
        return Interval(lo, hi)

    @staticmethod
    def everything() -> Interval:
        return Interval(None, None)

    def is_point(self) -> bool:
        """True if lo and hi are the same expression (constants compared by value)."""
        if self.lo is None or self.hi is None:
            return False
        if self.lo is self.hi:
            return True
        if isinstance(self.lo, IntImm) and isinstance(self.hi, IntImm):
            return self.lo.value == self.hi.value
        from ember.arith.canonical import ExprKeys

        return ExprKeys().same(self.lo, self.hi)  # variables by identity

    def __repr__(self) -> str:
        lo = "-inf" if self.lo is None else str(self.lo)
        hi = "+inf" if self.hi is None else str(self.hi)
        return f"Interval[{lo}, {hi}]"


def union(a: Interval, b: Interval) -> Interval:
    """The smallest interval holding both `a` and `b` (endpoints simplified)."""
    from ember.arith.simplify import simplify
    from ember.tir.expr import Max, Min

    lo = None if a.lo is None or b.lo is None else simplify(Min(a.lo, b.lo))
    hi = None if a.hi is None or b.hi is None else simplify(Max(a.hi, b.hi))
    return Interval(lo, hi)
