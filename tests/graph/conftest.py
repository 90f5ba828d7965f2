"""Fixtures for graph pass tests."""

import pytest

from tests.graph.runner import add_stand_ins


@pytest.fixture
def stand_ins(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ops the tests need (Conv, MatMul, ...) get pattern-only entries while they are missing."""
    add_stand_ins(monkeypatch.setitem)
