"""Integer arithmetic analysis: the simplifier, interval bounds and modular (alignment) sets."""

from ember.arith.bounds import can_prove, const_bounds, eval_interval
from ember.arith.interval import Interval, union
from ember.arith.modular import ModularSet, modular_set
from ember.arith.simplify import simplify, simplify_stmt

__all__ = [
    "Interval", "ModularSet", "can_prove", "const_bounds", "eval_interval", "modular_set",
    "simplify", "simplify_stmt", "union",
]
