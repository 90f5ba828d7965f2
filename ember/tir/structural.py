"""structural_equal / structural_hash: compare IR by structure, the one implementation.

Variables bound inside the IR (loop variables, lets, function parameters, allocated and
parameter buffers, reduction axes) are matched by position of first appearance, so two
independently built but identical kernels compare equal and hash alike (names are
ignored). Free variables compare by identity unless `map_free_vars=True`.
"""

from __future__ import annotations

import dataclasses
import hashlib
from enum import Enum
from typing import Any

from ember.dtype import DType
from ember.tir.expr import Expr, IterVar, Let, Range, Reduce, Var
from ember.tir.function import Buffer, PrimFunc
from ember.tir.stmt import Allocate, For, LetStmt, Stmt


class _Canon:
    """Serialize IR into a flat token list with variables and buffers numbered."""

    def __init__(self, map_free_vars: bool) -> None:
        self.ids: dict[int, int] = {}
        self.tokens: list[object] = []
        self.bound: set[int] = set()
        self.map_free_vars = map_free_vars

    def bind(self, *objs: object) -> None:
        for obj in objs:
            self.bound.add(id(obj))
            if isinstance(obj, Buffer):
                self.bound.add(id(obj.data))
            elif isinstance(obj, IterVar):
                self.bound.add(id(obj.var))

    def is_bound(self, obj: object) -> bool:
        if self.map_free_vars or id(obj) in self.bound:
            return True
        return isinstance(obj, Buffer) and id(obj.data) in self.bound

    def number(self, obj: object) -> int:
        key = id(obj)
        if key not in self.ids:
            self.ids[key] = len(self.ids)
        return self.ids[key]

    def add(self, value: Any) -> None:
        out = self.tokens
        if isinstance(value, (Var, Buffer)) and not self.is_bound(value):
            out.append(("free", id(value)))
        elif isinstance(value, Var):
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
            self._bind_fields(value)
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


    def _bind_fields(self, value: Any) -> None:
        """Mark the variables and buffers a node introduces."""
        if isinstance(value, PrimFunc):
            self.bind(*value.params)
        elif isinstance(value, (For, Let, LetStmt)):
            self.bind(value.var)
        elif isinstance(value, Allocate):
            self.bind(value.buffer)
        elif isinstance(value, Reduce):
            self.bind(*value.axis, *value.combiner.lhs, *value.combiner.rhs)
        elif isinstance(value, IterVar):
            self.bind(value)


def _tokens(node: Any, map_free_vars: bool) -> list[object]:
    canon = _Canon(map_free_vars)
    canon.add(node)
    return canon.tokens


def structural_equal(a: Any, b: Any, map_free_vars: bool = False) -> bool:
    """True if `a` and `b` are the same IR up to renaming of bound variables and buffers."""
    return _tokens(a, map_free_vars) == _tokens(b, map_free_vars)


def structural_hash(node: Any, map_free_vars: bool = False) -> str:
    """A hex digest, stable across processes for IR without free variables (a PrimFunc);
    equal for structurally equal IR."""
    return hashlib.sha256(repr(_tokens(node, map_free_vars)).encode()).hexdigest()
