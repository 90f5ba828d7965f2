"""Visitor and Mutator over the loop IR: the one traversal every pass builds on.

`visit(node)` dispatches to `visit_<ClassName>`; without one, the generic method walks the
node's dataclass fields. Mutator rebuilds a node only if a child changed, else returns the
same object, so unchanged subtrees stay shared.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from ember.tir.expr import Expr, IterVar, Range, Var
from ember.tir.stmt import Stmt

# fields that bind a variable; the generic traversal does not treat them as uses
_BINDER_FIELDS = ("var",)
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


def child_fields(cls: type) -> tuple[str, ...]:
    """Names of the dataclass fields of `cls` that may hold sub-expressions or statements."""
    names = _CHILD_FIELDS.get(cls)
    if names is None:
        names = tuple(f.name for f in dataclasses.fields(cls)
                      if f.name not in ("dtype", "name", "lanes", "kind", "thread_tag",
                                        "value_index", "combiner", "key", "scope")
                      and f.name not in _BINDER_FIELDS)
        _CHILD_FIELDS[cls] = names
    return names


def _is_node(value: object) -> bool:
    return isinstance(value, (Expr, Stmt))


class Visitor:
    """Read-only traversal; override `visit_<ClassName>` and call `generic_visit` to recurse."""

    def visit(self, node: Any) -> None:
        method: Callable[[Any], None] | None = getattr(self, "visit_" + type(node).__name__, None)
        if method is not None:
            method(node)
        else:
            self.generic_visit(node)

    def generic_visit(self, node: Any) -> None:
        for name in child_fields(type(node)):
            self._visit_value(getattr(node, name))

    def _visit_value(self, value: object) -> None:
        if _is_node(value):
            self.visit(value)
        elif isinstance(value, tuple):
            for item in value:
                self._visit_value(item)
        elif isinstance(value, IterVar):
            self._visit_value(value.dom)
        elif isinstance(value, Range):
            self.visit(value.begin)
            self.visit(value.extent)


class Mutator:
    """Rebuilding traversal; `visit_<ClassName>` returns the replacement node."""

    def visit(self, node: Any) -> Any:
        method: Callable[[Any], Any] | None = getattr(self, "visit_" + type(node).__name__, None)
        if method is not None:
            return method(node)
        return self.generic_visit(node)

    def generic_visit(self, node: Any) -> Any:
        changes: dict[str, object] = {}
        for name in child_fields(type(node)):
            old = getattr(node, name)
            new = self._visit_value(old)
            if new is not old:
                changes[name] = new
        if not changes:
            return node
        return dataclasses.replace(node, **changes)

    def _visit_value(self, value: Any) -> Any:
        if _is_node(value):
            return self.visit(value)
        if isinstance(value, tuple):
            items = tuple(self._visit_value(v) for v in value)
            if all(a is b for a, b in zip(items, value)):
                return value
            return items
        return value


class Substitute(Mutator):
    """The mutator behind `substitute`; subclasses may rewrite nodes on the way."""

    def __init__(self, mapping: dict[Var, Expr]) -> None:
        self.mapping = mapping

    def visit_Var(self, var: Var) -> Expr:
        return self.mapping.get(var, var)


def substitute(node: Any, mapping: dict[Var, Expr]) -> Any:
    """Replace free uses of variables by expressions: `substitute(i + 1, {i: j * 2})`."""
    if not mapping:
        return node
    return Substitute(mapping).visit(node)


class _CollectVars(Visitor):
    def __init__(self) -> None:
        self.vars: dict[Var, None] = {}

    def visit_Var(self, var: Var) -> None:
        self.vars[var] = None


def used_vars(node: Any) -> list[Var]:
    """Variables used in `node` (not counting binders), in first-use order."""
    collector = _CollectVars()
    collector.visit(node)
    return list(collector.vars)


def uses_var(node: Any, var: Var) -> bool:
    return any(v is var for v in used_vars(node))  # identity: `==` on IR builds an EQ


def post_order_visit(node: Any, callback: Callable[[Any], None]) -> None:
    """Call `callback` on every expression and statement in `node`, children first."""

    class _Walk(Visitor):
        def visit(self, n: Any) -> None:
            super().visit(n)
            callback(n)

    _Walk().visit(node)
