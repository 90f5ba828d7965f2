"""Measuring GPU candidates: one fused group built for a GPU target with some knobs, its
inputs on the device, timed with the device's own events.

The runner interface is the CPU one (ember.autotune.measure): `build` returns a kernel with
`run()` and `outputs`; a GPU kernel also has `timed(number)`, the device seconds of `number`
back-to-back calls from the start of the first launch to the end of the last (what the
kernels cost on the device, without Python's launch overhead between timer reads). Its
outputs are copied back only when read, so `run()` in a timing loop stays on the device.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ember.errors import TuningError
from ember.lowering.gpu_program import device_code, lower_group_code, model_source
from ember.lowering.groups import FusedGroup, with_knobs
from ember.ops.knobs import Knobs
from ember.target import Target


class GpuGroupKernel:
    """A fused group's kernels on a GPU device, bound to copies of `inputs` there."""

    def __init__(self, group: FusedGroup, target: Target, knobs: Knobs,
                 inputs: Sequence[np.ndarray], device: Any = None) -> None:
        from ember.runtime.devices import default_device

        code = lower_group_code(with_knobs(group, knobs), target)
        self.device = device if device is not None else default_device(target.kind)
        self.program = self.device.build(device_code(model_source([code], target), target))
        self.launches = code.launches
        self._outputs = [np.zeros(v.type.shape, v.type.dtype.numpy) for v in group.outputs]
        arrays = list(inputs)
        args = len(arrays) + len(self._outputs)
        used = max((i for launch in self.launches for i in launch.buffers), default=-1) + 1
        if used > args + len(code.temporaries):
            raise TuningError(f"fused group '{group.name}': its kernels use {used} buffers but "
                              f"it has {args} arguments and {len(code.temporaries)} "
                              "temporaries (weights packed at compile time are not measured "
                              "on GPU targets)")
        self.buffers = []
        for array in arrays + self._outputs:
            buf = self.device.alloc(max(array.nbytes, 1))
            self.device.copy_in(buf, np.ascontiguousarray(array))
            self.buffers.append(buf)
        self.buffers += [self.device.alloc(max(n, 1)) for n in code.temporaries]
        self._first_output = len(arrays)

    def _enqueue(self) -> list[Any]:
        events = []
        device = self.device
        for launch in self.launches:
            args: list[Any] = []
            for i in launch.buffers:
                args += device.buffer_args(self.buffers[i], 0)
            args += [device.scalar_arg(v, np.dtype(np.int32)) for v in launch.values]
            events.append(device.launch(self.program, launch.kernel, args, launch.grid,
                                        launch.block))
        return events

    def run(self) -> None:
        self._enqueue()
        self.device.synchronize()

    def timed(self, number: int) -> float:
        """Device seconds of `number` calls, first launch's start to last launch's end."""
        first = last = None
        for _ in range(number):
            events = self._enqueue()
            first = first if first is not None else events[0]
            last = events[-1]
        if first is None:
            return 0.0
        return float(self.device.elapsed(first, last))

    @property
    def outputs(self) -> list[np.ndarray]:
        for i, out in enumerate(self._outputs):
            self.device.copy_out(out, self.buffers[self._first_output + i])
        return self._outputs


__all__ = ["GpuGroupKernel"]
