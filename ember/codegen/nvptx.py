"""CUDA C -> PTX with the CUDA toolkit's compiler (nvcc -ptx), for the CUDA driver to load."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

from ember.errors import CodegenError
from ember.target import Target


def find_nvcc() -> str | None:
    """nvcc on PATH or under $CUDA_HOME/bin, else None."""
    found = shutil.which("nvcc")
    if found:
        return found
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    candidate = os.path.join(home, "bin", "nvcc")
    return candidate if os.access(candidate, os.X_OK) else None


def cuda_to_ptx(source: str, target: Target) -> str:
    """PTX text of CUDA C `source` for the target's -arch (default sm_70)."""
    nvcc = find_nvcc()
    if nvcc is None:
        raise CodegenError("compiling CUDA C needs nvcc (the CUDA toolkit), which is not "
                           "installed; set CUDA_HOME or put nvcc on PATH")
    arch = target.option("arch", "sm_70")
    with tempfile.TemporaryDirectory(prefix="ember-cuda-") as tmp:
        path = os.path.join(tmp, "kernels.cu")
        with open(path, "w") as f:
            f.write(source)
        result = subprocess.run([nvcc, "-ptx", f"-arch={arch}", "-O3", path, "-o",
                                 os.path.join(tmp, "kernels.ptx")],
                                capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise CodegenError(f"nvcc rejected the generated CUDA C (-arch={arch}):\n"
                               f"{result.stderr.strip()}")
        with open(os.path.join(tmp, "kernels.ptx")) as f:
            return f.read()
