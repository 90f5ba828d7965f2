"""Tuning tasks: the distinct anchor workloads (op, attributes, types) of a model's fused
groups on one target, each with its knob family and how many groups share it.

    tasks = extract_tasks("resnet18.onnx", Target.host())
    for t in tasks:
        print(t.weight, t.description, t.space().size)

Groups whose anchors compute the same thing (the same convolution with a ReLU or with an
Add after it) share one task: the anchor's schedule is what the knobs steer.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ember.autotune import lowering
from ember.autotune.lowering import anchor_node
from ember.graph.ir import Graph
from ember.ops.knobs import Knobs, Space
from ember.target import Target


@dataclass(frozen=True, eq=False)
class TuneTask:
    """One anchor workload to tune: its key, knob family, target, weight (groups sharing it)
    and a representative group (without weight data) to build candidates from."""

    key: str
    op: str
    family: str
    description: str
    target: str
    group: lowering.FusedGroup
    weight: int = 1
    groups: tuple[str, ...] = ()

    @property
    def knob_class(self) -> type[Knobs]:
        return lowering.knob_family(self.group, Target(self.target))

    def space(self) -> Space:
        return lowering.space_of(self.group, Target(self.target))

    def default(self) -> Knobs:
        return lowering.default_of(self.group, Target(self.target))

    def knobs_at(self, point: Mapping[str, Any]) -> Knobs:
        """The task's knobs with the values of `point` (a point of `space()`)."""
        return self.default().replace(**dict(point))

    def build(self, point: Mapping[str, Any] | None, seed: int = 0) -> lowering.GroupKernel:
        """The group's kernel with the knobs of `point` (None: the defaults), bound to seeded
        inputs; `run()` it to time it."""
        knobs = None if point is None else self.knobs_at(point)
        inputs = lowering.random_inputs(self.group, seed)
        return lowering.build_group(self.group, Target(self.target), knobs, inputs)

    def features(self, point: Mapping[str, Any]) -> tuple[float, ...]:
        """The cost model's features of the candidate `point`: its kernel's loop features as
        lowered, and its knobs."""
        from ember.autotune.features import candidate_features

        knobs = self.knobs_at(point)
        funcs = lowering.lower_group(self.group, Target(self.target), knobs, optimized=False)
        return candidate_features(funcs[0], Target(self.target), knobs)

    def default_point(self) -> dict[str, Any]:
        """The default knobs as a point of the space (only the knobs the space varies)."""
        values = self.default().to_dict()
        return {name: values[name] for name in self.space().choices}


def _canonical(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        digest = hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest()
        return ("array", str(value.dtype), value.shape, digest)
    if isinstance(value, (list, tuple)):
        return tuple(_canonical(v) for v in value)
    if isinstance(value, Mapping):
        return tuple(sorted((str(k), _canonical(v)) for k, v in value.items()))
    if isinstance(value, float):
        return ("float", value.hex())
    if isinstance(value, Graph):
        return ("graph", value.name, len(value.nodes))
    return value


def task_key(group: lowering.FusedGroup) -> str:
    """The workload of a group's anchor: op, attributes, input and output types, and which
    inputs are weights precomputed at compile time (they change the kernel's interface)."""
    node = anchor_node(group)
    weights = {v for v, c in zip(group.inputs, group.constants) if c}
    parts = (node.op, _canonical(dict(node.attrs)),
             tuple(None if v is None else (str(v.type), v in weights) for v in node.inputs),
             tuple(str(v.type) for v in node.outputs))
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:32]


def describe(group: lowering.FusedGroup) -> str:
    """e.g. "ConvNCHWc 1x64x56x56 -> 1x8x56x56x8 (float32)"."""
    node = anchor_node(group)
    shapes = [v.type.shape for v in node.inputs if v is not None]
    ins = ", ".join("x".join(map(str, s)) or "scalar" for s in shapes[:2])
    outs = ", ".join("x".join(map(str, v.type.shape)) for v in node.outputs)
    return f"{node.op} {ins} -> {outs} ({node.outputs[0].type.dtype})"


def tasks_of_groups(groups: Sequence[lowering.FusedGroup], target: Target | str,
                    tunable_only: bool = True) -> list[TuneTask]:
    """Unique tasks of fused groups, heaviest first; with `tunable_only`, only those whose
    knob space has more than one point."""
    tgt = Target(target)
    found: dict[str, TuneTask] = {}
    members: dict[str, list[str]] = {}
    for group in groups:
        family = lowering.knob_family(group, tgt)
        if family is None:
            continue
        key = task_key(group)
        members.setdefault(key, []).append(group.name)
        if key not in found:
            slim = lowering.without_weights(group)
            found[key] = TuneTask(key, anchor_node(group).op, family.family(),
                                  describe(group), str(tgt), slim)
    tasks = []
    for key, task in found.items():
        task = TuneTask(task.key, task.op, task.family, task.description, task.target,
                        task.group, len(members[key]), tuple(members[key]))
        if tunable_only and task.space().size <= 1:
            continue
        tasks.append(task)
    tasks.sort(key=lambda t: (-t.weight, t.description))
    return tasks


def extract_tasks(model: Any, target: Target | str = "llvm", opt_level: int = 3,
                  input_shapes: Mapping[str, Sequence[int]] | None = None,
                  tunable_only: bool = True) -> list[TuneTask]:
    """The unique tuning tasks of a model (a path to an .onnx file, an onnx.ModelProto or an
    ember Graph) as `ember.compile` would fuse it for `target`, heaviest first."""
    tgt = Target(target)
    groups = lowering.model_groups(model, tgt, opt_level, input_shapes)
    return tasks_of_groups(groups, tgt, tunable_only)


__all__ = ["TuneTask", "anchor_node", "describe", "extract_tasks", "task_key",
           "tasks_of_groups"]
