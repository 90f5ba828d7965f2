"""The simplify pass: simplify every expression of a PrimFunc under its loop ranges."""

from __future__ import annotations

from dataclasses import replace

from ember.arith.simplify import simplify_stmt
from ember.tir.function import PrimFunc


def simplify(func: PrimFunc) -> PrimFunc:
    """Simplify index arithmetic and conditions; drop constant branches and trivial loops."""
    body = simplify_stmt(func.body)
    return func if body is func.body else replace(func, body=body)
