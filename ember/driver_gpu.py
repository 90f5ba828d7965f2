"""compile() for GPU targets: the same graph, fused groups and memory plan as for CPUs;
each group's kernels come from the GPU schedules (ember.ops.gpu) and one device program
holds them all.

    model = ember.compile("mobilenet.onnx", target="opencl")
    (probs,) = model.run({"input": x})      # one copy in, kernels on the device, one back
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from ember.lowering.build import lower_gpu
from ember.codegen.gpu import gpu_code, max_threads
from ember.codegen.gpu_kernels import DeviceProgram, Kernel, split_kernels
from ember.errors import EmberError
from ember.graph.ir import without_constant_values
from ember.runtime.device_module import Launch
from ember.runtime.gpu_executor import DeviceModel
from ember.lowering.groups import FusedGroup, fused_groups, optimize, plan_memory
from ember.lowering.prepack import pack_constants, prepacked_calls
from ember.target import Target
from ember.tir.function import Buffer

# the blocked (NCHWc) layout of level 3 is sized for CPU vector registers
GPU_GRAPH_LEVEL = 2


def group_program(group: FusedGroup, target: Target) -> tuple[DeviceProgram, list[Launch],
                                                              list[int]]:
    """The kernels of one group, its launches (buffer indices: the group's arguments, then
    its temporaries) and its temporaries' byte sizes."""
    from ember.lowering.build import _nbytes
    from ember.lowering.kernel import lower_group_kernels

    try:
        kernels = lower_group_kernels(group.nodes, group.inputs, group.outputs, group.symbol,
                                      target)
        func = lower_gpu(kernels.main)
        program = split_kernels(func, max_threads(target))
    except EmberError as error:
        raise type(error)(f"fused group '{group.name}' ({group.describe()}): {error}") from None
    buffers = [p for p in func.params if isinstance(p, Buffer)] + list(program.temporaries)
    position = {b.data: i for i, b in enumerate(buffers)}
    launches = [Launch(k.name, tuple(position[b.data] for b in k.buffers), (), k.grid,
                       k.block) for k in program.kernels]
    return program, launches, [_nbytes(b) for b in program.temporaries]


def compile_gpu(model: Any, target: Target, opt_level: int = 3,
                input_shapes: Mapping[str, Sequence[int]] | None = None,
                device: Any = None) -> DeviceModel:
    """A model compiled for a GPU target and loaded on `device` (default: the first one)."""
    from ember.driver import import_model
    from ember.lowering.plan import exec_plan
    from ember.runtime.devices import default_device

    timings: dict[str, float] = {}
    start = time.perf_counter()
    graph = import_model(model, input_shapes)
    fused = optimize(graph, min(opt_level, GPU_GRAPH_LEVEL), target)
    memory = plan_memory(fused)
    assembled = getattr(memory, "assembled", set())
    groups = [g for g in fused_groups(fused, prepack=False)
              if not (g.outer_outputs and all(v in assembled for v in g.outer_outputs))]
    timings["optimize"] = time.perf_counter() - start
    kernels: list[Kernel] = []
    launches: dict[str, list[Launch]] = {}
    temporaries: dict[str, list[int]] = {}
    for g in groups:
        if g.symbol in launches:
            continue
        program, launches[g.symbol], temporaries[g.symbol] = group_program(g, target)
        kernels += program.kernels
    timings["kernels"] = time.perf_counter() - start - sum(timings.values())
    whole = DeviceProgram(graph.name or "model", (), (), tuple(kernels))
    _, code = gpu_code_of(whole, target)
    calls, _ = prepacked_calls(groups)
    offsets, blob = pack_constants(fused, calls, [])
    xplan = exec_plan(fused, calls, memory, offsets, blob.size)
    device = device if device is not None else default_device(target.kind)
    stats = {"groups": len(groups), "kernels": len(kernels), "seconds": timings}
    compiled = DeviceModel(xplan, device, code, launches, temporaries, blob, str(target),
                           graph=without_constant_values(fused), stats=stats)
    timings["load"] = time.perf_counter() - start - sum(timings.values())
    return compiled


def gpu_code_of(program: DeviceProgram, target: Target) -> tuple[DeviceProgram, str]:
    """Source text of an already split program (see ember.codegen.gpu.gpu_code)."""
    if target.kind == "opencl":
        from ember.codegen.opencl import codegen_opencl

        return program, codegen_opencl(program)
    if target.kind == "cuda":
        from ember.codegen.cuda import codegen_cuda
        from ember.codegen.nvptx import cuda_to_ptx

        return program, cuda_to_ptx(codegen_cuda(program), target)
    raise EmberError(f"ember.compile for target kind '{target.kind}' generates code only; "
                     "use ember.driver_gpu.model_source to see it (OpenCL and CUDA run)")


__all__ = ["compile_gpu", "group_program", "gpu_code"]
