"""DeviceModel: a compiled model running on a GPU device (OpenCL, CUDA).

Weights are copied to the device once, when the model is loaded; the workspace (every
intermediate, at the memory plan's byte offsets) lives there too. A run copies each input
in once, launches every kernel of the plan in order on the device's queue, and copies each
output back once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ember.dtype import numpy_dtype
from ember.runtime.device_module import Launch
from ember.runtime.library import check_inputs
from ember.runtime.plan import ExecPlan, Slot


class DeviceModel:
    """`model.run(inputs) -> outputs`, like CompiledModel, on `device`.

    `launches[symbol]` runs one group's kernels; their buffer indices count the group's
    arguments (its plan call's slots) first, then `temporaries[symbol]` (byte sizes)."""

    def __init__(self, plan: ExecPlan, device: Any, code: str,
                 launches: Mapping[str, Sequence[Launch]],
                 temporaries: Mapping[str, Sequence[int]], constants: np.ndarray,
                 target: str, graph: Any = None, stats: Mapping[str, Any] | None = None,
                 source: str = "") -> None:
        self.plan = plan
        self.device = device
        self.target = target
        self.graph = graph
        self.stats = dict(stats or {})
        self.source = source or code
        self.launches = {k: tuple(v) for k, v in launches.items()}
        self.program = device.build(code)
        self._temporaries = {k: [device.alloc(n) for n in sizes]
                             for k, sizes in temporaries.items()}
        self._workspace = device.alloc(plan.workspace_bytes)
        self._constants = device.alloc(plan.constant_bytes)
        blob = constants.view(np.uint8).reshape(-1)[:plan.constant_bytes]
        device.copy_in(self._constants, blob)
        self._inputs = [device.alloc(_nbytes(s)) for s in plan.inputs]
        self._outputs = [device.alloc(_nbytes(s)) for s in plan.outputs]
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return (f"DeviceModel({self.plan.name}: {len(self.plan.calls)} kernels on "
                f"{getattr(self.device, 'name', self.target)})")

    @property
    def inputs(self) -> tuple[Any, ...]:
        return self.plan.inputs

    @property
    def outputs(self) -> tuple[Any, ...]:
        return self.plan.outputs

    def _where(self, slot: Slot) -> tuple[Any, int]:
        if slot.kind == "input":
            return self._inputs[slot.index], 0
        if slot.kind == "output":
            return self._outputs[slot.index], 0
        if slot.kind == "workspace":
            return self._workspace, slot.index
        return self._constants, slot.index

    def run(self, inputs: Mapping[str, Any] | Sequence[Any]) -> list[np.ndarray]:
        """Outputs in graph-output order for inputs given by name (dict) or position (list)."""
        arrays = check_inputs(self.plan.name, self.plan.inputs, inputs)
        outputs = [np.empty(s.shape, numpy_dtype(s.dtype)) for s in self.plan.outputs]
        with self._lock:
            for buf, array in zip(self._inputs, arrays):
                self.device.copy_in(buf, array)
            self._launch_all()
            for i, source in enumerate(self.plan.output_sources):
                buf, offset = self._where(source)
                self.device.copy_out(outputs[i], buf, offset)
        return outputs

    def __call__(self, *arrays: Any) -> list[np.ndarray]:
        return self.run(list(arrays))

    def _launch_all(self) -> list[Any]:
        events = []
        device = self.device
        for call in self.plan.calls:
            places = [self._where(slot) for slot in call.args]
            places += [(t, 0) for t in self._temporaries.get(call.symbol, [])]
            for launch in self.launches[call.symbol]:
                args: list[Any] = []
                for i in launch.buffers:
                    args += device.buffer_args(*places[i])
                args += [device.scalar_arg(v, np.dtype(np.int32)) for v in launch.values]
                events.append(device.launch(self.program, launch.kernel, args, launch.grid,
                                            launch.block))
        return events

    def time(self, inputs: Mapping[str, Any] | Sequence[Any], repeat: int = 10) -> float:
        """Median seconds of one run (copies included) over `repeat` runs after a warm-up."""
        self.run(inputs)
        samples = []
        for _ in range(max(1, repeat)):
            start = time.perf_counter()
            self.run(inputs)
            samples.append(time.perf_counter() - start)
        return float(np.median(samples))


def _nbytes(spec: Any) -> int:
    return int(np.prod(spec.shape, dtype=np.int64)) * numpy_dtype(spec.dtype).itemsize
