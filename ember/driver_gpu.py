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

from ember.errors import EmberError
from ember.graph.ir import without_constant_values
from ember.lowering.cache import KernelCache
from ember.lowering.gpu_program import GroupCode, device_code, group_code, llvm_code
from ember.lowering.gpu_program import model_source as gpu_model_source
from ember.lowering.groups import FusedGroup, fused_groups, optimize, plan_memory
from ember.lowering.prepack import pack_constants, prepacked_calls
from ember.runtime.gpu_executor import DeviceModel
from ember.target import Target

# cache= of compile: True (the default directory), False, a directory or a KernelCache
CacheArg = bool | str | KernelCache

RUNNABLE = ("opencl", "cuda")  # kinds with a device runtime here
# the blocked (NCHWc) layout of level 3 is sized for CPU vector registers
GPU_GRAPH_LEVEL = 2


def _groups(model: Any, target: Target, opt_level: int,
            input_shapes: Mapping[str, Sequence[int]] | None, knobs: Any) -> tuple[Any, Any,
                                                                                list[FusedGroup]]:
    """(fused graph, memory plan, groups with their knobs) of a model for a GPU target."""
    from ember.driver import import_model
    from ember.lowering.compile import choose_knobs

    graph = import_model(model, input_shapes)
    fused = optimize(graph, min(opt_level, GPU_GRAPH_LEVEL), target)
    memory = plan_memory(fused)
    assembled = getattr(memory, "assembled", set())
    groups = [g for g in fused_groups(fused, prepack=False)
              if not (g.outer_outputs and all(v in assembled for v in g.outer_outputs))]
    return fused, memory, choose_knobs(groups, target, knobs)


def _codes(groups: Sequence[FusedGroup], target: Target, cache: KernelCache | None
           ) -> dict[str, GroupCode]:
    codes: dict[str, GroupCode] = {}
    for g in groups:
        if g.symbol not in codes:
            codes[g.symbol] = group_code(g, target, cache)
    return codes


def uses_llvm(target: Target) -> bool:
    """Whether a cuda target's PTX comes from LLVM (-codegen=llvm, or no nvcc here)."""
    from ember.codegen.nvptx import find_nvcc

    if target.kind != "cuda":
        return False
    return target.option("codegen", "") == "llvm" or find_nvcc() is None


def model_llvm_code(model: Any, target: str | Target, opt_level: int = 3,
                    input_shapes: Mapping[str, Sequence[int]] | None = None,
                    knobs: Any = None) -> bytes | str:
    """A whole model's kernels through LLVM: PTX text (cuda) or an amdgcn ELF object
    (rocm), without a device."""
    tgt = Target(target) if isinstance(target, str) else target
    _, _, groups = _groups(model, tgt, opt_level, input_shapes, knobs)
    return llvm_code(groups, tgt)[0]


def model_source(model: Any, target: str | Target, opt_level: int = 3,
                 input_shapes: Mapping[str, Sequence[int]] | None = None,
                 knobs: Any = None, cache: CacheArg = False) -> str:
    """The GPU source of a whole model for any GPU kind (CUDA C, OpenCL C, Metal), without
    a device: `print(model_source("mobilenet.onnx", "metal"))`."""
    from ember.lowering.compile import _kernel_cache

    tgt = Target(target) if isinstance(target, str) else target
    _, _, groups = _groups(model, tgt, opt_level, input_shapes, knobs)
    codes = _codes(groups, tgt, _kernel_cache(cache))
    return gpu_model_source(list(codes.values()), tgt)


def compile_gpu(model: Any, target: Target, opt_level: int = 3,
                input_shapes: Mapping[str, Sequence[int]] | None = None,
                device: Any = None, knobs: Any = None, cache: CacheArg = True) -> DeviceModel:
    """A model compiled for a GPU target and loaded on `device` (default: the first one);
    `knobs` as for `ember.compile` (the GPU schedules' families); `cache` as for
    `ember.compile` (each group's kernels, and CUDA's PTX, are cached on disk)."""
    from ember.lowering.compile import _kernel_cache, knobs_table
    from ember.lowering.plan import exec_plan
    from ember.runtime.devices import default_device

    if target.kind not in RUNNABLE:
        raise EmberError(f"ember.compile for target kind '{target.kind}' generates code only; "
                         "use ember.driver_gpu.model_source to see it (OpenCL and CUDA run)")
    timings: dict[str, float] = {}
    start = time.perf_counter()
    fused, memory, groups = _groups(model, target, opt_level, input_shapes, knobs)
    timings["optimize"] = time.perf_counter() - start
    kernel_cache = _kernel_cache(cache)
    hits = kernel_cache.hits if kernel_cache is not None else 0
    if uses_llvm(target):  # PTX from LLVM's NVPTX backend, not nvcc
        code, launches, temporaries = llvm_code(groups, target)
        timings["kernels"] = time.perf_counter() - start - sum(timings.values())
    else:
        codes = _codes(groups, target, kernel_cache)
        timings["kernels"] = time.perf_counter() - start - sum(timings.values())
        code = device_code(gpu_model_source(list(codes.values()), target), target,
                           kernel_cache)
        launches = {symbol: c.launches for symbol, c in codes.items()}
        temporaries = {symbol: c.temporaries for symbol, c in codes.items()}
    timings["codegen"] = time.perf_counter() - start - sum(timings.values())
    calls, _ = prepacked_calls(groups)
    offsets, blob = pack_constants(fused, calls, [])
    xplan = exec_plan(fused, calls, memory, offsets, blob.size)
    device = device if device is not None else default_device(target.kind)
    stats = {"groups": len(groups), "kernels": sum(len(v) for v in launches.values()),
             "cached": (kernel_cache.hits - hits) if kernel_cache is not None else 0,
             "seconds": timings, "knobs": knobs_table(groups)}
    compiled = DeviceModel(xplan, device, code, {k: list(v) for k, v in launches.items()},
                           {k: list(v) for k, v in temporaries.items()}, blob, str(target),
                           graph=without_constant_values(fused), stats=stats)
    timings["load"] = time.perf_counter() - start - sum(timings.values())
    return compiled


__all__ = ["compile_gpu", "model_llvm_code", "model_source", "uses_llvm"]
