"""compile(): the whole flow, in order — import, optimize and fuse, compile kernels, plan, link.

    model = ember.compile("resnet18.onnx", target="llvm", opt_level=3)
    (logits,) = model.run({"input": x})

Kernels are keyed by their structure (ops, attributes, types and wiring of the fused group):
groups with the same key compile once, and compiled objects are cached on disk keyed by
(structure, target, compiler version), so compiling the same model again is fast.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from ember.codegen.llvm_target import check_llvm_target
from ember.errors import ArgumentError, EmberError
from ember.graph.ir import Graph, Value, without_constant_values
from ember.runtime.aot import link
from ember.runtime.cache import KernelCache, cache_key
from ember.runtime.executor import CompiledModel
from ember.runtime.groups import FusedGroup, fused_groups, optimize, plan, without_weights
from ember.runtime.plan import ExecPlan, KernelCall, Slot, TensorSpec
from ember.runtime.prepack import PackJob, pack_constants, prepacked_calls, run_pack_jobs
from ember.target import Target
from ember.tir.function import PrimFunc

PARALLEL_MIN_KERNELS = 8  # fewer kernels compile faster than worker processes start

__all__ = ["CompiledModel", "compile", "compile_kernel", "import_model", "lower_group"]


def import_model(model: Any, input_shapes: Mapping[str, Sequence[int]] | None = None
                 ) -> Graph:
    """A Graph from a path to an .onnx file, an onnx.ModelProto or a Graph (returned as is)."""
    if isinstance(model, Graph):
        if input_shapes:
            raise ArgumentError("input_shapes only applies to ONNX models; an ember Graph "
                                "already has static input shapes")
        return model
    if isinstance(model, (str, os.PathLike)):
        path = Path(model)
        if not path.is_file():
            raise ArgumentError(f"model file '{path}' does not exist")
        try:
            import onnx
        except ImportError:
            raise EmberError("reading ONNX models needs the onnx package: "
                             "pip install 'ember[onnx]'") from None
        try:
            model = onnx.load(str(path))
        except Exception as error:  # noqa: BLE001 (DecodeError, ValueError, ...)
            raise ArgumentError(f"cannot read '{path}' as an ONNX model: {error}") from None
    if type(model).__name__ == "ModelProto":
        from ember.frontend.onnx import from_onnx

        return from_onnx(model, input_shapes=input_shapes)
    raise ArgumentError(f"compile: expected a path, an onnx.ModelProto or an ember Graph, got "
                        f"{type(model).__name__}")


def lower_kernels(group: FusedGroup, target: Target | str = "llvm") -> list[PrimFunc]:
    """The optimized loop programs of one fused group: its kernel `group.symbol`, then (when
    it has weight stages to precompute) the pack kernel `group.symbol + "_pack"`."""
    from ember.build import optimize as optimize_tir
    from ember.ops.kernel import lower_group_kernels

    kernels = lower_group_kernels(group.nodes, group.inputs, group.outputs, group.symbol,
                                  target, group.constants)
    funcs = [kernels.main] + ([kernels.pack] if kernels.pack is not None else [])
    return [optimize_tir(f) for f in funcs]


def lower_group(group: FusedGroup, target: Target | str = "llvm") -> PrimFunc:
    """The optimized loop program of one fused group, named by its kernel symbol."""
    return lower_kernels(group, target)[0]


def compile_kernel(group: FusedGroup, target: Target | str = "llvm", pic: bool = False
                   ) -> bytes:
    """An object file defining the group's kernel `group.symbol` (and its pack kernel);
    `pic`: position-independent, for a shared library (else for this process's JIT)."""
    from ember.runtime.aot import emit_kernel_object

    try:
        return emit_kernel_object(lower_kernels(group, target), target, pic)
    except EmberError as error:
        raise type(error)(f"fused group '{group.name}' ({group.describe()}): {error}") from None


class _Progress:
    """tqdm when installed, else a one-line counter on stderr; silent when disabled."""

    def __init__(self, total: int, description: str, enabled: bool) -> None:
        self.total, self.count, self.enabled = total, 0, enabled and total > 0
        self.description = description
        self._bar: Any = None
        if self.enabled:
            try:
                from tqdm import tqdm

                self._bar = tqdm(total=total, desc=description, unit="kernel", leave=False)
            except ImportError:
                self._bar = None

    def update(self) -> None:
        self.count += 1
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.update(1)
        else:
            import sys

            end = "\n" if self.count == self.total else ""
            print(f"\r{self.description}: {self.count}/{self.total}", end=end, file=sys.stderr,
                  flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def _kernel_cache(cache: bool | str | os.PathLike[str] | KernelCache) -> KernelCache | None:
    if cache is False or cache is None:
        return None
    if isinstance(cache, KernelCache):
        return cache
    if cache is True:
        return KernelCache()
    return KernelCache(cache)


def _pool(workers: int) -> Executor:
    """Worker processes (forked: they start with ember already imported), else threads."""
    try:
        context = multiprocessing.get_context("fork")
    except ValueError:
        return ThreadPoolExecutor(max_workers=workers)
    return ProcessPoolExecutor(max_workers=workers, mp_context=context)


def compile_kernels(groups: Sequence[FusedGroup], target: Target, cache: KernelCache | None,
                    jobs: int | None = None, progress: bool = False, pic: bool = False
                    ) -> tuple[dict[str, bytes], dict[str, int]]:
    """Object code per distinct kernel symbol (cache first), compiled on `jobs` threads;
    `pic`: position-independent objects (cached apart from the JIT's)."""
    unique: dict[str, FusedGroup] = {}
    for g in groups:
        unique.setdefault(g.symbol, g)
    objects: dict[str, bytes] = {}
    todo = []
    cache_target = f"{target} -reloc=pic" if pic else str(target)
    for symbol, g in unique.items():
        blob = cache.get(cache_key(g.key, cache_target)) if cache is not None else None
        if blob is not None:
            objects[symbol] = blob
        else:
            todo.append(g)
    bar = _Progress(len(todo), "compiling kernels", progress)
    workers = jobs if jobs is not None else min(len(todo), len(os.sched_getaffinity(0)))
    try:
        if workers <= 1 or len(todo) < PARALLEL_MIN_KERNELS:
            for g in todo:
                objects[g.symbol] = compile_kernel(g, target, pic)
                bar.update()
        else:
            # llvmlite serializes every LLVM call behind one lock and lowering is pure
            # Python, so threads do not overlap; worker processes do
            with _pool(workers) as pool:
                futures = [(g, pool.submit(compile_kernel, without_weights(g), str(target),
                                           pic)) for g in todo]
                for g, future in futures:
                    objects[g.symbol] = future.result()
                    bar.update()
    finally:
        bar.close()
    if cache is not None:
        for g in todo:
            cache.put(cache_key(g.key, cache_target), objects[g.symbol])
    stats = {"groups": len(groups), "kernels": len(unique), "compiled": len(todo),
             "cached": len(unique) - len(todo)}
    return objects, stats


def _pack_constants(graph: Graph, groups: Sequence[FusedGroup]
                    ) -> tuple[dict[Value, int], np.ndarray]:
    """One 64-byte aligned blob holding every constant a kernel reads or the graph returns."""
    return pack_constants(graph, groups)


def exec_plan(graph: Graph, groups: Sequence[FusedGroup], memory: Any,
              constant_offsets: Mapping[Value, int], constant_bytes: int) -> ExecPlan:
    """Resolve every kernel argument to a slot: input, output, workspace or constant."""
    input_index = {v: i for i, v in enumerate(graph.inputs)}
    produced = {v for g in groups for v in g.outer_outputs}
    output_index: dict[Value, int] = {}
    for i, v in enumerate(graph.outputs):
        if v in produced:
            output_index.setdefault(v, i)

    def slot(v: Value) -> Slot:
        if v in input_index:
            return Slot("input", input_index[v])
        if v in constant_offsets:
            return Slot("constant", constant_offsets[v])
        if v in output_index:
            return Slot("output", output_index[v])
        if v not in memory.offsets:
            raise EmberError(f"the memory plan has no place for value '{v.name}' ({v.type})")
        return Slot("workspace", int(memory.offsets[v]))

    calls = []
    for g in groups:
        values = [*g.outer_inputs, *g.outer_outputs]
        calls.append(KernelCall(g.name, g.symbol, tuple(slot(v) for v in values),
                                tuple(str(v.type.dtype) for v in values),
                                tuple(v.type.shape for v in values), g.anchor, g.pattern,
                                tuple(v.name for v in values), len(g.outer_inputs)))
    sources = [slot(v) for v in graph.outputs]

    def spec(v: Value) -> TensorSpec:
        return TensorSpec(v.name, v.type.shape, str(v.type.dtype))

    return ExecPlan(graph.name, tuple(spec(v) for v in graph.inputs),
                    tuple(spec(v) for v in graph.outputs), tuple(sources), tuple(calls),
                    int(memory.workspace_bytes), constant_bytes,
                    int(getattr(memory, "naive_bytes", 0)),
                    int(getattr(memory, "peak_live_bytes", 0)))


class Prepared(NamedTuple):
    """A model compiled up to linking: plan, kernel objects, constant blob, pack jobs."""

    graph: Graph                       # the fused graph
    plan: ExecPlan
    objects: dict[str, bytes]
    blob: np.ndarray
    offsets: dict[Value, int]
    pack_jobs: list[PackJob]
    memory: Any
    stats: dict[str, Any]
    timings: dict[str, float]


def prepare(model: Any, target: Target, opt_level: int = 3,
            input_shapes: Mapping[str, Sequence[int]] | None = None,
            cache: bool | str | os.PathLike[str] | KernelCache = True,
            jobs: int | None = None, progress: bool | None = None,
            prepack: bool | None = None, pic: bool = False) -> Prepared:
    """Everything of `compile` before linking: the packed weights' slots in the blob are
    zero until the pack jobs run (`run_pack_jobs`)."""
    if not isinstance(opt_level, int) or not 0 <= opt_level <= 3:
        raise ArgumentError(f"opt_level must be an int in [0, 3], got {opt_level!r}")
    check_llvm_target(target)  # before any worker hands an unknown CPU to LLVM
    timings: dict[str, float] = {}
    start = time.perf_counter()
    graph = import_model(model, input_shapes)
    timings["import"] = time.perf_counter() - start
    fused = optimize(graph, opt_level, target)
    timings["optimize"] = time.perf_counter() - start - sum(timings.values())
    if prepack is None:
        prepack = os.environ.get("EMBER_PREPACK", "1").strip() not in ("0", "false", "no")
    memory = plan(fused)
    # a Concat whose inputs were planned as slices of its output has nothing left to do
    assembled = getattr(memory, "assembled", set())
    groups = [g for g in fused_groups(fused, prepack)
              if not (g.outer_outputs and all(v in assembled for v in g.outer_outputs))]
    show = progress if progress is not None else _stderr_is_terminal() and len(groups) > 8
    objects, stats = compile_kernels(groups, target, _kernel_cache(cache), jobs, bool(show),
                                     pic)
    timings["kernels"] = time.perf_counter() - start - sum(timings.values())
    calls, pack_jobs = prepacked_calls(groups)
    offsets, blob = pack_constants(fused, calls, pack_jobs)
    xplan = exec_plan(fused, calls, memory, offsets, blob.size)
    stats["prepacked"] = len(pack_jobs)
    return Prepared(fused, xplan, objects, blob, offsets, pack_jobs, memory, stats, timings)


def compile(model: Any, target: str | Target = "llvm", opt_level: int = 3,
            input_shapes: Mapping[str, Sequence[int]] | None = None,
            cache: bool | str | os.PathLike[str] | KernelCache = True,
            jobs: int | None = None, progress: bool | None = None,
            prepack: bool | None = None) -> CompiledModel:
    """Compile a model (path, onnx.ModelProto or ember Graph) into a runnable CompiledModel.

        model = ember.compile("mobilenet.onnx")
        (probs,) = model(x)

    `prepack` (default: on unless EMBER_PREPACK=0) computes the weight-only stages of the
    kernels (packed panels, transposed weights) once here instead of on every run.
    """
    tgt = Target(target)
    start = time.perf_counter()
    built = prepare(model, tgt, opt_level, input_shapes, cache, jobs, progress, prepack)
    timings = built.timings
    linked = link(built.plan, built.objects, tgt)
    timings["link"] = time.perf_counter() - start - sum(timings.values())
    run_pack_jobs(built.pack_jobs, linked.address, built.blob, built.offsets)
    timings["prepack"] = time.perf_counter() - start - sum(timings.values())
    # the blob holds every weight the kernels read; the graph kept for display does not
    compiled = CompiledModel(built.plan, built.objects, built.blob, str(tgt),
                             graph=without_constant_values(built.graph), stats=built.stats,
                             linked=linked)
    compiled.stats["seconds"] = timings
    compiled.memory_plan = built.memory
    return compiled


def _stderr_is_terminal() -> bool:
    import sys

    return bool(getattr(sys.stderr, "isatty", lambda: False)())
