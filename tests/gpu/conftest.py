"""GPU tests: OpenCL runs on whatever device pyopencl finds (PoCL on CPUs); tests that need
one skip with the reason when there is none."""

import pytest


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
