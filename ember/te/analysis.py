"""Queries over compute bodies: which tensors they read, whether they hold a reduction."""

from __future__ import annotations

from typing import Any

from ember.tir.expr import Reduce
from ember.tir.functor import Visitor


class _Reads(Visitor):
    def __init__(self) -> None:
        self.tensors: dict[int, Any] = {}

    def visit_TensorLoad(self, node: Any) -> None:
        self.tensors.setdefault(id(node.tensor), node.tensor)
        self.generic_visit(node)


def tensors_read(body: Any) -> list[Any]:
    """Tensors read by an expression (or tuple of them), in first-read order."""
    reads = _Reads()
    reads.visit(body) if not isinstance(body, tuple) else [reads.visit(b) for b in body]
    return list(reads.tensors.values())


class _HasReduce(Visitor):
    found = False

    def visit_Reduce(self, node: Reduce) -> None:
        self.found = True


def contains_reduce(expr: Any) -> bool:
    finder = _HasReduce()
    finder.visit(expr)
    return finder.found
