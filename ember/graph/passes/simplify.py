"""simplify_graph: the structural clean-ups in one call (each is also a pass of its own)."""

from __future__ import annotations

from ember.graph.ir import Graph
from ember.graph.passes.cancel_transposes import cancel_transposes
from ember.graph.passes.dead_code import eliminate_dead_code
from ember.graph.passes.fold_batch_norm import fold_batch_norm
from ember.graph.passes.merge_reshapes import merge_reshapes
from ember.graph.passes.remove_identities import remove_identities

SIMPLIFY_PASSES = [remove_identities, fold_batch_norm, merge_reshapes, cancel_transposes,
                   remove_identities, eliminate_dead_code]


def simplify_graph(graph: Graph) -> Graph:
    """Remove copies, fold BatchNormalization into weights, merge reshapes, cancel transposes."""
    for simplify in SIMPLIFY_PASSES:
        graph = simplify(graph)
    return graph
