"""Test helpers for arith: a reference evaluator with Python semantics and hypothesis strategies."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

from ember.arith.canonical import ExprKeys, wrap_int
from ember.arith.interval import Interval
from ember.tir import expr as E
from ember.tir import stmt as S

Value = Any  # int, or a list of ints for vectors


def identical(a: E.Expr, b: E.Expr) -> bool:
    """Structural equality that tells variables apart by identity (structural_equal renames)."""
    return ExprKeys().same(a, b)


def _lanewise(f: Callable[[Any, Any], Any], x: Value, y: Value) -> Value:
    if isinstance(x, list) or isinstance(y, list):
        n = len(x) if isinstance(x, list) else len(y)
        xs = x if isinstance(x, list) else [x] * n
        ys = y if isinstance(y, list) else [y] * n
        return [f(p, q) for p, q in zip(xs, ys)]
    return f(x, y)


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    E.Add: lambda a, b: a + b, E.Sub: lambda a, b: a - b, E.Mul: lambda a, b: a * b,
    E.FloorDiv: lambda a, b: a // b, E.FloorMod: lambda a, b: a % b, E.Div: _trunc_div,
    E.Min: min, E.Max: max,
    E.EQ: lambda a, b: int(a == b), E.NE: lambda a, b: int(a != b),
    E.LT: lambda a, b: int(a < b), E.LE: lambda a, b: int(a <= b),
    E.GT: lambda a, b: int(a > b), E.GE: lambda a, b: int(a >= b),
    E.And: lambda a, b: int(bool(a) and bool(b)), E.Or: lambda a, b: int(bool(a) or bool(b)),
}


def evaluate(e: E.Expr, env: dict[E.Var, int], memory: dict[Any, dict[int, int]] | None = None
             ) -> Value:
    """Evaluate an integer/boolean expression with mathematical (unbounded) integers."""
    t = type(e)
    if t is E.IntImm:
        return e.value  # type: ignore[attr-defined]
    if t is E.Var:
        return env[e]  # type: ignore[index]
    op = _BINARY.get(t)
    if op is not None:
        return _lanewise(op, evaluate(e.a, env, memory), evaluate(e.b, env, memory))  # type: ignore
    match e:
        case E.Not(a):
            v = evaluate(a, env, memory)
            return [int(not x) for x in v] if isinstance(v, list) else int(not v)
        case E.Select(c, x, y):
            cv, xv, yv = (evaluate(c, env, memory), evaluate(x, env, memory),
                          evaluate(y, env, memory))
            if isinstance(cv, list) or isinstance(xv, list):
                n = len(cv) if isinstance(cv, list) else len(xv)
                cs = cv if isinstance(cv, list) else [cv] * n
                xs = xv if isinstance(xv, list) else [xv] * n
                ys = yv if isinstance(yv, list) else [yv] * n
                return [p if c_ else q for c_, p, q in zip(cs, xs, ys)]
            return xv if cv else yv
        case E.Cast(dtype, value):
            v = evaluate(value, env, memory)
            element = dtype.element
            if isinstance(v, list):
                return [wrap_int(x, element) for x in v]
            return wrap_int(v, element)
        case E.Ramp(base, stride, lanes):
            b, s = evaluate(base, env, memory), evaluate(stride, env, memory)
            return [b + s * k for k in range(lanes)]
        case E.Broadcast(value, lanes):
            return [evaluate(value, env, memory)] * lanes
        case E.Let(var, value, body):
            return evaluate(body, {**env, var: evaluate(value, env, memory)}, memory)
        case E.Load(buffer, (index,), None) if memory is not None:
            cells = memory.setdefault(buffer, {})
            i = evaluate(index, env, memory)
            if isinstance(i, list):
                return [cells.get(k, k * 7 % 13) for k in i]
            return cells.get(i, i * 7 % 13)
    raise NotImplementedError(f"evaluate: {type(e).__name__}")


def run_stmt(s: S.Stmt, env: dict[E.Var, int], memory: dict[Any, dict[int, int]]) -> None:
    """Execute a statement over `memory` (buffer -> {flat index: value})."""
    match s:
        case S.For(var, begin, extent, _, body):
            b = evaluate(begin, env, memory)
            for k in range(b, b + evaluate(extent, env, memory)):
                run_stmt(body, {**env, var: k}, memory)
        case S.Store(buffer, value, (index,), None):
            i, v = evaluate(index, env, memory), evaluate(value, env, memory)
            cells = memory.setdefault(buffer, {})
            if isinstance(i, list):
                vs = v if isinstance(v, list) else [v] * len(i)
                for k, x in zip(i, vs):
                    cells[k] = x
            else:
                cells[i] = v
        case S.IfThenElse(cond, then_case, else_case):
            if evaluate(cond, env, memory):
                run_stmt(then_case, env, memory)
            elif else_case is not None:
                run_stmt(else_case, env, memory)
        case S.Seq(stmts):
            for x in stmts:
                run_stmt(x, env, memory)
        case S.LetStmt(var, value, body):
            run_stmt(body, {**env, var: evaluate(value, env, memory)}, memory)
        case S.Evaluate():
            pass
        case _:
            raise NotImplementedError(f"run_stmt: {type(s).__name__}")


# ------------------------------------------------------------------------------------------
# hypothesis strategies
VARS = (E.Var("x"), E.Var("y"), E.Var("z"))
CONSTANTS = (-7, -3, -1, 0, 1, 2, 3, 4, 5, 8, 16, 32)
DIVISORS = (1, 2, 3, 4, 8, 16, -1, -3, -4)


@st.composite
def int_exprs(draw: st.DrawFn, variables: tuple[E.Var, ...] = VARS, depth: int = 4) -> E.Expr:
    """Random int32 expression trees over `variables`."""
    if depth <= 0 or draw(st.integers(0, 9)) < 2:
        if draw(st.booleans()):
            return draw(st.sampled_from(variables))
        return E.IntImm(draw(st.sampled_from(CONSTANTS)))
    kind = draw(st.sampled_from(("add", "add", "sub", "sub", "mul_c", "mul", "div", "div",
                                 "mod", "mod", "min", "max", "select")))
    sub = int_exprs(variables, depth - 1)
    a = draw(sub)
    match kind:
        case "add":
            return E.Add(a, draw(sub))
        case "sub":
            return E.Sub(a, draw(sub))
        case "mul_c":
            return E.Mul(a, E.IntImm(draw(st.sampled_from(CONSTANTS))))
        case "mul":
            return E.Mul(a, draw(int_exprs(variables, 1)))
        case "div":
            return E.FloorDiv(a, E.IntImm(draw(st.sampled_from(DIVISORS))))
        case "mod":
            return E.FloorMod(a, E.IntImm(draw(st.sampled_from(DIVISORS))))
        case "min":
            return E.Min(a, draw(sub))
        case "max":
            return E.Max(a, draw(sub))
    return E.Select(draw(bool_exprs(variables, depth - 1)), a, draw(sub))


@st.composite
def bool_exprs(draw: st.DrawFn, variables: tuple[E.Var, ...] = VARS, depth: int = 3) -> E.Expr:
    """Random boolean expressions: comparisons of int expressions joined by And/Or/Not."""
    kind = draw(st.sampled_from(("cmp", "cmp", "cmp", "and", "or", "not")))
    if depth <= 0 or kind == "cmp":
        cls = draw(st.sampled_from((E.EQ, E.NE, E.LT, E.LE, E.GT, E.GE)))
        sub = int_exprs(variables, max(depth, 1))
        return cls(draw(sub), draw(sub))  # type: ignore[no-any-return]
    a = draw(bool_exprs(variables, depth - 1))
    if kind == "not":
        return E.Not(a)
    b = draw(bool_exprs(variables, depth - 1))
    return E.And(a, b) if kind == "and" else E.Or(a, b)


@st.composite
def vector_exprs(draw: st.DrawFn, lanes: int = 4, variables: tuple[E.Var, ...] = VARS,
                 depth: int = 3) -> E.Expr:
    """Random int32 vector expressions built from Ramp and Broadcast of scalar expressions."""
    if depth <= 0 or draw(st.integers(0, 4)) == 0:
        base = draw(int_exprs(variables, 2))
        if draw(st.booleans()):
            return E.Broadcast(base, lanes)
        return E.Ramp(base, E.IntImm(draw(st.sampled_from((-2, -1, 0, 1, 2, 3, 4)))), lanes)
    kind = draw(st.sampled_from(("add", "sub", "mul", "div", "mod", "min", "max", "select")))
    a = draw(vector_exprs(lanes, variables, depth - 1))
    if kind == "select":  # select(p < q, a, b) lane by lane
        p, q = (draw(vector_exprs(lanes, variables, depth - 1)) for _ in range(2))
        cmp = draw(st.sampled_from((E.LT, E.LE, E.EQ, E.NE)))
        return E.Select(cmp(p, q), a, draw(vector_exprs(lanes, variables, depth - 1)))
    if kind in ("div", "mod", "mul"):
        c = E.Broadcast(E.IntImm(draw(st.sampled_from((1, 2, 3, 4, 8, 16)))), lanes)
        cls = {"div": E.FloorDiv, "mod": E.FloorMod, "mul": E.Mul}[kind]
        return cls(a, c)  # type: ignore[no-any-return]
    b = draw(vector_exprs(lanes, variables, depth - 1))
    cls = {"add": E.Add, "sub": E.Sub, "min": E.Min, "max": E.Max}[kind]
    return cls(a, b)  # type: ignore[no-any-return]


@st.composite
def envs(draw: st.DrawFn, variables: tuple[E.Var, ...] = VARS, lo: int = -50,
         hi: int = 50) -> dict[E.Var, int]:
    """Random values for `variables`."""
    return {v: draw(st.integers(lo, hi)) for v in variables}


@st.composite
def ranges_and_env(draw: st.DrawFn, variables: tuple[E.Var, ...] = VARS
                   ) -> tuple[dict[E.Var, Interval], dict[E.Var, int]]:
    """Constant ranges for some of `variables` and values inside them (free ones anywhere)."""
    ranges: dict[E.Var, Interval] = {}
    env: dict[E.Var, int] = {}
    for v in variables:
        if draw(st.integers(0, 3)) == 0:
            env[v] = draw(st.integers(-50, 50))
            continue
        begin = draw(st.sampled_from((0, 0, 0, -5, 3, 8)))
        extent = draw(st.sampled_from((1, 2, 3, 4, 7, 8, 16, 32)))
        ranges[v] = Interval.from_range(begin, extent)
        env[v] = draw(st.integers(begin, begin + extent - 1))
    return ranges, env
