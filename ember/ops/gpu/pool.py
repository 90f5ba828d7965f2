"""GPU schedule of window pooling (MaxPool, AveragePool, LpPool over ember.ops.pool's computes).

A 2-D pool is two reductions: `rows` reduces the kernel's rows for every input column the
output needs, the pool stage reduces the columns of `rows`. One kernel does both:

    blockIdx.z = (n, c block)  blockIdx.y = oh block  blockIdx.x = ow block
    threadIdx.y: tile_c channels, threadIdx.x: tile_h x tile_w outputs
    rows of the block's tile -> shared memory (all threads), barrier,
    each thread reduces its window's columns from shared memory into a register

so the intermediate never goes to global memory, and overlapping windows (3x3 stride 2)
read each input once per block. 1-D pools (no rows stage) reduce straight from the input.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ember import te
from ember.ops.generic import inline_injective
from ember.ops.gpu.conv import bind_cache
from ember.ops.gpu.generic import bind_flat, extent, root_stages
from ember.ops.gpu.knobs import max_threads, shared_bytes
from ember.ops.knobs import Knobs, Space, Task, in_range
from ember.target import Target
from ember.te.graph import post_order
from ember.te.schedule import Schedule
from ember.te.tensor import ComputeOp, Tensor

POOL_OPS = ("MaxPool", "AveragePool", "LpPool")


def pool_stages(outs: Sequence[Tensor]) -> tuple[ComputeOp | None, ComputeOp | None]:
    """(the pool reduction, its rows stage or None) among the producers of `outs`."""
    pool = rows = None
    for op in post_order([t.op for t in outs]):
        if isinstance(op, ComputeOp) and op.reduce_axis and op.tag in POOL_OPS:
            pool = op
        if isinstance(op, ComputeOp) and op.tag in tuple(f"{p}.rows" for p in POOL_OPS):
            rows = op
    return pool, rows


@dataclass(frozen=True)
class GpuPoolKnobs(Knobs):
    """Outputs per block of a pooling kernel: tile_c channels x tile_h x tile_w positions."""

    tile_c: int = 4
    tile_h: int = 4
    tile_w: int = 16

    @classmethod
    def space(cls, task: Task) -> Space:
        return Space({"tile_c": (1, 2, 4, 8), "tile_h": (1, 2, 4, 8),
                      "tile_w": (4, 8, 16, 32)})

    @classmethod
    def default(cls, task: Task) -> GpuPoolKnobs:
        pool, _ = pool_stages(task.outs)
        oh, ow = (extent(iv) for iv in pool.axis[-2:]) if pool is not None and \
            len(pool.axis) == 4 else (1, 1)
        tile_w = min(16, 1 << max(0, (ow - 1).bit_length()))
        tile_h = max(1, min(64 // tile_w, 1 << max(0, (oh - 1).bit_length())))
        tile_c = max(1, min(8, max_threads(task) // (tile_h * tile_w), 256 // (tile_h * tile_w)))
        return cls(tile_c, tile_h, tile_w)

    def check(self, task: Task) -> None:
        for name in ("tile_c", "tile_h", "tile_w"):
            in_range(self, name, 1, 1024, "a tile size")
        threads = self.tile_c * self.tile_h * self.tile_w
        if threads > max_threads(task):
            raise self.reject("tile_c", f"x tile_h x tile_w = {threads} threads exceeds the "
                              f"target's {max_threads(task)} per block")
        # the rows tile of a kernel up to 11 wide at stride 4
        need = 4 * self.tile_c * self.tile_h * (self.tile_w * 4 + 11)
        if need > shared_bytes(task):
            raise self.reject("tile_w", f"stages up to {need} bytes of rows in shared memory, "
                              f"more than the target's {shared_bytes(task)}")


def schedule_pool_gpu(outs: Sequence[Tensor], target: Target,
                      knobs: GpuPoolKnobs | None = None) -> Schedule | None:
    """The pooling schedule of the module docstring; None when the group is not a 2-D pool
    with an output of the pool's shape (the caller falls back)."""
    pool, rows = pool_stages(outs)
    if pool is None or len(outs) != 1 or len(pool.axis) != 4:
        return None
    if [int(d.value) for d in outs[0].shape] != [extent(iv) for iv in pool.axis]:  # type: ignore
        return None
    k = knobs or GpuPoolKnobs.default(Task(tuple(outs), target))
    s = te.create_schedule([t.op for t in outs])
    inline_injective(s)
    host = s[outs[0]]
    if host.op is pool:
        return None
    n, c, oh, ow = host.op.axis  # type: ignore[attr-defined]
    bc, tc = host.split(c, k.tile_c)
    bh, th = host.split(oh, k.tile_h)
    bw, tw = host.split(ow, k.tile_w)
    host.reorder(n, bc, bh, bw, tc, th, tw)
    bz = host.fuse(n, bc)
    tx = host.fuse(th, tw)
    host.bind(bz, "blockIdx.z")
    host.bind(bh, "blockIdx.y")
    host.bind(bw, "blockIdx.x")
    host.bind(tc, "threadIdx.y")
    host.bind(tx, "threadIdx.x")
    stage = s[pool.output(0)]
    stage.set_scope("local")
    stage.compute_at(host, tx)
    if rows is not None:
        r = s[rows.output(0)]
        r.set_scope("shared")
        r.compute_at(host, bw)
        bind_cache(r, k.tile_c, k.tile_h * k.tile_w)
    for other in root_stages(s):
        if other is not host and not other.relations:
            bind_flat(other, min(256, max_threads(Task(tuple(outs), target))))
    return s
