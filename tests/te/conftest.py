import pytest

TARGETS = ["llvm", "c"]


@pytest.fixture(params=TARGETS)
def target(request: pytest.FixtureRequest) -> str:
    return request.param
