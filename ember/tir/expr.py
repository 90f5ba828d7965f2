"""Expression nodes of the loop IR: Var, constants, arithmetic, casts, Select, Ramp, Load, Call.

Python operators on expressions build IR (`i + 1`, `i == j`, `x < 3`), as in Halide and TVM.
Compiler code compares expressions with `structural_equal`, never with `==`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Union

from ember import dtype as dt
from ember.dtype import DType
from ember.errors import DTypeError, EmberError

if TYPE_CHECKING:
    from ember.tir.function import Buffer


class Expr:
    """Base of every expression; subclasses are frozen dataclasses with a `dtype`."""

    __hash__ = object.__hash__
    dtype: DType

    # arithmetic -----------------------------------------------------------------------
    def __add__(self, other: ExprLike) -> Expr:
        return Add(*_pair(self, other))

    def __radd__(self, other: ExprLike) -> Expr:
        return Add(*_pair(other, self))

    def __sub__(self, other: ExprLike) -> Expr:
        return Sub(*_pair(self, other))

    def __rsub__(self, other: ExprLike) -> Expr:
        return Sub(*_pair(other, self))

    def __mul__(self, other: ExprLike) -> Expr:
        return Mul(*_pair(self, other))

    def __rmul__(self, other: ExprLike) -> Expr:
        return Mul(*_pair(other, self))

    def __truediv__(self, other: ExprLike) -> Expr:
        return _true_div(*_pair(self, other))

    def __rtruediv__(self, other: ExprLike) -> Expr:
        return _true_div(*_pair(other, self))

    def __floordiv__(self, other: ExprLike) -> Expr:
        return _floor_div(*_pair(self, other))

    def __rfloordiv__(self, other: ExprLike) -> Expr:
        return _floor_div(*_pair(other, self))

    def __mod__(self, other: ExprLike) -> Expr:
        a, b = _pair(self, other)
        _require_int("%", a)
        return FloorMod(a, b)

    def __rmod__(self, other: ExprLike) -> Expr:
        a, b = _pair(other, self)
        _require_int("%", a)
        return FloorMod(a, b)

    def __neg__(self) -> Expr:
        if isinstance(self, IntImm):
            return IntImm(-self.value, self.dtype)
        if isinstance(self, FloatImm):
            return FloatImm(-self.value, self.dtype)
        return Sub(const(0, self.dtype), self)

    def __pos__(self) -> Expr:
        return self

    # comparisons build expressions ------------------------------------------------------
    def __eq__(self, other: object) -> Expr:  # type: ignore[override]
        return EQ(*_pair(self, other))  # type: ignore[arg-type]

    def __ne__(self, other: object) -> Expr:  # type: ignore[override]
        return NE(*_pair(self, other))  # type: ignore[arg-type]

    def __lt__(self, other: ExprLike) -> Expr:
        return LT(*_pair(self, other))

    def __le__(self, other: ExprLike) -> Expr:
        return LE(*_pair(self, other))

    def __gt__(self, other: ExprLike) -> Expr:
        return GT(*_pair(self, other))

    def __ge__(self, other: ExprLike) -> Expr:
        return GE(*_pair(self, other))

    # logic -------------------------------------------------------------------------------
    def __and__(self, other: ExprLike) -> Expr:
        return And(*_logical_pair(self, other))

    def __rand__(self, other: ExprLike) -> Expr:
        return And(*_logical_pair(other, self))

    def __or__(self, other: ExprLike) -> Expr:
        return Or(*_logical_pair(self, other))

    def __ror__(self, other: ExprLike) -> Expr:
        return Or(*_logical_pair(other, self))

    def __invert__(self) -> Expr:
        if not self.dtype.is_bool:
            raise DTypeError(f"'~' needs a bool expression, got {self.dtype}")
        return Not(self)

    def __bool__(self) -> bool:
        raise EmberError("an expression has no truth value; use te.if_then_else / te.all / "
                         "te.any to build conditions, or structural_equal to compare IR")

    def astype(self, dtype: str | DType) -> Expr:
        """Cast to another dtype: `x.astype("float32")`."""
        target = dt.parse(dtype)
        if (target.is_storage_only or self.dtype.is_storage_only) and target != self.dtype:
            raise DTypeError(f"cannot cast {self.dtype} to {target} in an expression: storage "
                             "types convert with ember.ops.lowp.convert")
        if self.dtype.lanes > 1 and target.lanes == 1:
            target = target.with_lanes(self.dtype.lanes)
        return self if target == self.dtype else Cast(target, self)

    def __str__(self) -> str:
        from ember.tir.printer import expr_to_str

        return expr_to_str(self)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self}>"


ExprLike = Union[Expr, int, float, bool]


# ------------------------------------------------------------------------------------------
# leaves
@dataclass(frozen=True, eq=False, repr=False)
class Var(Expr):
    """A named scalar variable; identity, not name, tells two variables apart."""

    name: str
    dtype: DType = dt.int32

    def __post_init__(self) -> None:
        if not isinstance(self.dtype, DType):
            object.__setattr__(self, "dtype", dt.parse(self.dtype))


@dataclass(frozen=True, eq=False, repr=False)
class IntImm(Expr):
    value: int
    dtype: DType = dt.int32

    def __post_init__(self) -> None:
        assert isinstance(self.value, int) and (self.dtype.is_int or self.dtype.is_bool), self


@dataclass(frozen=True, eq=False, repr=False)
class FloatImm(Expr):
    value: float
    dtype: DType = dt.float32

    def __post_init__(self) -> None:
        assert self.dtype.is_float, self.dtype


@dataclass(frozen=True, eq=False, repr=False)
class StringImm(Expr):
    value: str

    @property
    def dtype(self) -> DType:  # type: ignore[override]
        return dt.handle


# ------------------------------------------------------------------------------------------
# binary arithmetic: dtype follows the operands, which must agree
@dataclass(frozen=True, eq=False, repr=False)
class BinaryOp(Expr):
    a: Expr
    b: Expr

    def __post_init__(self) -> None:
        assert self.a.dtype == self.b.dtype, (type(self).__name__, self.a.dtype, self.b.dtype)

    @property
    def dtype(self) -> DType:  # type: ignore[override]
        return self.a.dtype


class Add(BinaryOp):
    pass


class Sub(BinaryOp):
    pass


class Mul(BinaryOp):
    pass


class Div(BinaryOp):
    """Float division, or truncating integer division (C semantics)."""


class FloorDiv(BinaryOp):
    """Integer division rounding toward negative infinity (Python's //)."""


class FloorMod(BinaryOp):
    """Integer remainder with the sign of the divisor (Python's %)."""


class Min(BinaryOp):
    pass


class Max(BinaryOp):
    pass


# comparisons: dtype is bool with the operands' lanes
@dataclass(frozen=True, eq=False, repr=False)
class CompareOp(BinaryOp):
    @property
    def dtype(self) -> DType:  # type: ignore[override]
        return dt.bool_.with_lanes(self.a.dtype.lanes)


class EQ(CompareOp):
    pass


class NE(CompareOp):
    pass


class LT(CompareOp):
    pass


class LE(CompareOp):
    pass


class GT(CompareOp):
    pass


class GE(CompareOp):
    pass


class And(BinaryOp):
    pass


class Or(BinaryOp):
    pass


# bitwise operations on integers (And / Or / Not are the logical ones, on bools; Not on an
# integer is its bitwise complement)
class BitwiseAnd(BinaryOp):
    pass


class BitwiseOr(BinaryOp):
    pass


class BitwiseXor(BinaryOp):
    pass


@dataclass(frozen=True, eq=False, repr=False)
class Not(Expr):
    a: Expr

    @property
    def dtype(self) -> DType:  # type: ignore[override]
        return self.a.dtype


# ------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False, repr=False)
class Cast(Expr):
    dtype: DType
    value: Expr

    def __post_init__(self) -> None:
        assert self.dtype.lanes == self.value.dtype.lanes, (self.dtype, self.value.dtype)


@dataclass(frozen=True, eq=False, repr=False)
class Select(Expr):
    """`condition ? true_value : false_value`; both branches may be evaluated."""

    condition: Expr
    true_value: Expr
    false_value: Expr

    def __post_init__(self) -> None:
        assert self.true_value.dtype == self.false_value.dtype, (
            self.true_value.dtype, self.false_value.dtype)
        assert self.condition.dtype.is_bool, self.condition.dtype

    @property
    def dtype(self) -> DType:  # type: ignore[override]
        return self.true_value.dtype


@dataclass(frozen=True, eq=False, repr=False)
class Ramp(Expr):
    """The vector [base, base + stride, ..., base + (lanes - 1) * stride]."""

    base: Expr
    stride: Expr
    lanes: int

    def __post_init__(self) -> None:
        assert self.base.dtype.lanes == 1 and self.base.dtype == self.stride.dtype

    @property
    def dtype(self) -> DType:  # type: ignore[override]
        return self.base.dtype.with_lanes(self.lanes)


@dataclass(frozen=True, eq=False, repr=False)
class Broadcast(Expr):
    """The vector holding `value` in each of `lanes` lanes."""

    value: Expr
    lanes: int

    def __post_init__(self) -> None:
        assert self.value.dtype.lanes == 1

    @property
    def dtype(self) -> DType:  # type: ignore[override]
        return self.value.dtype.with_lanes(self.lanes)


@dataclass(frozen=True, eq=False, repr=False)
class Let(Expr):
    var: Var
    value: Expr
    body: Expr

    @property
    def dtype(self) -> DType:  # type: ignore[override]
        return self.body.dtype


@dataclass(frozen=True, eq=False, repr=False)
class Load(Expr):
    """Read `buffer[indices]`; a vector index (Ramp) reads a vector.

    Before flatten_buffers there is one index per buffer dimension; after it, one flat index.
    """

    buffer: Buffer
    indices: tuple[Expr, ...]
    predicate: Expr | None = None

    @property
    def dtype(self) -> DType:  # type: ignore[override]
        lanes = max((i.dtype.lanes for i in self.indices), default=1)
        return self.buffer.dtype.with_lanes(lanes)


@dataclass(frozen=True, eq=False, repr=False)
class Call(Expr):
    """A call of a math intrinsic ("exp", "sqrt", ...) or an external function by name."""

    dtype: DType
    name: str
    args: tuple[Expr, ...]


class IterKind(Enum):
    DATA_PARALLEL = "data_par"
    REDUCE = "reduce"
    THREAD = "thread"
    OPAQUE = "opaque"


@dataclass(frozen=True, eq=False, repr=False)
class Range:
    """The integer interval [begin, begin + extent)."""

    begin: Expr
    extent: Expr

    @staticmethod
    def from_extent(extent: ExprLike) -> Range:
        return Range(const(0), convert(extent))

    def __repr__(self) -> str:
        return f"Range({self.begin}, {self.extent})"


@dataclass(frozen=True, eq=False, repr=False)
class IterVar:
    """A loop axis: its variable, domain and kind (spatial, reduction, thread)."""

    var: Var
    dom: Range
    kind: IterKind = IterKind.DATA_PARALLEL
    thread_tag: str = ""

    @property
    def name(self) -> str:
        return self.var.name

    def __repr__(self) -> str:
        return f"IterVar({self.var.name}, {self.dom}, {self.kind.value})"

    # an IterVar used in arithmetic stands for its variable
    def _as_expr(self) -> Var:
        return self.var


def _delegate_to_var(name: str) -> object:
    def method(self: IterVar, *args: object) -> object:
        return getattr(self.var, name)(*args)

    method.__name__ = name
    return method


# an IterVar in arithmetic stands for its variable: `k * 2`, `k < i`, `k.astype("int64")`
for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
              "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__", "__neg__", "__lt__",
              "__le__", "__gt__", "__ge__", "astype"):
    setattr(IterVar, _name, _delegate_to_var(_name))


@dataclass(frozen=True, eq=False, repr=False)
class CommReducer:
    """A commutative reduction: result = combine(lhs, rhs) element-wise, starting at identity."""

    lhs: tuple[Var, ...]
    rhs: tuple[Var, ...]
    result: tuple[Expr, ...]
    identity: tuple[Expr, ...]


@dataclass(frozen=True, eq=False, repr=False)
class Reduce(Expr):
    """A reduction over `axis` of `source` with `combiner`; only in te compute bodies."""

    combiner: CommReducer
    source: tuple[Expr, ...]
    axis: tuple[IterVar, ...]
    condition: Expr
    value_index: int = 0

    @property
    def dtype(self) -> DType:  # type: ignore[override]
        return self.source[self.value_index].dtype


# ------------------------------------------------------------------------------------------
# building helpers
def const(value: int | float | bool, dtype: str | DType | None = None) -> Expr:
    """A constant: `const(1)` is int32, `const(1.0)` float32, `const(2, "float16")`."""
    if dtype is None:
        if isinstance(value, bool):
            dtype = dt.bool_
        elif isinstance(value, int):
            dtype = dt.int32 if -(2**31) <= value < 2**31 else dt.int64
        else:
            dtype = dt.float32
    dtype = dt.parse(dtype)
    if dtype.lanes > 1:
        return Broadcast(const(value, dtype.element), dtype.lanes)
    if dtype.is_float:
        return FloatImm(float(value), dtype)
    if dtype.is_bool:
        return IntImm(int(bool(value)), dtype)
    if dtype.is_handle:
        raise DTypeError("cannot make a constant of type handle")
    if isinstance(value, float) and not value.is_integer():
        raise DTypeError(f"cannot make an integer constant of type {dtype} from {value}")
    return IntImm(int(value), dtype)


def convert(value: object, like: DType | None = None) -> Expr:
    """Turn a Python number, an IterVar or an Expr into an Expr.

    A Python number takes the type `like` (the other operand's) when it fits it.
    """
    if isinstance(value, Expr):
        return value
    if isinstance(value, IterVar):
        return value.var
    if hasattr(value, "_as_expr"):
        return value._as_expr()  # type: ignore[no-any-return, attr-defined]
    if isinstance(value, (bool, int, float)) or type(value).__module__ == "numpy":
        import numpy as np

        if isinstance(value, np.generic):
            value = value.item()
        if like is not None:
            like = like.element
            if isinstance(value, bool) and like.is_bool:
                return const(value, like)
            if isinstance(value, int) and not isinstance(value, bool) and not like.is_bool:
                return const(value, like)
            if isinstance(value, float) and like.is_float:
                return const(value, like)
        return const(value)  # type: ignore[arg-type]
    raise DTypeError(f"cannot use {type(value).__name__} {value!r} as an expression")


def _pair(a: object, b: object) -> tuple[Expr, Expr]:
    """Convert both operands and bring them to one dtype (vector lanes broadcast)."""
    a_expr = convert(a, _dtype_of(b))
    b_expr = convert(b, a_expr.dtype)
    if isinstance(a, (int, float)) and not isinstance(a, Expr):
        a_expr = convert(a, b_expr.dtype)
    if a_expr.dtype == b_expr.dtype:
        return a_expr, b_expr
    lanes = max(a_expr.dtype.lanes, b_expr.dtype.lanes)
    if a_expr.dtype.lanes == 1 and lanes > 1:
        a_expr = Broadcast(a_expr, lanes)
    if b_expr.dtype.lanes == 1 and lanes > 1:
        b_expr = Broadcast(b_expr, lanes)
    if a_expr.dtype == b_expr.dtype:
        return a_expr, b_expr
    common = dt.promote(a_expr.dtype, b_expr.dtype)
    return a_expr.astype(common), b_expr.astype(common)


def _dtype_of(value: object) -> DType | None:
    if isinstance(value, Expr):
        return value.dtype
    if isinstance(value, IterVar):
        return value.var.dtype
    return None


def _logical_pair(a: object, b: object) -> tuple[Expr, Expr]:
    x, y = _pair(a, b)
    if not x.dtype.is_bool:
        raise DTypeError(f"'&' / '|' need bool expressions, got {x.dtype}; "
                         "compare first, e.g. (i < 3) & (j > 0)")
    return x, y


def _require_int(op: str, a: Expr) -> None:
    if not a.dtype.is_int:
        raise DTypeError(f"'{op}' needs integer operands, got {a.dtype}")


def _true_div(a: Expr, b: Expr) -> Expr:
    if not a.dtype.is_float:
        raise DTypeError(f"'/' on {a.dtype} operands is ambiguous; use '//' for floor "
                         "division or cast to a float type first")
    return Div(a, b)


def _floor_div(a: Expr, b: Expr) -> Expr:
    _require_int("//", a)
    return FloorDiv(a, b)


def is_const_int(e: Expr, value: int | None = None) -> bool:
    """True if `e` is an integer constant (equal to `value` when given)."""
    if isinstance(e, IntImm):
        return value is None or e.value == value
    return False


def as_const_int(e: Expr) -> int | None:
    return e.value if isinstance(e, IntImm) else None
