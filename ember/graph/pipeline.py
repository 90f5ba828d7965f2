"""The graph pass pipeline: the ordered pass list per optimization level and its one runner.

Order and why:
- remove_identities and eliminate_dead_code first: less to fold and compare.
- fold_constants before CSE and BN folding: weights computed from constants (a Reshape or
  Unsqueeze of a scale, say) become constants those passes can use.
- eliminate_common_subexpressions after folding: equal folded constants merge too.
- fold_batch_norm, merge_reshapes, cancel_transposes, then remove_identities again: the
  simplifications expose copies (a cancelled Transpose pair, a Reshape to the same shape).
- fold_constants again: BN folding leaves constant-only chains behind in some models.
- convert_layout (level 3) after all simplifications, on the final ops: convolutions and
  the ops between them move to NCHW[x]c with packed weights, transforms only at the edges.
- eliminate_dead_code right before fuse_ops: nothing dead is fused.
- fuse_ops last: every node ends up in a Fused node (at level 0 one per op), which is what
  the executor compiles; plan_memory (ember.graph.memory) then runs over the fused graph.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence

from ember.errors import EmberError
from ember.graph.ir import Graph, Value
from ember.graph.passes.cancel_transposes import cancel_transposes
from ember.graph.passes.cse import eliminate_common_subexpressions
from ember.graph.passes.dead_code import eliminate_dead_code
from ember.graph.passes.fold_batch_norm import fold_batch_norm
from ember.graph.passes.fold_constants import Evaluator, constant_folder, fold_constants
from ember.graph.passes.fuse_ops import fuse_ops, wrap_single_ops
from ember.graph.passes.layout import (
    WINOGRAD_F4_MIN_TILES,
    LayoutRule,
    convert_layout,
    layout_pass,
    winograd_min_channels,
    winograd_min_width,
)
from ember.target import Target
from ember.graph.passes.merge_reshapes import merge_reshapes
from ember.graph.passes.remove_identities import remove_identities

GraphPass = Callable[[Graph], Graph]

PASSES: dict[int, list[GraphPass]] = {
    0: [eliminate_dead_code, wrap_single_ops],
    1: [remove_identities, eliminate_dead_code, fold_constants, eliminate_dead_code, fuse_ops],
    2: [remove_identities, eliminate_dead_code, fold_constants,
        eliminate_common_subexpressions, fold_batch_norm, merge_reshapes, cancel_transposes,
        remove_identities, fold_constants, eliminate_dead_code, fuse_ops],
    3: [remove_identities, eliminate_dead_code, fold_constants,
        eliminate_common_subexpressions, fold_batch_norm, merge_reshapes, cancel_transposes,
        remove_identities, fold_constants, eliminate_common_subexpressions, convert_layout,
        eliminate_dead_code, fuse_ops],
}


class GraphPassError(EmberError):
    """A graph pass failed; the message names the pass."""


def passes_for(opt_level: int, target: Target | str | None = None,
               evaluate: Evaluator | None = None) -> list[GraphPass]:
    """PASSES[opt_level], with the blocked layout sized for `target`'s vectors (default: host)
    and constant folding running nodes through `evaluate` (None: only Shape/Size fold)."""
    if opt_level not in PASSES:
        raise EmberError(f"opt_level must be one of {sorted(PASSES)}, got {opt_level}")
    passes = list(PASSES[opt_level])
    if evaluate is not None:
        folder = constant_folder(evaluate)
        passes = [folder if p is fold_constants else p for p in passes]
    if target is None:
        return passes
    target = Target(target)
    lanes = max(4, target.vector_lanes("float32"))
    # CPU rules: a GPU keeps the default channel threshold (its FMA width is not a CPU's)
    cpu = target.kind in ("llvm", "c", "wasm")
    sized = layout_pass(LayoutRule(
        block=lanes, winograd_min_width=winograd_min_width(target.facts),
        winograd_min_channels=winograd_min_channels(target.facts) if cpu else 0,
        winograd_f4_min_tiles=WINOGRAD_F4_MIN_TILES if cpu else 0,
        winograd_f4_weight_bytes=target.facts.l2_bytes if cpu else 0,
        tile_facts=target.facts if cpu else None))
    return [sized if p is convert_layout else p for p in passes]


def optimize_graph(graph: Graph, opt_level: int = 3, passes: Sequence[GraphPass] | None = None,
                   check_each: bool = False, target: Target | str | None = None,
                   evaluate: Evaluator | None = None) -> Graph:
    """Apply `passes` (default: PASSES[opt_level]) in order.

    EMBER_PRINT_GRAPH_AFTER=fold_constants,fuse_ops (or "all") prints the graph after the
    named passes to stderr; with `check_each` (or EMBER_VERIFY=1) check_graph runs after
    every pass. A failure is re-raised prefixed with "in pass <name>:".

        fused = optimize_graph(graph, opt_level=3)
    """
    if passes is None:
        passes = passes_for(opt_level, target, evaluate)
    check_each = check_each or os.environ.get("EMBER_VERIFY", "") not in ("", "0")
    print_after = {name.strip() for name in
                   os.environ.get("EMBER_PRINT_GRAPH_AFTER", "").split(",") if name.strip()}
    for p in passes:
        name = getattr(p, "__name__", repr(p))
        try:
            graph = p(graph)
            if check_each:
                check_graph(graph)
        except EmberError as err:
            try:
                renamed = type(err)(f"in pass {name}: {err}")
            except TypeError:  # an error type whose constructor takes other arguments
                renamed = GraphPassError(f"in pass {name}: {err}")
            raise renamed from err
        except Exception as err:
            raise GraphPassError(f"in pass {name}: {type(err).__name__}: {err}") from err
        if name in print_after or "all" in print_after:
            print(f"# graph after {name}\n{graph}", file=sys.stderr)
    return graph


def check_graph(graph: Graph) -> None:
    """Raise GraphPassError unless every value is defined once, before its first use.

    Fused nodes' sub-graphs are checked too, and must read exactly the Fused node's inputs
    and define its outputs.
    """
    defined: set[Value] = set(graph.inputs)
    for node in graph.nodes:
        for v in node.inputs:
            if v is not None and v not in defined and not v.is_constant:
                raise GraphPassError(f"graph '{graph.name}': node '{node.name}' ({node.op}) "
                                     f"reads %{v.name} before it is defined")
        for v in node.outputs:
            if v in defined:
                raise GraphPassError(f"graph '{graph.name}': node '{node.name}' ({node.op}) "
                                     f"defines %{v.name}, which is already defined")
            defined.add(v)
        inner = node.attrs.get("graph")
        if isinstance(inner, Graph):
            if list(inner.inputs) != [v for v in node.inputs if v is not None] or \
                    list(inner.outputs) != list(node.outputs):
                raise GraphPassError(f"fused node '{node.name}': its sub-graph's inputs and "
                                     f"outputs differ from the node's")
            check_graph(inner)
    for v in graph.outputs:
        if v not in defined and not v.is_constant:
            raise GraphPassError(f"graph '{graph.name}': output %{v.name} is never defined")
