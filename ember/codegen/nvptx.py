"""CUDA C -> PTX with the CUDA toolkit's compiler (nvcc -ptx), and PTX -> cubin with ptxas.

ptxas is found on PATH, under $CUDA_HOME/bin, or in the `nvidia-cuda-nvcc-cu12` wheel
(`pip install 'ember[cuda]'`, which also carries libdevice), so PTX assembles on any machine
without a GPU or a toolkit install: `assemble_ptx(ptx, "sm_90")` is the check that the driver
would accept the code.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

from ember.errors import CodegenError
from ember.target import Target


def _toolkit_homes() -> list[str]:
    """Directories that may hold a CUDA toolkit (bin/, nvvm/): $CUDA_HOME, $CUDA_PATH,
    /usr/local/cuda, then the nvidia-cuda-nvcc wheel's package directory."""
    homes = [os.environ.get("CUDA_HOME", ""), os.environ.get("CUDA_PATH", ""),
             "/usr/local/cuda"]
    try:
        import importlib.util

        spec = importlib.util.find_spec("nvidia.cuda_nvcc")
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        homes += list(spec.submodule_search_locations)
    return [h for h in homes if h]


def find_tool(name: str) -> str | None:
    """A CUDA toolkit program (nvcc, ptxas) on PATH or in a toolkit home, else None."""
    found = shutil.which(name)
    if found:
        return found
    for home in _toolkit_homes():
        candidate = os.path.join(home, "bin", name)
        if os.access(candidate, os.X_OK):
            return candidate
    return None


def find_ptxas() -> str | None:
    """ptxas on PATH, in $CUDA_HOME/bin or in the nvidia-cuda-nvcc wheel, else None."""
    return find_tool("ptxas")


def assemble_ptx(ptx: str, arch: str = "sm_90") -> bytes:
    """The cubin of PTX text for `arch`, assembled by ptxas (CodegenError with ptxas'
    message when it rejects the PTX, or when no ptxas is installed)."""
    ptxas = find_ptxas()
    if ptxas is None:
        raise CodegenError("assembling PTX needs ptxas, which is not installed; "
                           "pip install 'ember[cuda]' (nvidia-cuda-nvcc-cu12) or set CUDA_HOME")
    with tempfile.TemporaryDirectory(prefix="ember-ptxas-") as tmp:
        source, cubin = os.path.join(tmp, "kernels.ptx"), os.path.join(tmp, "kernels.cubin")
        with open(source, "w") as f:
            f.write(ptx)
        result = subprocess.run([ptxas, f"-arch={arch}", source, "-o", cubin],
                                capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise CodegenError(f"ptxas rejected the PTX (-arch={arch}):\n"
                               f"{result.stderr.strip()[:2000]}")
        with open(cubin, "rb") as f:
            return f.read()


def find_nvcc() -> str | None:
    """nvcc on PATH or under $CUDA_HOME/bin, else None."""
    return find_tool("nvcc")


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
