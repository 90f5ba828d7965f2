"""Weights packed at compile time: the kernel arguments of prepacked groups, and the pack runs.

A group whose weights feed stages that read nothing else (B's panels, an LSTM's transposed
W and R, a blocked convolution kernel) compiles into two functions: the main kernel, which
reads the packed weights as extra constant inputs, and `<symbol>_pack`, which computes them
from the original weights (ember.lowering.kernel.split_constant_stages decides which stages).
The pack functions run once per compile, writing straight into the constant blob; a weight
that nothing else reads is then left out of the blob.

    calls, jobs = prepacked_calls(groups)            # per group: what the call passes
    offsets, blob = pack_constants(graph, calls, jobs)
    linked = link(plan, objects)
    run_pack_jobs(jobs, linked, blob, offsets)
"""

from __future__ import annotations

import ctypes
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ember.errors import EmberError
from ember.runtime.library import aligned_bytes
from ember.graph.ir import Graph, Value
from ember.lowering.groups import ALIGN, FusedGroup

PACK_SUFFIX = "_pack"


@dataclass(frozen=True, eq=False)
class PackJob:
    """One call of a pack function: weights in, packed weights (constant slots) out."""

    symbol: str
    weights: tuple[Value, ...]
    packed: tuple[Value, ...]


def prepacked_calls(groups: Sequence[FusedGroup]
                    ) -> tuple[list[FusedGroup], list[PackJob]]:
    """Each group as its kernel is called (outer inputs: the kept ones, then the packed
    weights as new values with constant slots), and the pack jobs that fill those slots."""
    calls: list[FusedGroup] = []
    jobs: list[PackJob] = []
    shared: dict[tuple[str, tuple[int, ...]], PackJob] = {}
    for g in groups:
        stages = g.weight_stages
        if stages is None:
            calls.append(g)
            continue
        weights = tuple(g.outer_inputs[i] for i in stages.pack_inputs)
        if not all(w.is_constant for w in weights):
            raise EmberError(f"fused group '{g.name}': its pack kernel reads a value that is "
                             "not a constant")
        key = (g.symbol, tuple(id(w) for w in weights))
        job = shared.get(key)
        if job is None:
            packed = tuple(Value(f"{g.name}.{name}", t) for name, t in stages.packed)
            job = PackJob(g.symbol + PACK_SUFFIX, weights, packed)
            shared[key] = job
            jobs.append(job)
        kept = tuple(g.outer_inputs[i] for i in stages.main_inputs)
        calls.append(dataclasses.replace(g, outer_inputs=kept + job.packed))
    return calls, jobs


def _aligned(size: int) -> int:
    return -(-size // ALIGN) * ALIGN


def pack_constants(graph: Graph, calls: Sequence[FusedGroup], jobs: Sequence[PackJob] = ()
                   ) -> tuple[dict[Value, int], np.ndarray]:
    """One 64-byte aligned blob holding every constant a kernel reads or the graph returns;
    the slots of packed weights are zero until `run_pack_jobs` fills them."""

    packed = {v for job in jobs for v in job.packed}
    offsets: dict[Value, int] = {}
    size = 0
    for v in [*(v for g in calls for v in g.outer_inputs), *graph.outputs]:
        if (v.is_constant or v in packed) and v not in offsets:
            offsets[v] = size
            size += _aligned(v.type.nbytes)
    blob = aligned_bytes(size, zero=False)
    end = 0
    for v, offset in offsets.items():
        blob[end:offset] = 0  # padding: saved models stay byte-for-byte reproducible
        nbytes = v.type.nbytes
        if v in packed:
            blob[offset:offset + nbytes] = 0
        else:
            data = np.ascontiguousarray(v.data).reshape(-1).view(np.uint8)
            blob[offset:offset + data.size] = data
        end = offset + nbytes
    blob[end:] = 0
    return offsets, blob


def run_pack_jobs(jobs: Sequence[PackJob], address_of: object, blob: np.ndarray,
                  offsets: Mapping[Value, int]) -> None:
    """Run every pack function (`address_of(symbol)` -> its address) into `blob`."""
    base = blob.ctypes.data
    for job in jobs:
        arrays = [np.ascontiguousarray(w.data) for w in job.weights]
        for v in job.packed:
            if offsets[v] + v.type.nbytes > blob.nbytes:
                raise EmberError(f"packed weight '{v.name}' does not fit the constant blob")
        count = len(arrays) + len(job.packed)
        fn = ctypes.CFUNCTYPE(ctypes.c_int32, *[ctypes.c_void_p] * count)(
            address_of(job.symbol))  # type: ignore[operator]
        status = fn(*[a.ctypes.data for a in arrays],
                    *[base + offsets[v] for v in job.packed])
        if status != 0:
            raise EmberError(f"pack kernel '{job.symbol}' failed with status {status}")
