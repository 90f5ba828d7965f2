"""GPU schedules of 2-D convolution over the computes of ember.ops.gpu.conv_compute.

Every form shares one thread layout over the output [n, oc, oh, ow]:

    blockIdx.z = (n, oc block)  blockIdx.y = oh block  blockIdx.x = ow block
    threadIdx.y: tile_oc output channels; threadIdx.x: tile_h x tile_w output pixels;
    each thread keeps reg_oc consecutive output channels in registers (the oc tile is
    tile_oc * reg_oc; thread ty owns channels ty * reg_oc ... ty * reg_oc + reg_oc - 1)

and differs in what the block stages through shared memory per reduction step:

- gemm (implicit GEMM): `chunk` rows of the virtual im2col matrix (col[k, pixels of the
  block]) and of the weight matrix (wmat[oc of the block, k]), gathered from the input as
  they are copied; every k is read from shared memory reg_oc times per col value.
- direct: `chunk` whole input channels: the block's input window (tile_h - 1) * stride +
  dilated kernel rows by the same in columns, and the weights [oc tile, chunk, KH, KW];
  neighbouring pixels reuse the window's values across the kernel taps.
- depthwise: one step; the window of the block's tile_oc channels and their taps.

Between steps the barriers come from the insert_barriers pass (shared buffers reused).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ember import te
from ember.ops.generic import inline_injective
from ember.ops.gpu.conv_compute import COL_TAG, DEPTHWISE_TAG, GEMM_TAG, WMAT_TAG
from ember.ops.gpu.generic import bind_flat, extent, root_stages
from ember.ops.gpu.knobs import max_threads, shared_bytes
from ember.ops.knobs import Knobs, Space, Task, in_range, only, powers_of_two
from ember.target import Target
from ember.te.schedule import Schedule, Stage
from ember.te.tensor import ComputeOp, PlaceholderOp, Tensor
from ember.tir.expr import IterVar

ALGOS = ("gemm", "direct")


def conv_stage_of(outs: Sequence[Tensor]) -> ComputeOp | None:
    """The GPU conv compute (gemm or depthwise form) among the producers of `outs`."""
    from ember.te.graph import post_order

    for op in post_order([t.op for t in outs]):
        if isinstance(op, ComputeOp) and op.tag in (GEMM_TAG, DEPTHWISE_TAG):
            return op
    return None


def _dims(task: Task) -> tuple[int, int, int, int]:
    op = conv_stage_of(task.outs)
    if op is None:
        return (1, 1, 1, 1)
    return tuple(extent(iv) for iv in op.axis)  # type: ignore[return-value]


@dataclass(frozen=True)
class GpuConvKnobs(Knobs):
    """Thread tile and staging of a GPU convolution (see the module docstring); `algo` and
    `chunk` apply to group-1 convolutions (depthwise ones stage their window once)."""

    algo: str = "gemm"
    tile_oc: int = 8
    reg_oc: int = 2
    tile_h: int = 4
    tile_w: int = 8
    chunk: int = 16

    @classmethod
    def space(cls, task: Task) -> Space:
        limit = max_threads(task)
        return Space({"algo": ALGOS, "tile_oc": powers_of_two(1, 32),
                      "reg_oc": (1, 2, 4, 8), "tile_h": (1, 2, 4, 8), "tile_w": (4, 8, 16, 32),
                      "chunk": powers_of_two(4, 32) if limit else (8,)})

    @classmethod
    def default(cls, task: Task) -> GpuConvKnobs:
        _, oc, oh, ow = _dims(task)
        limit = max_threads(task)
        tile_w = min(16, 1 << max(0, (ow - 1).bit_length()))
        tile_h = max(1, min(64 // tile_w, 1 << max(0, (oh - 1).bit_length())))
        op = conv_stage_of(task.outs)
        if op is not None and op.tag == DEPTHWISE_TAG:
            tile_oc = max(1, min(4, limit // (tile_h * tile_w)))
            return cls("direct", tile_oc, 1, tile_h, tile_w, 1)
        pixels = tile_h * tile_w
        tile_oc = max(1, min(limit // pixels, 4 if oc <= 16 else 8))
        reg_oc = 4 if oc >= 8 * tile_oc else (2 if oc >= 2 * tile_oc else 1)
        # small feature maps (deep layers): stage k-slices; large ones: stage the window
        algo = "gemm" if oh * ow <= 256 else "direct"
        return cls(algo, tile_oc, reg_oc, tile_h, tile_w, 16 if algo == "gemm" else 4)

    def check(self, task: Task) -> None:
        only(self, "algo", ALGOS, "(implicit GEMM or direct)")
        limit = max_threads(task)
        for name in ("tile_oc", "reg_oc", "tile_h", "tile_w", "chunk"):
            in_range(self, name, 1, 1024, "a tile size")
        if self.tile_oc * self.tile_h * self.tile_w > limit:
            raise self.reject("tile_oc", f"x tile_h x tile_w = "
                              f"{self.tile_oc * self.tile_h * self.tile_w} threads exceeds the "
                              f"target's {limit} per block")
        need = self.shared_floats(task) * 4
        if need > shared_bytes(task):
            raise self.reject("chunk", f"stages {need} bytes in shared memory, more than the "
                              f"target's {shared_bytes(task)} per block")

    def shared_floats(self, task: Task) -> int:
        """Floats of shared memory one block stages (an upper bound)."""
        op = conv_stage_of(task.outs)
        if op is None:
            return 0
        window = (self.tile_h + 8) * (self.tile_w + 8)  # kernels up to 7x7 at stride 1
        oc_tile = self.tile_oc * self.reg_oc
        if op.tag == DEPTHWISE_TAG:
            return self.tile_oc * (window + 64)
        if self.algo == "gemm":
            return self.chunk * (oc_tile + self.tile_h * self.tile_w)
        kk = product_of(op.reduce_axis) // max(1, _in_channels(op))
        return self.chunk * (window + oc_tile * kk)


def product_of(ivs: Sequence[IterVar]) -> int:
    total = 1
    for iv in ivs:
        total *= extent(iv)
    return total


def _in_channels(op: ComputeOp) -> int:
    """Input channels of the gemm form (the padded input's dimension 1)."""
    col = _producer(op, COL_TAG)
    if col is None:
        return 1
    pad = col.input_tensors()[0]
    return int(pad.shape[1].value)  # type: ignore[attr-defined]


def _producer(op: ComputeOp, tag: str) -> ComputeOp | None:
    for t in op.input_tensors():
        if isinstance(t.op, ComputeOp) and t.op.tag == tag:
            return t.op
    return None


def bind_cache(stage: Stage, threads_y: int, threads_x: int) -> None:
    """Spread a shared copy over the block's threads (consecutive elements on threadIdx.x:
    coalesced global reads)."""
    axes = list(stage.op.axis)  # type: ignore[attr-defined]
    fused = stage.fuse(*axes) if len(axes) > 1 else axes[0]
    rest, tx = stage.split(fused, threads_x)
    _, ty = stage.split(rest, threads_y)
    stage.bind(ty, "threadIdx.y")
    stage.bind(tx, "threadIdx.x")


def _tile_output(host: Stage, k: GpuConvKnobs) -> IterVar:
    """Bind host's loops (n, oc, oh, ow) as in the module docstring; the loop to compute
    the accumulators at."""
    n, oc, oh, ow = host.op.axis  # type: ignore[attr-defined]
    bo, rest = host.split(oc, k.tile_oc * k.reg_oc)
    ty, ri = host.split(rest, k.reg_oc)
    bh, th = host.split(oh, k.tile_h)
    bw, tw = host.split(ow, k.tile_w)
    host.reorder(n, bo, bh, bw, ty, th, tw, ri)
    bz = host.fuse(n, bo)
    tx = host.fuse(th, tw)
    host.bind(bz, "blockIdx.z")
    host.bind(bh, "blockIdx.y")
    host.bind(bw, "blockIdx.x")
    host.bind(ty, "threadIdx.y")
    host.bind(tx, "threadIdx.x")
    host.unroll(ri)
    return tx


def schedule_conv_gpu(outs: Sequence[Tensor], target: Target,
                      knobs: GpuConvKnobs | None = None) -> Schedule | None:
    """The schedule of a conv group in a GPU form (None when the group has none, or its
    output is not the convolution's shape: the caller falls back)."""
    op = conv_stage_of(outs)
    if op is None or len(outs) != 1:
        return None
    if [int(d.value) for d in outs[0].shape] != [extent(iv) for iv in op.axis]:  # type: ignore
        return None
    task = Task(tuple(outs), target, "Conv")
    k = knobs or GpuConvKnobs.default(task)
    s = te.create_schedule([t.op for t in outs])
    inline_injective(s)
    conv = op.output(0)
    if s[outs[0]].op is op:
        work = s.cache_write(conv, "local")
        host = s[outs[0]]
    else:
        work = conv
        s[conv].set_scope("local")
        host = s[outs[0]]
    at = _tile_output(host, k)
    ws = s[work]
    ws.compute_at(host, at)
    wop = ws.op
    assert isinstance(wop, ComputeOp)
    depthwise = op.tag == DEPTHWISE_TAG
    reduce_axes = list(wop.reduce_axis)
    fused = ws.fuse(*reduce_axes) if len(reduce_axes) > 1 else reduce_axes[0]
    if depthwise:
        step = product_of(reduce_axes)
    elif k.algo == "gemm":
        step = k.chunk
    else:
        step = k.chunk * (product_of(reduce_axes) // _in_channels(op))
    ko, ki = ws.split(fused, step)
    ws.reorder(ko, ki, *wop.axis)
    for axis in wop.axis:
        ws.unroll(axis)
    threads_x = k.tile_h * k.tile_w
    for tensor in _staged(s, op, work, depthwise or k.algo == "direct"):
        cached = s.cache_read(tensor, "shared", [s[work].op if tensor.op in _reads(s[work].op)
                                                 else _reader(s, op, tensor)])
        s[cached].compute_at(ws, ko)
        bind_cache(s[cached], k.tile_oc, threads_x)
    for stage in root_stages(s):
        if stage is not host and not stage.relations:
            bind_flat(stage, min(256, max_threads(task)))
    return s


def _reads(op: object) -> list[object]:
    return [t.op for t in op.input_tensors()]  # type: ignore[attr-defined]


def _reader(s: Schedule, conv: ComputeOp, tensor: Tensor) -> object:
    """The (inlined) view of the conv that reads `tensor`: col or wmat."""
    for t in conv.input_tensors():
        if tensor.op in _reads(t.op):
            return t.op
    raise AssertionError(f"no reader of {tensor.name}")


def _staged(s: Schedule, conv: ComputeOp, work: Tensor, window: bool) -> list[Tensor]:
    """What the block copies to shared memory each step: the col and wmat views (gemm), or
    the input and the weights they read (direct and depthwise)."""
    views = [t for t in conv.input_tensors()]
    if not window:
        return views
    staged: list[Tensor] = []
    for view in views:
        if isinstance(view.op, ComputeOp) and view.op.tag in (COL_TAG, WMAT_TAG):
            staged += [t for t in view.op.input_tensors()
                       if isinstance(t.op, (ComputeOp, PlaceholderOp))]
        else:
            staged.append(view)
    return staged
