"""Canonical linear forms: integer expressions as sums of coefficient * monomial + constant.

A `Sum` maps each monomial (a sorted tuple of atom keys) to its integer coefficient. Atoms are
the expressions that are not Add/Sub/Mul-by-constant (variables, divisions, min/max, loads...),
interned by structure to small ints by `ExprKeys`, so that `i*32 + j - i*32` cancels to `j`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from ember.dtype import DType
from ember.tir.expr import Add, Expr, FloatImm, FloorDiv, FloorMod, IntImm, Mul, Sub, Var
from ember.tir.function import Buffer

Monomial = tuple[int, ...]


class ExprKeys:
    """Interns expressions by structure to small ints; variables and buffers by identity."""

    def __init__(self) -> None:
        self._table: dict[tuple[Any, ...], int] = {}
        self._by_id: dict[int, tuple[Expr, int]] = {}
        self.exprs: list[Expr] = []

    def key(self, e: Expr) -> int:
        hit = self._by_id.get(id(e))
        if hit is not None:
            return hit[1]
        sig = self._signature(e)
        k = self._table.get(sig)
        if k is None:
            k = len(self.exprs)
            self._table[sig] = k
            self.exprs.append(e)
        self._by_id[id(e)] = (e, k)  # holding `e` keeps its id from being reused
        return k

    def same(self, a: Expr, b: Expr) -> bool:
        return a is b or self.key(a) == self.key(b)

    def _signature(self, e: Expr) -> tuple[Any, ...]:
        t = type(e)
        if t is Var:
            return ("var", id(e))
        if t is IntImm:
            return ("int", e.value, e.dtype)  # type: ignore[attr-defined]
        if t is FloatImm:
            value = e.value  # type: ignore[attr-defined]
            return ("float", repr(value), e.dtype)
        parts: list[Any] = [t]
        for f in _fields(t):
            parts.append(self._field(getattr(e, f)))
        return tuple(parts)

    def _field(self, value: Any) -> Any:
        if isinstance(value, Expr):
            return self.key(value)
        if isinstance(value, tuple):
            return tuple(self._field(v) for v in value)
        if value is None or isinstance(value, (int, float, str, bool, DType)):
            return value
        if isinstance(value, Buffer):
            return ("buffer", id(value))
        # IterVar, CommReducer, ...: by identity (kept alive by the expression holding them)
        return ("object", id(value))


_FIELDS: dict[type, tuple[str, ...]] = {}


def _fields(cls: type) -> tuple[str, ...]:
    names = _FIELDS.get(cls)
    if names is None:
        names = tuple(f.name for f in dataclasses.fields(cls))
        _FIELDS[cls] = names
    return names


class Sum:
    """sum(coeff * monomial) + const; treat as immutable once built."""

    __slots__ = ("terms", "const")

    def __init__(self, terms: dict[Monomial, int] | None = None, const: int = 0) -> None:
        self.terms: dict[Monomial, int] = terms if terms is not None else {}
        self.const = const

    def is_const(self) -> bool:
        return not self.terms

    def __add__(self, other: Sum) -> Sum:
        terms = dict(self.terms)
        for mono, c in other.terms.items():
            total = terms.get(mono, 0) + c
            if total:
                terms[mono] = total
            else:
                terms.pop(mono, None)
        return Sum(terms, self.const + other.const)

    def __sub__(self, other: Sum) -> Sum:
        return self + other.scale(-1)

    def scale(self, c: int) -> Sum:
        if c == 0:
            return Sum({}, 0)
        if c == 1:
            return self
        return Sum({m: v * c for m, v in self.terms.items()}, self.const * c)

    def add_const(self, c: int) -> Sum:
        return Sum(self.terms, self.const + c)

    def split(self, divisor: int) -> tuple[Sum, Sum]:
        """(terms whose coefficient `divisor` divides, the other terms plus the constant)."""
        div: dict[Monomial, int] = {}
        rest: dict[Monomial, int] = {}
        for mono, c in self.terms.items():
            (div if c % divisor == 0 else rest)[mono] = c
        return Sum(div, 0), Sum(rest, self.const)

    def coeff_gcd(self) -> int:
        g = 0
        for c in self.terms.values():
            g = math.gcd(g, c)
        return g

    def content(self) -> int:
        """The gcd of the coefficients and the constant, signed like the first coefficient."""
        g = math.gcd(self.coeff_gcd(), self.const)
        first = next(iter(self.terms.values()), self.const)
        return -g if first < 0 else g

    def exact_div(self, divisor: int) -> Sum:
        return Sum({m: c // divisor for m, c in self.terms.items()}, self.const // divisor)


def wrap_int(value: int, dtype: DType) -> int:
    """Reduce `value` to the range of the integer type (two's complement wrap-around)."""
    if dtype.is_bool:
        return int(bool(value))
    bits = dtype.bits
    lo, hi = dtype.min_value(), dtype.max_value()
    if lo <= value <= hi:
        return value
    value &= (1 << bits) - 1
    if dtype.kind == "int" and value >= 1 << (bits - 1):
        value -= 1 << bits
    return value


class Canonical:
    """Converts between simplified expressions and `Sum`s, sharing one `ExprKeys`."""

    def __init__(self, keys: ExprKeys) -> None:
        self.keys = keys
        self._sums: dict[int, tuple[Expr, Sum]] = {}
        self._mono_order: dict[Monomial, int] = {}

    # expression -> Sum ------------------------------------------------------------------
    def to_sum(self, e: Expr) -> Sum:
        hit = self._sums.get(id(e))
        if hit is not None:
            return hit[1]
        s = self._to_sum(e)
        self._sums[id(e)] = (e, s)
        return s

    def _to_sum(self, e: Expr) -> Sum:
        t = type(e)
        if t is IntImm:
            return Sum({}, e.value)  # type: ignore[attr-defined]
        if t is Add:
            return self.to_sum(e.a) + self.to_sum(e.b)  # type: ignore[attr-defined]
        if t is Sub:
            return self.to_sum(e.a) - self.to_sum(e.b)  # type: ignore[attr-defined]
        if t is Mul:
            sa = self.to_sum(e.a)  # type: ignore[attr-defined]
            sb = self.to_sum(e.b)  # type: ignore[attr-defined]
            if sa.is_const():
                return sb.scale(sa.const)
            if sb.is_const():
                return sa.scale(sb.const)
            if len(sa.terms) == 1 and len(sb.terms) == 1 and sa.const == 0 and sb.const == 0:
                # (c1*m1) * (c2*m2) -> (c1*c2) * (m1*m2)
                (m1, c1), = sa.terms.items()
                (m2, c2), = sb.terms.items()
                return self._term(tuple(sorted(m1 + m2)), c1 * c2)
            # (g1*A) * (g2*B) -> (g1*g2) * (A*B), the contents g1, g2 taken out of each side
            g1, g2 = sa.content(), sb.content()
            product = self.ordered_product(self.from_sum(sa.exact_div(g1), e.dtype),
                                           self.from_sum(sb.exact_div(g2), e.dtype))
            return self.atom(product).scale(g1 * g2)
        return self.atom(e)

    def atom(self, e: Expr) -> Sum:
        return self._term((self.keys.key(e),), 1)

    def _term(self, mono: Monomial, coeff: int) -> Sum:
        self._mono_order.setdefault(mono, len(self._mono_order))
        return Sum({mono: coeff}, 0)

    @staticmethod
    def ordered_product(a: Expr, b: Expr) -> Expr:
        """A non-linear product in a fixed operand order, so a*b and b*a are one atom."""
        if (type(b) is not Add and type(b) is not Sub, str(b)) < (
                type(a) is not Add and type(a) is not Sub, str(a)):
            a, b = b, a
        return Mul(a, b)

    # Sum -> expression ------------------------------------------------------------------
    def monomial_expr(self, mono: Monomial) -> Expr:
        exprs = self.keys.exprs
        result = exprs[mono[0]]
        for k in mono[1:]:
            result = Mul(result, exprs[k])
        return result

    def from_sum(self, s: Sum, dtype: DType) -> Expr:
        """Readable form: positive terms first, larger coefficients first, constant last."""
        if not s.terms:
            return IntImm(wrap_int(s.const, dtype), dtype)
        order = self._mono_order
        ranked = sorted(s.terms.items(),
                        key=lambda mc: (mc[1] < 0, -abs(mc[1]), order.get(mc[0], 1 << 60)))
        acc: Expr | None = None
        const = s.const
        for mono, c in ranked:
            term = self.monomial_expr(mono)
            magnitude = abs(c)
            if magnitude != 1:
                term = Mul(term, IntImm(wrap_int(magnitude, dtype), dtype))
            if acc is None:
                if c > 0:
                    acc = term
                    continue
                # every term is negative: `const - t` or `0 - t`
                acc = IntImm(wrap_int(const if const > 0 else 0, dtype), dtype)
                if const > 0:
                    const = 0
            acc = Add(acc, term) if c > 0 else Sub(acc, term)
        assert acc is not None
        if const > 0:
            acc = Add(acc, IntImm(wrap_int(const, dtype), dtype))
        elif const < 0:
            acc = Sub(acc, IntImm(wrap_int(-const, dtype), dtype))
        return acc

    def fuse_div_mod(self, s: Sum) -> Sum:
        """(x // c) * (k*c) + (x % c) * k -> x * k, wherever both terms appear."""
        exprs = self.keys.exprs
        for mono, k in list(s.terms.items()):
            if len(mono) != 1 or mono not in s.terms:
                continue
            mod = exprs[mono[0]]
            if type(mod) is not FloorMod or type(mod.b) is not IntImm:  # type: ignore[attr-defined]
                continue
            c = mod.b.value  # type: ignore[attr-defined]
            if c <= 0:
                continue
            div_mono = (self.keys.key(FloorDiv(mod.a, mod.b)),)  # type: ignore[attr-defined]
            if s.terms.get(div_mono) != k * c:
                continue
            terms = dict(s.terms)
            del terms[mono], terms[div_mono]
            s = Sum(terms, s.const) + self.to_sum(mod.a).scale(k)  # type: ignore[attr-defined]
        return s
