"""Checks that a schedule can run as GPU kernels: every loop bound to a thread axis or small.

Each stage computed at root becomes one kernel. Its loops outside the thread-bound ones run
in every thread, so only short ones (at most SERIAL_OUTER_LIMIT iterations together) are
allowed there; a long one means the schedule forgot to bind an axis, and the error says
which stage and axis to bind.
"""

from __future__ import annotations

from ember.errors import ScheduleError
from ember.te.bounds import StageBounds
from ember.te.schedule import Attach, Schedule, Stage
from ember.te.tensor import ComputeOp, ScanOp
from ember.tir.stmt import ForKind

# iterations of unbound loops around a kernel's thread-bound loops that every thread repeats
SERIAL_OUTER_LIMIT = 16
THREAD_TAGS = tuple(f"{kind}.{axis}" for kind in ("blockIdx", "threadIdx") for axis in "xyz")


def _kind(stage: Stage, iv: object) -> ForKind:
    attr = stage.iter_attrs.get(iv)  # type: ignore[call-overload]
    return attr.kind if attr is not None else ForKind.SERIAL


def check_gpu_stage(stage: Stage, bounds: StageBounds) -> None:
    """Raise ScheduleError unless the root stage `stage` maps onto GPU threads."""
    leaves = stage.leaf_iter_vars
    for iv in leaves:
        if _kind(stage, iv) == ForKind.PARALLEL:
            raise ScheduleError(f"stage '{stage.name}' axis '{iv.name}': a parallel loop is "
                                "for CPU threads; bind it to a thread axis (blockIdx.x / "
                                "threadIdx.x) instead")
    bound = [i for i, iv in enumerate(leaves) if _kind(stage, iv) == ForKind.THREAD_BINDING]
    first = bound[0] if bound else len(leaves)
    trips = 1
    for iv in leaves[:first]:
        trips *= bounds.leaf_extents[iv]
        if trips > SERIAL_OUTER_LIMIT:
            where = "outside its thread-bound loops" if bound else "and no axis is bound"
            raise ScheduleError(
                f"stage '{stage.name}' axis '{iv.name}' (extent {bounds.leaf_extents[iv]}) "
                f"would run serially in every GPU thread ({where}); bind it to a thread "
                "axis, e.g. s[T].bind(axis, 'blockIdx.x') after a split")


def check_gpu_schedule(schedule: Schedule, bounds: dict[Stage, StageBounds]) -> None:
    """Check every root stage of `schedule` (see check_gpu_stage)."""
    for stage in schedule.stages:
        if stage.attach != Attach.ROOT or not isinstance(stage.op, (ComputeOp, ScanOp)):
            continue
        check_gpu_stage(stage, bounds[stage])
