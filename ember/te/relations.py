"""How a stage's leaf loops map back to its root axes through its splits and fuses."""

from __future__ import annotations

from dataclasses import dataclass

from ember.te.schedule import Fuse, Split, Stage
from ember.tir.expr import Expr, IterVar


@dataclass
class LoopStructure:
    """extents: every iter var's extent; values: each iter var as a function of the leaf
    variables (counting from 0); guards: conditions that non-divisible splits need."""

    extents: dict[IterVar, int]
    values: dict[IterVar, Expr]
    guards: list[Expr]


def loop_structure(stage: Stage, root_extent: dict[IterVar, int]) -> LoopStructure:
    """Walk the split/fuse relations forward for extents and backward for values."""
    extents: dict[IterVar, int] = dict(root_extent)
    for rel in stage.relations:
        if isinstance(rel, Split):
            parent = extents[rel.parent]
            if rel.factor is not None:
                extents[rel.inner] = rel.factor
                extents[rel.outer] = -(-parent // rel.factor)
            else:
                assert rel.nparts is not None
                extents[rel.outer] = rel.nparts
                extents[rel.inner] = -(-parent // rel.nparts)
        else:
            extents[rel.fused] = extents[rel.outer] * extents[rel.inner]
    values: dict[IterVar, Expr] = {iv: iv.var for iv in stage.leaf_iter_vars}
    guards: list[Expr] = []
    for rel in reversed(stage.relations):
        if isinstance(rel, Split):
            value = values[rel.outer] * extents[rel.inner] + values[rel.inner]
            values[rel.parent] = value
            if extents[rel.outer] * extents[rel.inner] != extents[rel.parent]:
                guards.append(value < extents[rel.parent])
        elif isinstance(rel, Fuse):
            fused = values[rel.fused]
            values[rel.outer] = fused // extents[rel.inner]
            values[rel.inner] = fused % extents[rel.inner]
    return LoopStructure(extents, values, guards)
