"""DeviceModule: a function compiled into GPU kernels, callable with numpy arrays.

It holds the kernels' code and a launch list: which kernel runs over which grid, reading
which buffers (parameters or temporaries the module allocates on the device). A call copies
every input to the device once, runs the launches in order and copies back what they wrote.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence


from ember.errors import ArgumentError
from ember.runtime.module import Param, check_argument


@dataclass(frozen=True)
class Launch:
    """Run `kernel` over `grid` blocks of `block` threads with buffers `buffers` (indices
    into the module's parameters, then its temporaries) and scalar parameters `scalars`."""

    kernel: str
    buffers: tuple[int, ...]
    scalars: tuple[int, ...]
    grid: tuple[int, int, int]
    block: tuple[int, int, int]


class DeviceModule:
    """`f(a, b, c)` like ember.runtime.module.Module, running on `device`."""

    def __init__(self, name: str, device: Any, code: str, params: tuple[Param, ...],
                 temporaries: Sequence[int], launches: Sequence[Launch],
                 sources: dict[str, str] | None = None) -> None:
        self.name = name
        self.device = device
        self.params = params
        self.launches = tuple(launches)
        self.sources = dict(sources or {})
        self.program = device.build(code)
        self._temporaries = [device.alloc(n) for n in temporaries]

    def get_source(self, fmt: str = "") -> str:
        fmt = fmt or next(iter(self.sources), "")
        if fmt not in self.sources:
            raise ArgumentError(f"module '{self.name}' has no '{fmt}' source; available: "
                                f"{sorted(self.sources)}")
        return self.sources[fmt]

    def __call__(self, *args: Any) -> None:
        if len(args) != len(self.params):
            names = ", ".join(p.name for p in self.params)
            raise ArgumentError(f"'{self.name}' takes {len(self.params)} arguments ({names}), "
                                f"got {len(args)}")
        arrays = [check_argument(self.name, p, a) for p, a in zip(self.params, args)]
        device = self.device
        buffers: list[Any] = []
        for param, array in zip(self.params, arrays):
            if param.shape is not None:
                buf = device.alloc(array.nbytes)
                device.copy_in(buf, array)
                buffers.append(buf)
        buffers += self._temporaries
        scalars = [device.scalar_arg(a, p.dtype.numpy) for p, a in zip(self.params, arrays)
                   if p.shape is None]
        self.run(buffers, scalars)
        position = 0
        for param, array in zip(self.params, arrays):
            if param.shape is not None:
                if param.written:
                    device.copy_out(array, buffers[position])
                position += 1

    def run(self, buffers: Sequence[Any], scalars: Sequence[Any],
            offsets: Sequence[int] | None = None) -> list[Any]:
        """Enqueue every launch over device `buffers` (with byte `offsets`); their events."""
        offsets = offsets or [0] * len(buffers)
        events = []
        for launch in self.launches:
            args: list[Any] = []
            for i in launch.buffers:
                args += self.device.buffer_args(buffers[i], offsets[i])
            args += [scalars[i] for i in launch.scalars]
            events.append(self.device.launch(self.program, launch.kernel, args, launch.grid,
                                             launch.block))
        return events
