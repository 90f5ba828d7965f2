"""The OpenCL device API through pyopencl: allocate, copy, build, launch, synchronize, time.

    device = OpenCLDevice()                    # the first GPU, else the first device
    buf = device.alloc(4096)
    device.copy_in(buf, x); ...; device.copy_out(y, buf)
"""

from __future__ import annotations

import hashlib
from typing import Any, Sequence

import numpy as np

from ember.errors import EmberError


class DeviceError(EmberError):
    """No usable device, a build failure or a failed device call."""


def _pyopencl() -> Any:
    try:
        import pyopencl
    except ImportError:
        raise DeviceError("the OpenCL runtime needs pyopencl and an OpenCL driver: "
                          "pip install 'ember[gpu]' (on CPUs, PoCL: apt-get install "
                          "pocl-opencl-icd)") from None
    return pyopencl


def _pick_device(cl: Any) -> Any:
    try:
        platforms = cl.get_platforms()
    except Exception as error:  # noqa: BLE001 (pyopencl raises LogicError without an ICD)
        raise DeviceError(f"no OpenCL platform found ({error}); install a driver, e.g. "
                          "pocl-opencl-icd") from None
    devices = [d for p in platforms for d in p.get_devices()]
    if not devices:
        raise DeviceError("OpenCL platforms were found but they have no devices")
    gpus = [d for d in devices if d.type & cl.device_type.GPU]
    return (gpus or devices)[0]


class OpenCLDevice:
    """One OpenCL device with an in-order, profiling command queue."""

    kind = "opencl"

    def __init__(self) -> None:
        cl = self.cl = _pyopencl()
        self.device = _pick_device(cl)
        self.context = cl.Context([self.device])
        self.queue = cl.CommandQueue(
            self.context, properties=cl.command_queue_properties.PROFILING_ENABLE)
        self._programs: dict[str, Any] = {}
        self._kernels: dict[tuple[int, str], Any] = {}

    @property
    def name(self) -> str:
        return str(self.device.name)

    @property
    def max_threads_per_block(self) -> int:
        return int(self.device.max_work_group_size)

    @property
    def shared_memory_bytes(self) -> int:
        return int(self.device.local_mem_size)

    # memory -------------------------------------------------------------------------------
    def alloc(self, nbytes: int) -> Any:
        """A device buffer of at least `nbytes` bytes (OpenCL rejects zero-size buffers)."""
        return self.cl.Buffer(self.context, self.cl.mem_flags.READ_WRITE, max(int(nbytes), 4))

    def copy_in(self, buffer: Any, array: np.ndarray, offset: int = 0) -> None:
        if array.nbytes:
            self.cl.enqueue_copy(self.queue, buffer, np.ascontiguousarray(array),
                                 dst_offset=offset)

    def copy_out(self, array: np.ndarray, buffer: Any, offset: int = 0) -> None:
        """Copy device bytes into `array` (blocking: the array is filled on return)."""
        if array.nbytes:
            self.cl.enqueue_copy(self.queue, array, buffer, src_offset=offset)

    # code ---------------------------------------------------------------------------------
    def build(self, source: str) -> Any:
        """The compiled program of `source` (built once per device and source text)."""
        key = hashlib.sha256(source.encode()).hexdigest()
        if key not in self._programs:
            try:
                self._programs[key] = self.cl.Program(self.context, source).build(
                    options=["-cl-std=CL1.2"])
            except self.cl.RuntimeError as error:
                raise DeviceError(f"the OpenCL compiler rejected the generated source: "
                                  f"{error}") from None
        return self._programs[key]

    def launch(self, program: Any, name: str, args: Sequence[Any],
               grid: tuple[int, int, int], block: tuple[int, int, int]) -> Any:
        """Enqueue kernel `name` over `grid` blocks of `block` threads; returns its event."""
        key = (id(program), name)
        kernel = self._kernels.get(key)
        if kernel is None:  # each retrieval makes a new kernel object: keep one per name
            kernel = self._kernels[key] = self.cl.Kernel(program, name)
        global_size = tuple(g * b for g, b in zip(grid, block))
        try:
            return kernel(self.queue, global_size, tuple(block), *args)
        except self.cl.Error as error:
            raise DeviceError(f"launching OpenCL kernel '{name}' (grid {grid}, block {block})"
                              f" failed: {error}") from None

    def synchronize(self) -> None:
        self.queue.finish()

    @staticmethod
    def elapsed(start: Any, end: Any) -> float:
        """Seconds from the start of event `start` to the end of event `end`."""
        end.wait()
        return float(end.profile.end - start.profile.start) * 1e-9

    # argument packing ---------------------------------------------------------------------
    @staticmethod
    def buffer_args(buffer: Any, offset: int) -> list[Any]:
        """Kernel arguments of one buffer: base and byte offset (see ember.codegen.opencl)."""
        return [buffer, np.uint64(offset)]

    @staticmethod
    def scalar_arg(value: Any, dtype: np.dtype) -> Any:
        return dtype.type(value)
