"""Choosing each fused group's knobs at compile time: from a mapping of group names, or from
a callable `(group, task) -> Knobs | None` (the tuning database's lookup is one).

    prepare(graph, target, knobs={"conv_3": ConvKnobs(ow_tile=7, oc_tile=2)})
    prepare(graph, target, knobs=lambda group, task: None)   # None: the default
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Union

from ember.errors import ArgumentError
from ember.lowering.groups import FusedGroup, with_knobs
from ember.lowering.kernel import anchor_of, group_compute, split_constant_stages
from ember.ops.knobs import Knobs, Task
from ember.ops.registry import get_op
from ember.target import Target

KnobsFn = Callable[[FusedGroup, Task], Union[Knobs, None]]
KnobsArg = Union[Mapping[str, Knobs], KnobsFn, None]


def group_task(group: FusedGroup, target: Target) -> Task:
    """The knob Task of a group: the outputs its schedule sees (after the weight stages are
    split off, as when it is compiled), the target and the anchor op."""
    placeholders, env = group_compute(group.nodes, group.inputs)
    outs = [env[v] for v in group.outputs]
    constant = list(group.constants) or [False] * len(group.inputs)
    split = split_constant_stages(placeholders, outs, constant)
    node = anchor_node(group)
    return Task(outs=tuple(split.outputs), target=target, op=node.op, attrs=dict(node.attrs))


def anchor_node(group: FusedGroup):  # type: ignore[no-untyped-def]
    """The node whose schedule drives the group."""
    return next((n for n in group.nodes if n.name == group.anchor), anchor_of(group.nodes))


def has_knobs(group: FusedGroup) -> bool:
    """True when the group's anchor op declares a knob family."""
    return get_op(anchor_node(group).op).knobs is not None


def choose_knobs(groups: Sequence[FusedGroup], target: Target, knobs: KnobsArg
                 ) -> list[FusedGroup]:
    """The groups, each with the knobs `knobs` gives it (unchanged where it gives None)."""
    if knobs is None:
        return list(groups)
    if isinstance(knobs, Mapping):
        names = {g.name for g in groups}
        unknown = sorted(set(knobs) - names)
        if unknown:
            raise ArgumentError(f"knobs: no fused group named {', '.join(map(repr, unknown))}; "
                                f"groups: {', '.join(sorted(names)[:8])}"
                                f"{', ...' if len(names) > 8 else ''}")
        chosen = [knobs.get(g.name) for g in groups]
    elif callable(knobs):
        chosen = [knobs(g, group_task(g, target)) if has_knobs(g) else None for g in groups]
    else:
        raise ArgumentError(f"knobs: expected a mapping of group names to Knobs or a callable "
                            f"(group, task) -> Knobs | None, got {type(knobs).__name__}")
    out = []
    for group, k in zip(groups, chosen):
        if k is not None and not isinstance(k, Knobs):
            raise ArgumentError(f"knobs for fused group '{group.name}': expected Knobs or "
                                f"None, got {type(k).__name__}")
        out.append(group if k is None else with_knobs(group, k))
    return out


__all__ = ["KnobsArg", "KnobsFn", "anchor_node", "choose_knobs", "group_task", "has_knobs"]
