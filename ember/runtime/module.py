"""Module: a compiled function callable with numpy arrays; checks every argument first.

Calling convention of every generated function (LLVM and C back ends alike):
    int32_t name(void *buf0, void *buf1, ..., <scalar params by value>)
one pointer per Buffer parameter (its data), scalar Var parameters by value, in the order of
PrimFunc.params. It returns 0 on success.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ember.dtype import DType
from ember.errors import ArgumentError, EmberError


@dataclass(frozen=True)
class Param:
    """What a parameter accepts: a buffer of fixed shape and dtype, or a scalar."""

    name: str
    dtype: DType
    shape: tuple[int, ...] | None  # None for a scalar parameter
    written: bool = False


_SCALAR_CTYPES = {
    "float32": ctypes.c_float, "float64": ctypes.c_double,
    "int8": ctypes.c_int8, "int16": ctypes.c_int16, "int32": ctypes.c_int32,
    "int64": ctypes.c_int64, "uint8": ctypes.c_uint8, "uint16": ctypes.c_uint16,
    "uint32": ctypes.c_uint32, "uint64": ctypes.c_uint64, "bool": ctypes.c_bool,
}


def scalar_ctype(dtype: DType) -> Any:
    try:
        return _SCALAR_CTYPES[str(dtype)]
    except KeyError:
        raise EmberError(f"scalar parameters of type {dtype} are not supported") from None


def check_argument(function: str, param: Param, arg: Any) -> Any:
    """`arg` if it fits `param` of `function` (dtype, shape, contiguity), else ArgumentError."""
    if param.shape is None:
        if isinstance(arg, np.ndarray) or not np.isscalar(arg):
            raise ArgumentError(f"argument '{param.name}' of '{function}' must be a "
                                f"scalar {param.dtype}, got {type(arg).__name__}")
        return arg
    if not isinstance(arg, np.ndarray):
        raise ArgumentError(f"argument '{param.name}' of '{function}' must be a numpy "
                            f"array, got {type(arg).__name__}")
    if arg.dtype != param.dtype.numpy:
        raise ArgumentError(f"argument '{param.name}' of '{function}': expected dtype "
                            f"{param.dtype}, got {arg.dtype}")
    if tuple(arg.shape) != param.shape:
        raise ArgumentError(f"argument '{param.name}' of '{function}': expected shape "
                            f"{param.shape}, got {tuple(arg.shape)}")
    if not arg.flags.c_contiguous:
        raise ArgumentError(f"argument '{param.name}' of '{function}' must be C-contiguous;"
                            " pass np.ascontiguousarray(x)")
    if param.written and not arg.flags.writeable:
        raise ArgumentError(f"argument '{param.name}' of '{function}' is written to but "
                            "the array is read-only")
    return arg


class Module:
    """A compiled function: `f(a, b, c)` with numpy arrays, results written in place."""

    def __init__(self, name: str, params: tuple[Param, ...], address: int,
                 sources: dict[str, str] | None = None, keepalive: object = None) -> None:
        self.name = name
        self.params = params
        self.sources = dict(sources or {})
        self._keepalive = keepalive
        argtypes = [ctypes.c_void_p if p.shape is not None else scalar_ctype(p.dtype)
                    for p in params]
        self._cfunc: Callable[..., int] = ctypes.CFUNCTYPE(ctypes.c_int32, *argtypes)(address)

    def __call__(self, *args: Any) -> None:
        if len(args) != len(self.params):
            names = ", ".join(p.name for p in self.params)
            raise ArgumentError(f"'{self.name}' takes {len(self.params)} arguments ({names}), "
                                f"got {len(args)}")
        raw = [self._convert(p, a) for p, a in zip(self.params, args)]
        status = self._cfunc(*raw)
        if status != 0:
            raise EmberError(f"'{self.name}' failed with status {status}")

    def _convert(self, param: Param, arg: Any) -> Any:
        arg = check_argument(self.name, param, arg)
        return scalar_ctype(param.dtype)(arg) if param.shape is None else arg.ctypes.data

    def get_source(self, fmt: str = "") -> str:
        """Generated code: "ll" (LLVM IR), "asm", "c", "tir"; default: the main one."""
        if not fmt:
            fmt = next(iter(self.sources), "")
        if fmt not in self.sources:
            raise EmberError(f"module '{self.name}' has no '{fmt}' source; "
                             f"available: {sorted(self.sources)}")
        return self.sources[fmt]

    def time(self, *args: Any, number: int = 10, repeat: int = 5) -> float:
        """Median seconds per call over `repeat` batches of `number` calls."""
        import time

        raw = [self._convert(p, a) for p, a in zip(self.params, args)]
        self._cfunc(*raw)
        samples = []
        for _ in range(repeat):
            start = time.perf_counter()
            for _ in range(number):
                self._cfunc(*raw)
            samples.append((time.perf_counter() - start) / number)
        return float(np.median(samples))
