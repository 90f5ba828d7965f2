"""The CUDA device API through ctypes on the driver library (libcuda): allocate, copy, load
PTX, launch, synchronize, time. Only the driver is needed, no toolkit.

    device = CudaDevice()      # DeviceError when there is no driver or no GPU
"""

from __future__ import annotations

import ctypes
import ctypes.util
from typing import Any, Sequence

import numpy as np

from ember.runtime.opencl import DeviceError

__all__ = ["CudaDevice", "DeviceError", "load_driver"]


def load_driver() -> ctypes.CDLL:
    """libcuda, or DeviceError saying that no NVIDIA driver is installed."""
    name = ctypes.util.find_library("cuda") or "libcuda.so.1"
    try:
        return ctypes.CDLL(name)
    except OSError:
        raise DeviceError("the CUDA runtime needs the NVIDIA driver (libcuda.so.1), which "
                          "is not installed on this machine") from None


class CudaDevice:
    """Device 0 through the CUDA driver API, with its primary context."""

    kind = "cuda"

    def __init__(self, ordinal: int = 0) -> None:
        self.lib = load_driver()
        self._check(self.lib.cuInit(0), "cuInit")
        self.handle = ctypes.c_int()
        self._check(self.lib.cuDeviceGet(ctypes.byref(self.handle), ordinal), "cuDeviceGet")
        self.context = ctypes.c_void_p()
        self._check(self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(self.context), self.handle),
                    "cuDevicePrimaryCtxRetain")
        self._check(self.lib.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")
        self._modules: dict[str, ctypes.c_void_p] = {}

    def _check(self, status: int, call: str) -> None:
        if status != 0:
            text = ctypes.c_char_p()
            self.lib.cuGetErrorString(status, ctypes.byref(text))
            message = text.value.decode() if text.value else f"error {status}"
            raise DeviceError(f"{call} failed: {message}")

    def alloc(self, nbytes: int) -> int:
        pointer = ctypes.c_uint64()
        self._check(self.lib.cuMemAlloc_v2(ctypes.byref(pointer), ctypes.c_size_t(max(nbytes, 4))),
                    "cuMemAlloc")
        return int(pointer.value)

    def copy_in(self, buffer: int, array: np.ndarray, offset: int = 0) -> None:
        data = np.ascontiguousarray(array)
        self._check(self.lib.cuMemcpyHtoD_v2(ctypes.c_uint64(buffer + offset),
                                             data.ctypes.data_as(ctypes.c_void_p),
                                             ctypes.c_size_t(data.nbytes)), "cuMemcpyHtoD")

    def copy_out(self, array: np.ndarray, buffer: int, offset: int = 0) -> None:
        self._check(self.lib.cuMemcpyDtoH_v2(array.ctypes.data_as(ctypes.c_void_p),
                                             ctypes.c_uint64(buffer + offset),
                                             ctypes.c_size_t(array.nbytes)), "cuMemcpyDtoH")

    def build(self, ptx: str) -> ctypes.c_void_p:
        """The loaded module of PTX text (the driver JIT-compiles it for this GPU)."""
        if ptx not in self._modules:
            module = ctypes.c_void_p()
            self._check(self.lib.cuModuleLoadData(ctypes.byref(module), ptx.encode() + b"\0"),
                        "cuModuleLoadData")
            self._modules[ptx] = module
        return self._modules[ptx]

    def launch(self, module: ctypes.c_void_p, name: str, args: Sequence[Any],
               grid: tuple[int, int, int], block: tuple[int, int, int]) -> None:
        function = ctypes.c_void_p()
        self._check(self.lib.cuModuleGetFunction(ctypes.byref(function), module, name.encode()),
                    f"cuModuleGetFunction({name})")
        holders = [a if isinstance(a, ctypes._SimpleCData) else ctypes.c_uint64(a) for a in args]
        pointers = (ctypes.c_void_p * max(len(holders), 1))(
            *[ctypes.cast(ctypes.byref(h), ctypes.c_void_p) for h in holders])
        self._check(self.lib.cuLaunchKernel(function, *grid, *block, 0, None, pointers, None),
                    f"cuLaunchKernel({name})")

    def synchronize(self) -> None:
        self._check(self.lib.cuCtxSynchronize(), "cuCtxSynchronize")

    @staticmethod
    def buffer_args(buffer: int, offset: int) -> list[Any]:
        return [ctypes.c_uint64(buffer + offset)]

    @staticmethod
    def scalar_arg(value: Any, dtype: np.dtype) -> Any:
        return np.ctypeslib.as_ctypes_type(dtype)(value)

