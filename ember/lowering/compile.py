"""The compile pipeline below import: optimize and fuse the graph, lower and compile one
kernel per distinct fused group (cached on disk, in worker processes when there are many),
pack the constants and resolve the execution plan. `prepare` returns everything linking
needs; the driver links it into this process and the exporter into a shared library.

Kernels are keyed by their structure (ops, attributes, types and wiring of the fused group):
groups with the same key compile once, and compiled objects are cached on disk keyed by
(structure, target, compiler version).
"""

from __future__ import annotations

import os
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool
from typing import Any, NamedTuple

import numpy as np

from ember.codegen.llvm_target import check_llvm_target
from ember.errors import ArgumentError, EmberError, InternalError, ScheduleError
from ember.graph.ir import Graph, Value
from ember.lowering.build import optimize as optimize_tir
from ember.lowering.cache import KernelCache, cache_key
from ember.lowering.groups import (
    FusedGroup,
    fused_groups,
    optimize,
    plan_memory,
    with_knobs,
    without_weights,
)
from ember.lowering.kernel import group_knobs, lower_group_kernels
from ember.lowering.link import emit_kernel_object
from ember.lowering.plan import exec_plan
from ember.lowering.workers import worker_pool
from ember.lowering.prepack import PackJob, pack_constants, prepacked_calls
from ember.ops.knobs import Knobs, Task, resolve_knobs
from ember.runtime.plan import ExecPlan
from ember.target import Target
from ember.tir.function import PrimFunc

PARALLEL_MIN_KERNELS = 8  # fewer kernels compile faster than worker processes start


def lower_kernels(group: FusedGroup, target: Target | str = "llvm") -> list[PrimFunc]:
    """The optimized loop programs of one fused group: its kernel `group.symbol`, then (when
    it has weight stages to precompute) the pack kernel `group.symbol + "_pack"`."""
    kernels = lower_group_kernels(group.nodes, group.inputs, group.outputs, group.symbol,
                                  target, group.constants, group.knobs)
    funcs = [kernels.main] + ([kernels.pack] if kernels.pack is not None else [])
    return [optimize_tir(f) for f in funcs]


def lower_group(group: FusedGroup, target: Target | str = "llvm") -> PrimFunc:
    """The optimized loop program of one fused group, named by its kernel symbol."""
    return lower_kernels(group, target)[0]


def compile_kernel(group: FusedGroup, target: Target | str = "llvm", pic: bool = False
                   ) -> bytes:
    """An object file defining the group's kernel `group.symbol` (and its pack kernel);
    `pic`: position-independent, for a shared library (else for this process's JIT)."""
    where = f"fused group '{group.name}' ({group.describe()}; nodes {group.node_names()})"
    try:
        return emit_kernel_object(lower_kernels(group, target), target, pic)
    except EmberError as error:
        raise type(error)(f"{where}: {error}") from None
    except Exception as error:  # noqa: BLE001 - a compiler bug: say which kernel, keep its place
        # a worker process's traceback does not survive pickling: name the failing frame
        frame = traceback.extract_tb(error.__traceback__)[-1]
        raise InternalError(f"{where}: internal compiler error {type(error).__name__}: "
                            f"{error} (at {os.path.basename(frame.filename)}:{frame.lineno} "
                            f"in {frame.name}); please report it with the model") from error


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
        blob = (cache.get(cache_key(g.key, cache_target), [symbol]) if cache is not None
                else None)
        if blob is not None:
            objects[symbol] = blob
        else:
            todo.append(g)
    bar = _Progress(len(todo), "compiling kernels", progress)
    workers = jobs if jobs is not None else min(len(todo), len(os.sched_getaffinity(0)))
    # llvmlite serializes every LLVM call behind one lock and lowering is pure Python, so
    # threads do not overlap; worker processes do
    pool = worker_pool(workers) if len(todo) >= PARALLEL_MIN_KERNELS else None
    try:
        if pool is None:
            for g in todo:
                objects[g.symbol] = compile_kernel(g, target, pic)
                bar.update()
        else:
            with pool:
                futures = [(g, pool.submit(compile_kernel, without_weights(g), str(target),
                                           pic)) for g in todo]
                for g, future in futures:
                    objects[g.symbol] = _worker_result(g, future)
                    bar.update()
    finally:
        bar.close()
    if cache is not None:
        for g in todo:
            cache.put(cache_key(g.key, cache_target), objects[g.symbol])
        if todo:
            cache.prune()
    stats = {"groups": len(groups), "kernels": len(unique), "compiled": len(todo),
             "cached": len(unique) - len(todo)}
    return objects, stats


def _worker_result(group: FusedGroup, future: Future[bytes]) -> bytes:
    """A worker's object code; any failure there (a worker that died, an internal error)
    becomes an EmberError naming the fused group."""
    try:
        return future.result()
    except EmberError:
        raise  # compile_kernel already named the group
    except BrokenProcessPool:
        raise EmberError(f"fused group '{group.name}' ({group.describe()}): the worker process "
                         "compiling it died (out of memory, or killed); compile with jobs=1 "
                         "to see the failure in this process") from None
    except Exception as error:  # noqa: BLE001 (any failure of the worker, named)
        raise EmberError(f"fused group '{group.name}' ({group.describe()}): compiling it in a "
                         f"worker process failed: {type(error).__name__}: {error}") from None


# knobs for `compile`: per fused group name, or a function of the group and its task that
# returns knobs or None (the default)
KnobsArg = Mapping[str, Knobs] | Callable[[FusedGroup, Task], Knobs | None] | None


def choose_knobs(groups: Sequence[FusedGroup], target: Target, knobs: KnobsArg = None
                 ) -> list[FusedGroup]:
    """Every group with the knobs its schedule runs with: those `knobs` gives for it (checked:
    family and values), else its anchor family's default for the group's task."""
    if knobs is not None and not isinstance(knobs, Mapping) and not callable(knobs):
        raise ArgumentError(f"knobs must map fused group names to Knobs or be a function "
                            f"(group, task) -> Knobs | None, got {type(knobs).__name__}")
    if isinstance(knobs, Mapping):
        names = {g.name for g in groups}
        unknown = sorted(set(knobs) - names)
        if unknown:
            raise ArgumentError(f"knobs name fused group(s) {unknown} that the model does not "
                                f"have; its groups: {sorted(names)[:20]}")
    out = []
    for g in groups:
        task, family = group_knobs(g.nodes, g.inputs, g.outputs, target)
        given = knobs.get(g.name) if isinstance(knobs, Mapping) else \
            knobs(g, task) if knobs is not None else None
        where = f"fused group '{g.name}' ({task.op})"
        if given is not None and not isinstance(given, Knobs):
            raise ArgumentError(f"{where}: knobs must be a Knobs value, got "
                                f"{type(given).__name__}")
        try:
            chosen = resolve_knobs(family, given, task.outs, target, task.op, task.attrs)
        except ScheduleError as error:
            raise ScheduleError(f"{where}: {error}") from None
        out.append(with_knobs(g, chosen))
    return out


def knobs_table(groups: Sequence[FusedGroup]) -> dict[str, dict[str, Any]]:
    """What a user sees of the chosen knobs: per group name, family and values."""
    return {g.name: {"family": g.knobs.family(), **g.knobs.to_dict()}
            for g in groups if g.knobs is not None}


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


def prepare(graph: Graph, target: Target, opt_level: int = 3,
            cache: bool | str | os.PathLike[str] | KernelCache = True,
            jobs: int | None = None, progress: bool | None = None,
            prepack: bool = True, pic: bool = False, knobs: KnobsArg = None) -> Prepared:
    """Everything of `compile` after import and before linking: the packed weights' slots
    in the blob are zero until the pack jobs run (`run_pack_jobs`); `knobs`: see
    `choose_knobs`."""
    if not isinstance(opt_level, int) or not 0 <= opt_level <= 3:
        raise ArgumentError(f"opt_level must be an int in [0, 3], got {opt_level!r}")
    check_llvm_target(target)  # before any worker hands an unknown CPU to LLVM
    timings: dict[str, float] = {}
    start = time.perf_counter()
    fused = optimize(graph, opt_level, target)
    timings["optimize"] = time.perf_counter() - start
    memory = plan_memory(fused)
    # a Concat whose inputs were planned as slices of its output has nothing left to do
    assembled = getattr(memory, "assembled", set())
    groups = [g for g in fused_groups(fused, prepack, target)
              if not (g.outer_outputs and all(v in assembled for v in g.outer_outputs))]
    groups = choose_knobs(groups, target, knobs)
    show = progress if progress is not None else _stderr_is_terminal() and len(groups) > 8
    objects, counts = compile_kernels(groups, target, _kernel_cache(cache), jobs, bool(show),
                                      pic)
    stats: dict[str, Any] = dict(counts)
    timings["kernels"] = time.perf_counter() - start - sum(timings.values())
    calls, pack_jobs = prepacked_calls(groups)
    offsets, blob = pack_constants(fused, calls, pack_jobs)
    xplan = exec_plan(fused, calls, memory, offsets, blob.size)
    stats["prepacked"] = len(pack_jobs)
    stats["knobs"] = knobs_table(groups)
    return Prepared(fused, xplan, objects, blob, offsets, pack_jobs, memory, stats, timings)


def _stderr_is_terminal() -> bool:
    import sys

    return bool(getattr(sys.stderr, "isatty", lambda: False)())
