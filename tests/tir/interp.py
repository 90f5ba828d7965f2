"""A reference interpreter for the loop IR (numpy based): runs a PrimFunc on numpy arrays.

Scalars are 0-d arrays and vectors 1-d arrays, so vector nodes (Ramp, Broadcast, vector
Load/Store with predicates) run the same as scalar ones. Loads and stores are bounds-checked
and fresh allocations are filled with NaN (or a marker integer) so that reads of unwritten
memory show up. Multi-dimensional accesses use Buffer.element_strides(), so the same program
runs before and after flatten_buffers.

    interp.run(func, a, b, c)      # arrays are modified in place, like a compiled Module
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from ember.dtype import DType
from ember.tir import expr as E
from ember.tir import stmt as S
from ember.tir.function import Buffer, PrimFunc


class InterpError(Exception):
    """The program did something undefined: out-of-bounds access, unbound variable, ..."""


_erf = np.vectorize(math.erf, otypes=[np.float64])

_CALLS: dict[str, Callable[..., Any]] = {
    "exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sqrt": np.sqrt,
    "rsqrt": lambda x: 1.0 / np.sqrt(x), "tanh": np.tanh,
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)), "erf": lambda x: _erf(x),
    "pow": np.power, "floor": np.floor, "ceil": np.ceil, "round": np.round,
    "trunc": np.trunc, "fabs": np.abs, "sin": np.sin, "cos": np.cos,
    "fma": lambda a, b, c: a * b + c,
}

_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    E.Add: np.add, E.Sub: np.subtract, E.Mul: np.multiply, E.Min: np.minimum,
    E.Max: np.maximum, E.EQ: np.equal, E.NE: np.not_equal, E.LT: np.less,
    E.LE: np.less_equal, E.GT: np.greater, E.GE: np.greater_equal,
    E.And: np.logical_and, E.Or: np.logical_or,
}


def _np(dtype: DType) -> np.dtype:
    return dtype.element.numpy


def buffer_size(buf: Buffer, ev: Callable[[E.Expr], Any]) -> int:
    """Elements a buffer spans (including stride padding)."""
    if not buf.shape:
        return 1
    shape = [int(ev(s)) for s in buf.shape]
    strides = [int(ev(s)) for s in buf.element_strides()]
    if min(shape) == 0:
        return 0
    return max(1 + sum((d - 1) * s for d, s in zip(shape, strides)),
               max(d * s for d, s in zip(shape, strides)))


class Interpreter:
    def __init__(self) -> None:
        self.env: dict[E.Var, Any] = {}
        self.mem: dict[E.Var, np.ndarray] = {}
        self.stores = 0

    # expressions ---------------------------------------------------------------------
    def eval(self, e: E.Expr) -> Any:
        match e:
            case E.Var():
                if e not in self.env:
                    raise InterpError(f"unbound variable {e.name}")
                return self.env[e]
            case E.IntImm(value, dtype) | E.FloatImm(value, dtype):
                return np.array(value, _np(dtype))
            case E.Div(a, b):
                x, y = self.eval(a), self.eval(b)
                if e.dtype.is_float:
                    with np.errstate(all="ignore"):
                        return np.asarray(x / y, _np(e.dtype))
                self._check_nonzero(y, e)
                q = np.abs(x) // np.abs(y)
                return np.asarray(q * np.sign(x) * np.sign(y), _np(e.dtype))
            case E.FloorDiv(a, b) | E.FloorMod(a, b):
                x, y = self.eval(a), self.eval(b)
                self._check_nonzero(y, e)
                fn = np.floor_divide if isinstance(e, E.FloorDiv) else np.mod
                return np.asarray(fn(x, y), _np(e.dtype))
            case E.BinaryOp(a, b):
                with np.errstate(all="ignore"):
                    out = _BINARY[type(e)](self.eval(a), self.eval(b))
                return np.asarray(out, _np(e.dtype))
            case E.Not(a):
                return np.logical_not(self.eval(a))
            case E.Cast(dtype, value):
                v = self.eval(value)
                if dtype.is_bool:
                    return np.asarray(v != 0)
                with np.errstate(all="ignore"):
                    return np.asarray(v).astype(_np(dtype))
            case E.Select(c, t, f):
                return np.asarray(np.where(self.eval(c), self.eval(t), self.eval(f)),
                                  _np(e.dtype))
            case E.Ramp(base, stride, lanes):
                b, s = self.eval(base), self.eval(stride)
                return np.asarray(b + s * np.arange(lanes), _np(e.dtype))
            case E.Broadcast(value, lanes):
                return np.full(lanes, self.eval(value), _np(e.dtype))
            case E.Let(var, value, body):
                old = self.env.get(var)
                self.env[var] = self.eval(value)
                try:
                    return self.eval(body)
                finally:
                    self._restore(var, old)
            case E.Load(buffer, indices, predicate):
                return self._load(buffer, indices, predicate)
            case E.Call(dtype, name, args):
                if name not in _CALLS:
                    raise InterpError(f"unknown call {name}")
                values = [self.eval(a) for a in args]
                with np.errstate(all="ignore"):
                    out = _CALLS[name](*[np.asarray(v, np.float64) for v in values])
                return np.asarray(out).astype(_np(dtype))
        raise InterpError(f"cannot evaluate {type(e).__name__}: {e}")

    def _check_nonzero(self, y: Any, e: E.Expr) -> None:
        if np.any(np.asarray(y) == 0):
            raise InterpError(f"integer division by zero in {e}")

    def _restore(self, var: E.Var, old: Any) -> None:
        if old is None:
            self.env.pop(var, None)
        else:
            self.env[var] = old

    def _address(self, buffer: Buffer, indices: tuple[E.Expr, ...],
                 predicate: E.Expr | None) -> tuple[np.ndarray, Any, Any]:
        if buffer.data not in self.mem:
            raise InterpError(f"buffer {buffer.name} is not allocated here")
        arr = self.mem[buffer.data]
        if len(indices) != len(buffer.shape):
            raise InterpError(f"{buffer.name}: {len(indices)} indices for "
                              f"{len(buffer.shape)} dimensions")
        strides = [self.eval(s) for s in buffer.element_strides()]
        flat: Any = 0
        for index, stride in zip(indices, strides):
            flat = flat + self.eval(index).astype(np.int64) * np.int64(stride)
        flat = np.asarray(flat)
        mask = None if predicate is None else np.asarray(self.eval(predicate))
        live = flat if mask is None else flat[np.broadcast_to(mask, flat.shape)]
        if live.size and (live.min() < 0 or live.max() >= arr.size):
            raise InterpError(f"{buffer.name}: index {flat} out of bounds [0, {arr.size})")
        return arr, flat, mask

    def _load(self, buffer: Buffer, indices: tuple[E.Expr, ...],
              predicate: E.Expr | None) -> Any:
        arr, flat, mask = self._address(buffer, indices, predicate)
        if mask is None:
            return np.asarray(arr[flat])
        out = np.zeros(flat.shape, arr.dtype)
        mask = np.broadcast_to(mask, flat.shape)
        out[mask] = arr[flat[mask]]
        return out

    # statements ------------------------------------------------------------------------
    def exec(self, s: S.Stmt) -> None:
        match s:
            case S.Seq(stmts):
                for item in stmts:
                    self.exec(item)
            case S.For(var, begin, extent, _kind, body):
                b, n = int(self.eval(begin)), int(self.eval(extent))
                old = self.env.get(var)
                for i in range(b, b + n):
                    self.env[var] = np.array(i, _np(var.dtype))
                    self.exec(body)
                self._restore(var, old)
            case S.Store(buffer, value, indices, predicate):
                arr, flat, mask = self._address(buffer, indices, predicate)
                v = np.broadcast_to(np.asarray(self.eval(value)), flat.shape)
                if mask is None:
                    arr[flat] = v
                else:
                    mask = np.broadcast_to(mask, flat.shape)
                    arr[flat[mask]] = v[mask]
                self.stores += 1
            case S.Allocate(buffer, body):
                size = buffer_size(buffer, self.eval)
                kind = buffer.dtype.element
                if kind.is_float:
                    arr = np.full(size, np.nan, _np(kind))
                elif kind.is_bool:
                    arr = np.zeros(size, np.bool_)
                else:
                    arr = np.full(size, 77, _np(kind))
                old = self.mem.get(buffer.data)
                self.mem[buffer.data] = arr
                try:
                    self.exec(body)
                finally:
                    if old is None:
                        del self.mem[buffer.data]
                    else:
                        self.mem[buffer.data] = old
            case S.IfThenElse(condition, then_case, else_case):
                c = self.eval(condition)
                if np.ndim(c) != 0:
                    raise InterpError(f"if-condition {condition} is a vector")
                if bool(c):
                    self.exec(then_case)
                elif else_case is not None:
                    self.exec(else_case)
            case S.LetStmt(var, value, body):
                old = self.env.get(var)
                self.env[var] = self.eval(value)
                self.exec(body)
                self._restore(var, old)
            case S.Evaluate(value):
                self.eval(value)
            case S.AttrStmt(_key, _value, body):
                self.exec(body)
            case S.Barrier():
                pass
            case _:
                raise InterpError(f"cannot execute {type(s).__name__}")


def run(func: PrimFunc, *args: Any) -> Interpreter:
    """Run `func` on numpy arrays (buffers, modified in place) and scalars, in param order."""
    if len(args) != len(func.params):
        raise InterpError(f"{func.name} takes {len(func.params)} arguments, got {len(args)}")
    it = Interpreter()
    for param, arg in zip(func.params, args):
        if isinstance(param, Buffer):
            flat = arg.reshape(-1)
            assert np.shares_memory(flat, arg), "arguments must be contiguous"
            it.mem[param.data] = flat
        else:
            it.env[param] = np.array(arg, _np(param.dtype))
    it.exec(func.body)
    return it


def random_args(func: PrimFunc, seed: int = 0) -> list[np.ndarray]:
    """Seeded random arrays matching the buffer params (static shapes)."""
    rng = np.random.default_rng(seed)
    out = []
    for p in func.params:
        assert isinstance(p, Buffer), "random_args handles buffer params only"
        shape = tuple(int(d.value) for d in p.shape)  # type: ignore[attr-defined]
        if p.dtype.is_float:
            out.append(rng.standard_normal(shape).astype(p.dtype.numpy))
        elif p.dtype.is_bool:
            out.append(rng.random(shape) < 0.5)
        else:
            out.append(rng.integers(0, 10, shape).astype(p.dtype.numpy))
    return out


def assert_same_results(before: PrimFunc, after: PrimFunc, seed: int = 0,
                        rtol: float = 1e-6, atol: float = 1e-6) -> list[np.ndarray]:
    """Run both functions on the same random inputs and compare every buffer afterwards."""
    args = random_args(before, seed)
    ref = [a.copy() for a in args]
    run(before, *ref)
    got = [a.copy() for a in args]
    run(after, *got)
    for p, x, y in zip(before.params, ref, got):
        np.testing.assert_allclose(y, x, rtol=rtol, atol=atol, err_msg=f"buffer {p.name}")
    return ref
