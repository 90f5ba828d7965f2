"""What the tuner needs from the layers below, in one place: a model's fused groups, a
group's knob family, space and default, and its kernels lowered or built with given knobs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ember.errors import TuningError
from ember.graph.ir import Graph, Node
from ember.lowering.groups import (
    FusedGroup,
    fused_groups,
    optimize,
    plan_memory,
    without_weights,
)
from ember.lowering.gpu_program import GPU_GRAPH_LEVEL
from ember.lowering.kernel import (
    anchor_of,
    group_compute,
    group_knobs,
    lower_group_kernels,
    split_constant_stages,
)
from ember.lowering.kernel import knob_family as kernel_knob_family
from ember.ops.gpu import is_gpu
from ember.ops.knobs import Knobs, NoKnobs, Space, Task
from ember.ops.registry import get_op
from ember.target import Target
from ember.tir.function import PrimFunc

__all__ = ["FusedGroup", "GroupKernel", "anchor_node", "build_group", "default_of",
           "knob_family", "knob_task", "lower_group", "model_groups", "random_inputs",
           "space_of", "without_weights"]


def model_groups(model: Any, target: Target, opt_level: int = 3,
                 input_shapes: Mapping[str, Sequence[int]] | None = None
                 ) -> list[FusedGroup]:
    """The fused groups `ember.compile` builds kernels for (a Concat assembled in place by the
    memory plan has none); for GPU targets as their compile fuses them (graph level at most
    GPU_GRAPH_LEVEL, weights not packed at compile time)."""
    gpu = is_gpu(target)
    graph = _import(model, input_shapes)
    fused = optimize(graph, min(opt_level, GPU_GRAPH_LEVEL) if gpu else opt_level, target)
    assembled = getattr(plan_memory(fused), "assembled", set())
    return [g for g in fused_groups(fused, prepack=not gpu, target=target)
            if not (g.outer_outputs and all(v in assembled for v in g.outer_outputs))]


def _import(model: Any, input_shapes: Mapping[str, Sequence[int]] | None) -> Graph:
    if isinstance(model, Graph):
        return model
    from ember.frontend.onnx import from_onnx  # a path or an onnx.ModelProto

    return from_onnx(model, input_shapes=input_shapes)


def anchor_node(group: FusedGroup) -> Node:
    """The node whose schedule drives the group (as compiling it chooses)."""
    return anchor_of(group.nodes)


def knob_family(group: FusedGroup, target: Target | None = None) -> type[Knobs] | None:
    """The knob family of the group's anchor op on `target` (default: a CPU target; GPU
    targets have their own schedules); None: its schedule has no choices."""
    opdef = get_op(anchor_node(group).op)
    family = opdef.knob_family() if target is None else kernel_knob_family(opdef, target)
    return None if family is NoKnobs else family


def knob_task(group: FusedGroup, target: Target) -> Task:
    """The Task the group's knobs are chosen for, the same one `compile` passes to a
    `knobs=` callable."""
    return group_knobs(group.nodes, group.inputs, group.outputs, target)[0]


def _family(group: FusedGroup, target: Target) -> type[Knobs]:
    family = knob_family(group, target)
    if family is None:
        raise TuningError(f"fused group '{group.name}' ({group.describe()}): its anchor's "
                          "schedule declares no knobs")
    return family


def space_of(group: FusedGroup, target: Target) -> Space:
    return _family(group, target).space(knob_task(group, target))


def default_of(group: FusedGroup, target: Target) -> Knobs:
    return _family(group, target).default(knob_task(group, target))


def lower_group(group: FusedGroup, target: Target, knobs: Knobs | None = None,
                optimized: bool = True) -> list[PrimFunc]:
    """The loop programs of a group with `knobs`: its kernel, then its pack kernel when it
    has one; after the TIR pipeline, or (not `optimized`) as lowered, loop kinds intact."""
    from ember.lowering.build import optimize as optimize_tir

    kernels = lower_group_kernels(group.nodes, group.inputs, group.outputs, "kernel",
                                  target, group.constants, knobs)
    funcs = [kernels.main] + ([kernels.pack] if kernels.pack is not None else [])
    return [optimize_tir(f) for f in funcs] if optimized else funcs


def random_inputs(group: FusedGroup, seed: int = 0) -> list[np.ndarray]:
    """Seeded inputs for every parameter of the group: normal floats, small integers."""
    rng = np.random.default_rng(seed)
    arrays = []
    for v in group.inputs:
        dtype = np.dtype(v.type.dtype.numpy)
        if dtype.kind == "f":
            arrays.append(rng.standard_normal(v.type.shape).astype(dtype))
        elif dtype.kind == "b":
            arrays.append(rng.integers(0, 2, v.type.shape).astype(dtype))
        else:
            arrays.append(rng.integers(0, 3, v.type.shape).astype(dtype))
    return arrays


@dataclass(eq=False)
class GroupKernel:
    """A group's kernel built with some knobs, bound to its inputs: `run()` computes once,
    `outputs` holds what it wrote."""

    main: Any
    args: list[np.ndarray]
    outputs: list[np.ndarray]
    funcs: list[PrimFunc]
    weights: list[int] = field(default_factory=list)  # indexes in args of the weights

    def run(self) -> None:
        self.main(*self.args)


def build_group(group: FusedGroup, target: Target, knobs: Knobs | None,
                inputs: Sequence[np.ndarray]) -> Any:
    """Compile the group's kernels with `knobs`, run its pack kernel once on `inputs` and
    bind the main kernel's arguments (the timed part is the main kernel alone); on a GPU
    target, the group's kernels on the device (ember.autotune.gpu_measure)."""
    from ember.lowering.build import build
    from ember.runtime.library import aligned_array

    if is_gpu(target):
        from ember.autotune.gpu_measure import GpuGroupKernel

        chosen = knobs if knobs is not None else default_of(group, target)
        return GpuGroupKernel(group, target, chosen, inputs)

    funcs = lower_group(group, target, knobs, optimized=False)  # build runs the pipeline
    main = build(funcs[0], target=target)
    placeholders, env = group_compute(group.nodes, group.inputs, target)
    constant = list(group.constants) or [False] * len(group.inputs)
    split = split_constant_stages(placeholders, [env[v] for v in group.outputs], constant)
    # 64-byte aligned, as in the model's workspace (numpy's arrays split cache lines)
    inputs = [aligned_array(a.shape, a.dtype, like=a) for a in inputs]
    packed = [aligned_array([int(d.value) for d in t.shape], str(t.dtype))  # type: ignore
              for t in split.packed]
    if len(funcs) > 1:
        pack = build(funcs[1], target=target)
        pack(*[inputs[i] for i in split.pack_inputs], *packed)
    outputs = [aligned_array(v.type.shape, v.type.dtype.numpy) for v in group.outputs]
    args = [inputs[i] for i in split.main_inputs] + packed + outputs
    model_weights = group.weights or tuple(v.is_constant for v in group.inputs)
    weights = [k for k, i in enumerate(split.main_inputs) if model_weights[i]]
    weights += [len(split.main_inputs) + k for k in range(len(packed))]
    return GroupKernel(main, args, outputs, funcs, weights)
