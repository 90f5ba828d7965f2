"""The default device of each GPU kind, opened once per process on first use."""

from __future__ import annotations

import functools
from typing import Any

from ember.errors import EmberError


@functools.cache
def default_device(kind: str) -> Any:
    """The first OpenCL / CUDA device (DeviceError when there is none)."""
    if kind == "opencl":
        from ember.runtime.opencl import OpenCLDevice

        return OpenCLDevice()
    if kind == "cuda":
        from ember.runtime.cuda import CudaDevice

        return CudaDevice()
    raise EmberError(f"no runtime for GPU kind '{kind}' in this build: OpenCL and CUDA run "
                     "here; generate code for the others with ember.build.gpu_source")
