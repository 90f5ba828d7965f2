"""Elementwise and broadcast ops (ONNX semantics): arithmetic, comparisons, unary math."""

from __future__ import annotations

from typing import Callable, Sequence

from ember import te
from ember.errors import ShapeError
from ember.graph.ir import TensorType
from ember.ops.registry import Attrs, OpDef, Pattern
from ember.te.tensor import Tensor
from ember.tir.expr import Expr


def broadcast_shape(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...]:
    """numpy broadcasting of two shapes; raises ShapeError when they do not broadcast."""
    rank = max(len(a), len(b))
    pa = (1,) * (rank - len(a)) + tuple(a)
    pb = (1,) * (rank - len(b)) + tuple(b)
    out = []
    for x, y in zip(pa, pb):
        if x != y and x != 1 and y != 1:
            raise ShapeError(f"shapes {tuple(a)} and {tuple(b)} do not broadcast")
        out.append(y if x == 1 else x)
    return tuple(out)


def broadcast_index(t: Tensor, index: Sequence[Expr]) -> list[Expr]:
    """Index of `t` for an output index of higher or equal rank (size-1 dims read 0)."""
    offset = len(index) - len(t.shape)
    return [te.const(0) if int(d.value) == 1 else index[offset + k]  # type: ignore[attr-defined]
            for k, d in enumerate(t.shape)]


def _infer_binary(attrs: Attrs, inputs: Sequence[TensorType | None]) -> list[TensorType]:
    a, b = inputs
    assert a is not None and b is not None
    if a.dtype != b.dtype:
        raise ShapeError(f"input types differ: {a.dtype} and {b.dtype}")
    return [TensorType(broadcast_shape(a.shape, b.shape), a.dtype)]


def binary(name: str, fn: Callable[[Expr, Expr], Expr]) -> OpDef:
    def compute(attrs: Attrs, inputs: Sequence[Tensor | None]) -> list[Tensor]:
        a, b = inputs
        assert a is not None and b is not None
        shape = broadcast_shape([int(d.value) for d in a.shape],  # type: ignore[attr-defined]
                                [int(d.value) for d in b.shape])  # type: ignore[attr-defined]
        out = te.compute(shape, lambda *i: fn(a[tuple(broadcast_index(a, i))],
                                              b[tuple(broadcast_index(b, i))]),
                         name=name.lower(), tag=name)
        return [out]  # type: ignore[list-item]

    return OpDef(name, ("A", "B"), _infer_binary, compute, Pattern.BROADCAST)


def _infer_same(attrs: Attrs, inputs: Sequence[TensorType | None]) -> list[TensorType]:
    (x,) = inputs
    assert x is not None
    return [x]


def unary(name: str, fn: Callable[[Expr], Expr]) -> OpDef:
    def compute(attrs: Attrs, inputs: Sequence[Tensor | None]) -> list[Tensor]:
        (x,) = inputs
        assert x is not None
        out = te.compute(tuple(int(d.value) for d in x.shape),  # type: ignore[attr-defined]
                         lambda *i: fn(x[i]), name=name.lower(), tag=name)
        return [out]  # type: ignore[list-item]

    return OpDef(name, ("X",), _infer_same, compute, Pattern.ELEMWISE)


OPS: dict[str, OpDef] = {
    "Add": binary("Add", lambda a, b: a + b),
    "Relu": unary("Relu", lambda x: te.max(x, te.const(0, x.dtype))),
}
