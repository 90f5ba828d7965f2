"""The generated operator table is current: regenerate it with `python docs/operators.py`."""

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("onnx")
DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_operator_table_is_current() -> None:
    spec = importlib.util.spec_from_file_location("docs_operators", DOCS / "operators.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    text = module.table()
    assert "| Relu | elemwise | X |" in text and "| Reshape |" in text
    assert (DOCS / "operators.md").read_text() == text, \
        "docs/operators.md is stale: run python docs/operators.py"
