"""structural_equal / structural_hash: compare IR by structure, the one implementation.

Variables and buffers are matched by position of first appearance, so two independently
built but identical kernels compare equal and hash alike (names are ignored).
"""

from __future__ import annotations

import dataclasses
import hashlib
from enum import Enum
from typing import Any

from ember.dtype import DType
from ember.tir.expr import Expr, IterVar, Range, Var
from ember.tir.function import Buffer, PrimFunc
from ember.tir.stmt import Stmt


class _Canon:
    """Serialize IR into a flat token list with variables and buffers numbered."""

    def __init__(self) -> None:
        self.ids: dict[int, int] = {}
        self.tokens: list[object] = []

    def number(self, obj: object) -> int:
        key = id(obj)
        if key not in self.ids:
            self.ids[key] = len(self.ids)
        return self.ids[key]

    def add(self, value: Any) -> None:
        out = self.tokens
        if isinstance(value, Var):
            out.append(("var", str(value.dtype), self.number(value)))
        elif isinstance(value, Buffer):
            first = id(value) not in self.ids
            out.append(("buf", self.number(value)))
            if first:
                out.append((str(value.dtype), value.scope))
                self.add(value.shape)
                self.add(value.strides)
                self.add(value.data)
        elif isinstance(value, (Expr, Stmt, IterVar, Range, PrimFunc)) or (
                dataclasses.is_dataclass(value) and not isinstance(value, type)
                and not isinstance(value, DType)):
            out.append(type(value).__name__)
            for f in dataclasses.fields(value):
                if isinstance(value, PrimFunc) and f.name == "name":
                    continue
                self.add(getattr(value, f.name))
            out.append(")")
        elif isinstance(value, tuple):
            out.append(("tuple", len(value)))
            for item in value:
                self.add(item)
        elif isinstance(value, (DType, Enum)):
            out.append(str(value))
        elif value is None or isinstance(value, (int, float, str, bool)):
            out.append((type(value).__name__, value))
        else:
            raise TypeError(f"structural comparison of {type(value).__name__} is not supported")


def _tokens(node: Any) -> list[object]:
    canon = _Canon()
    canon.add(node)
    return canon.tokens


def structural_equal(a: Any, b: Any) -> bool:
    """True if `a` and `b` are the same IR up to renaming of variables and buffers."""
    return _tokens(a) == _tokens(b)


def structural_hash(node: Any) -> str:
    """A hex digest stable across processes; equal for structurally equal IR."""
    return hashlib.sha256(repr(_tokens(node)).encode()).hexdigest()
