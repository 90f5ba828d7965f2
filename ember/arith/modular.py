"""Modular analysis: prove that an integer expression equals coeff*k + base for some integer k."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ember.arith.interval import Interval
from ember.tir.expr import (
    Add, Broadcast, Cast, Expr, FloorDiv, FloorMod, IntImm, Let, Max, Min, Mul, Ramp, Select,
    Sub, Var,
)


@dataclass(frozen=True)
class ModularSet:
    """The set {coeff*k + base | k integer}; coeff 0 means the constant `base`.

    `base` is normalized into [0, coeff) when coeff > 0. ModularSet(1, 0) says nothing.
    """

    coeff: int
    base: int

    def __post_init__(self) -> None:
        assert self.coeff >= 0
        if self.coeff > 0 and not 0 <= self.base < self.coeff:
            object.__setattr__(self, "base", self.base % self.coeff)

    def contains(self, value: int) -> bool:
        if self.coeff == 0:
            return value == self.base
        return (value - self.base) % self.coeff == 0


EVERYTHING = ModularSet(1, 0)


def modular_set(e: Expr, ranges: dict[Var, Interval] | None = None) -> ModularSet:
    """What `e` is congruent to, e.g. modular_set(i*8 + 4) == ModularSet(8, 4).

    Variables whose range is a single constant count as that constant; other variables
    (and anything not understood) may be any integer. For vectors: every lane.
    """
    return _Modular(ranges or {}).visit(e)


def _union(a: ModularSet, b: ModularSet) -> ModularSet:
    # both sets lie in {g*k + a.base} with g = gcd(a.coeff, b.coeff, |a.base - b.base|)
    g = math.gcd(math.gcd(a.coeff, b.coeff), abs(a.base - b.base))
    return ModularSet(g, a.base)


def _add(a: ModularSet, b: ModularSet) -> ModularSet:
    return ModularSet(math.gcd(a.coeff, b.coeff), a.base + b.base)


def _neg(a: ModularSet) -> ModularSet:
    return ModularSet(a.coeff, -a.base)


def _mul(a: ModularSet, b: ModularSet) -> ModularSet:
    # (c1*k1 + b1)(c2*k2 + b2) = c1c2*k1k2 + c1b2*k1 + c2b1*k2 + b1b2
    g = math.gcd(math.gcd(a.coeff * b.coeff, a.coeff * b.base), b.coeff * a.base)
    return ModularSet(g, a.base * b.base)


class _Modular:
    def __init__(self, ranges: dict[Var, Interval]) -> None:
        self.ranges = ranges

    def visit(self, e: Expr) -> ModularSet:
        if not (e.dtype.is_int or e.dtype.is_bool):
            return EVERYTHING
        match e:
            case IntImm(value):
                return ModularSet(0, value)
            case Var():
                rng = self.ranges.get(e)
                if rng is not None and isinstance(rng.lo, IntImm) and isinstance(rng.hi, IntImm):
                    if rng.lo.value == rng.hi.value:
                        return ModularSet(0, rng.lo.value)
                return EVERYTHING
            case Add(a, b):
                return _add(self.visit(a), self.visit(b))
            case Sub(a, b):
                return _add(self.visit(a), _neg(self.visit(b)))
            case Mul(a, b):
                return _mul(self.visit(a), self.visit(b))
            case FloorDiv(a, IntImm(c)) if c > 0:
                return self._floordiv(self.visit(a), c)
            case FloorMod(a, IntImm(c)) if c > 0:
                # x = coeff*k + base and g | coeff, c  =>  x % c = g*k' + base % g
                m = self.visit(a)
                if m.coeff == 0:
                    return ModularSet(0, m.base % c)
                g = math.gcd(m.coeff, c)
                return ModularSet(g, m.base % g)
            case Min(a, b) | Max(a, b):
                return _union(self.visit(a), self.visit(b))
            case Select(_, t, f):
                return _union(self.visit(t), self.visit(f))
            case Cast(dtype, value) if dtype.is_int and value.dtype.is_int:
                # a cast that may wrap keeps congruences modulo powers of two only; assume
                # index casts do not wrap, as the rest of the arithmetic layer does
                return self.visit(value)
            case Broadcast(value):
                return self.visit(value)
            case Ramp(base, stride, lanes):
                lane = ModularSet(1, 0) if lanes > 1 else ModularSet(0, 0)
                return _add(self.visit(base), _mul(self.visit(stride), lane))
            case Let(_, _, body):
                return self.visit(body)
        return EVERYTHING

    @staticmethod
    def _floordiv(m: ModularSet, c: int) -> ModularSet:
        if m.coeff == 0:
            return ModularSet(0, m.base // c)
        if m.coeff % c == 0:
            # (c*q*k + base) // c = q*k + base // c
            return ModularSet(m.coeff // c, m.base // c)
        return EVERYTHING
