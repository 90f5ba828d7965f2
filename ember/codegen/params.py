"""The parameters of a compiled PrimFunc as the runtime's Module checks them."""

from __future__ import annotations

from typing import Any

from ember.errors import EmberError
from ember.runtime.module import Param
from ember.tir.expr import IntImm, Var
from ember.tir.function import Buffer
from ember.tir.functor import post_order_visit
from ember.tir.stmt import Store


def params_of(func: Any) -> tuple[Param, ...]:
    """Describe the parameters of a PrimFunc (static shapes only)."""
    written: set[int] = set()

    def note_store(node: Any) -> None:
        if isinstance(node, Store):
            written.add(id(node.buffer.data))

    post_order_visit(func.body, note_store)
    params = []
    for p in func.params:
        if isinstance(p, Buffer):
            dims = []
            for d in p.shape:
                if not isinstance(d, IntImm):
                    raise EmberError(f"parameter '{p.name}' of '{func.name}' has a symbolic "
                                     f"dimension {d}; only static shapes are supported so far")
                dims.append(d.value)
            params.append(Param(p.name, p.dtype, tuple(dims), id(p.data) in written))
        else:
            assert isinstance(p, Var)
            params.append(Param(p.name, p.dtype, None))
    return tuple(params)
