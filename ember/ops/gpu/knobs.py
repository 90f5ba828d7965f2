"""Knob families of the GPU schedules (the same interface as the CPU ones, ember.ops.knobs).

Defaults come from the target: -max-threads-per-block bounds every block; tiles stay within
-max-shared-memory-per-block (48 KiB when not given, Metal's 32 KiB on metal).
"""

from __future__ import annotations

from dataclasses import dataclass

from ember.ops.knobs import Knobs, Space, Task, powers_of_two

SHARED_DEFAULT_BYTES = 48 * 1024
METAL_SHARED_BYTES = 32 * 1024  # threadgroup memory of Apple GPUs
# elements per thread of elementwise kernels by default. 4 (float4 loads and stores) showed
# no consistent gain on PoCL (1M-element Add: 0.23-0.45 ms either way, noisy); the tuner
# tries 2 and 4 (knob `vector`) where the device may reward them
VECTOR_DEFAULT = 1


def max_threads(task: Task) -> int:
    default = 256 if task.target.kind == "opencl" else 1024
    return int(task.target.option("max-threads-per-block", str(default)))


def shared_bytes(task: Task) -> int:
    default = METAL_SHARED_BYTES if task.target.kind == "metal" else SHARED_DEFAULT_BYTES
    return int(task.target.option("max-shared-memory-per-block", str(default)))


@dataclass(frozen=True)
class GpuInjectiveKnobs(Knobs):
    """One thread per `vector` consecutive output elements (1: one each), `threads` per block
    over the fused output axes; a stage whose size `vector` does not divide gets one each."""

    threads: int = 256
    vector: int = 1

    @classmethod
    def space(cls, task: Task) -> Space:
        return Space({"threads": powers_of_two(32, max_threads(task)), "vector": (1, 2, 4)})

    @classmethod
    def default(cls, task: Task) -> GpuInjectiveKnobs:
        return cls(threads=min(256, max_threads(task)), vector=VECTOR_DEFAULT)


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
