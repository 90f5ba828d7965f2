"""GPU schedule of RNN / LSTM / GRU (ember.ops.rnn's te.scan computes) and its knobs.

The input projection for every step is one GEMM kernel before the recurrence (one thread
per output, each row block of x and panel of W read by neighbouring threads). The scan's
time loop stays on the host (ember.codegen.gpu_kernels): each step launches the recurrent
product h[t-1] @ R^T (one thread per batch entry, gate and unit), then the cell update(s)
and the copy into the state, one thread per (batch entry, unit); the launch boundary
is the barrier between steps, so no grid-wide synchronisation is needed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ember import te
from ember.ops.gpu.generic import bind_flat
from ember.ops.gpu.knobs import max_threads
from ember.ops.knobs import Knobs, Space, Task, powers_of_two
from ember.target import Target
from ember.te.schedule import Attach, Schedule
from ember.te.tensor import ComputeOp, ScanOp, Tensor

# computes kept as their own kernels (the rest of the group is inlined into its readers)
_KEEP = ("RNN.init", "LSTM.cell", "GRU.cell", "RNN.cell", "GRU.reset", "LSTM.input_bias",
         "GRU.input_bias", "RNN.input_bias", "LSTM.rec", "GRU.rec", "RNN.rec", "GRU.rec_h")


@dataclass(frozen=True)
class GpuRNNKnobs(Knobs):
    """Threads per block of the projection GEMM (`projection`) and of every per-step kernel
    (`step`: recurrent product, cell, state copy)."""

    projection: int = 64
    step: int = 64

    @classmethod
    def space(cls, task: Task) -> Space:
        sizes = powers_of_two(32, min(256, max_threads(task)))
        return Space({"projection": sizes, "step": sizes})

    @classmethod
    def default(cls, task: Task) -> GpuRNNKnobs:
        limit = max_threads(task)
        return cls(min(64, limit), min(64, limit))


def schedule_rnn_gpu(outs: Sequence[Tensor], target: Target, knobs: GpuRNNKnobs
                     ) -> Schedule:
    """The LSTM / GRU group as kernels (see the module docstring)."""
    s = te.create_schedule([t.op for t in outs])
    for stage in s.stages:
        op = stage.op
        if (isinstance(op, ComputeOp) and not stage.is_output and op.tag not in _KEEP
                and stage.attach == Attach.ROOT and not op.reduce_axis):
            stage.compute_inline()
    for stage in s.stages:
        op = stage.op
        if isinstance(op, ScanOp):
            bind_flat(stage, knobs.step, list(op.spatial_axis))
            continue
        if not isinstance(op, ComputeOp) or stage.attach == Attach.INLINE:
            continue
        if op.tag.endswith(".input"):
            continue  # computed per output of the projection, below
        in_step = stage.attach == Attach.SCOPE
        bind_flat(stage, knobs.step if in_step else knobs.projection)
        if op.tag.endswith(".input_bias"):
            mm = [t for t in s.stages if isinstance(t.op, ComputeOp)
                  and t.op.tag.endswith(".input") and t.op in [x.op for x in op.input_tensors()]]
            if mm:
                thread = stage.leaf_iter_vars[-1]
                mm[0].compute_at(stage, thread)
    return s
