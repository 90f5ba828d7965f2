"""Knob families of the GPU schedules (the same interface as the CPU ones, ember.ops.knobs).

Defaults come from the target: -max-threads-per-block bounds every block; tiles stay within
-max-shared-memory-per-block (48 KiB when not given).
"""

from __future__ import annotations

from dataclasses import dataclass

from ember.ops.knobs import Knobs, Space, Task, powers_of_two

SHARED_DEFAULT_BYTES = 48 * 1024


def max_threads(task: Task) -> int:
    default = 256 if task.target.kind == "opencl" else 1024
    return int(task.target.option("max-threads-per-block", str(default)))


def shared_bytes(task: Task) -> int:
    return int(task.target.option("max-shared-memory-per-block", str(SHARED_DEFAULT_BYTES)))


@dataclass(frozen=True)
class GpuInjectiveKnobs(Knobs):
    """One thread per output element: `threads` per block over the fused output axes."""

    threads: int = 256

    @classmethod
    def space(cls, task: Task) -> Space:
        return Space({"threads": powers_of_two(32, max_threads(task))})

    @classmethod
    def default(cls, task: Task) -> GpuInjectiveKnobs:
        return cls(threads=min(256, max_threads(task)))


@dataclass(frozen=True)
class GpuReductionKnobs(Knobs):
    """A reduction: `threads` per block cooperate on one output row when `cooperative`
    (partial results in shared memory, then one sum), else one thread per output."""

    threads: int = 64
    cooperative: bool = True

    @classmethod
    def space(cls, task: Task) -> Space:
        return Space({"threads": powers_of_two(16, min(256, max_threads(task))),
                      "cooperative": (True, False)})

    @classmethod
    def default(cls, task: Task) -> GpuReductionKnobs:
        return cls(threads=min(64, max_threads(task)))


@dataclass(frozen=True)
class GpuMatmulKnobs(Knobs):
    """Shared-memory tiling of a matrix product (dense, matmul, batched, implicit-GEMM
    convolution): `tile` x `tile` threads per block, one output each, the reduction axis
    staged through shared memory `tile` at a time."""

    tile: int = 16

    @classmethod
    def space(cls, task: Task) -> Space:
        limit = max_threads(task)
        fits = [t for t in (4, 8, 16, 32) if t * t <= limit
                and 2 * t * t * 4 <= shared_bytes(task)]
        return Space({"tile": tuple(fits) or (4,)})

    @classmethod
    def default(cls, task: Task) -> GpuMatmulKnobs:
        limit = max_threads(task)
        return cls(tile=16 if 256 <= limit else 8)
