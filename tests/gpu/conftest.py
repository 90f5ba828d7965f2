"""GPU tests: OpenCL runs on whatever device pyopencl finds (PoCL on CPUs); tests that need
one skip with the reason when there is none."""

import os

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "heavy: a whole model on PoCL, a minute or more on "
                            "two cores (still run in CI; -m 'not heavy' skips it locally)")


def _opencl_reason() -> str:
    try:
        from ember.runtime.devices import default_device

        default_device("opencl")
    except Exception as error:  # noqa: BLE001 (no pyopencl, no ICD, no device)
        return f"no OpenCL device: {error}"
    return ""


@pytest.fixture(scope="session")
def opencl() -> None:
    reason = _opencl_reason()
    if reason:
        pytest.skip(reason)


def require(found: object, what: str) -> None:
    """Skip without `what`, except in CI (CI=true), which installs it: there it fails."""
    if not found:
        if os.environ.get("CI"):
            pytest.fail(f"{what} is missing in CI (.ci/run installs it)")
        pytest.skip(f"{what} not installed")


@pytest.fixture(scope="session")
def ptxas_tool() -> str:
    """ptxas and libdevice (the nvidia-cuda-nvcc-cu12 wheel of the test extra, or a toolkit)."""
    from ember.codegen.llvm_gpu import find_libdevice
    from ember.codegen.nvptx import find_ptxas

    require(find_ptxas(), "ptxas (pip install 'ember[cuda]')")
    require(find_libdevice(), "libdevice.10.bc (pip install 'ember[cuda]')")
    return find_ptxas()  # type: ignore[return-value]
